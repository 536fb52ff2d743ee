// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"context"
	"math/rand"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

func TestNearestOld(t *testing.T) {
	tests := []struct {
		name   string
		times  []int64
		window int64
		want   int
	}{
		{"alone, the newest is old", []int64{100}, 60, 0},
		{"the newest is never old when others exist", []int64{0, 1000}, 60, 0},
		{"exact age", []int64{0, 60, 120}, 60, 1},
		{"nearest, not the first below the window", []int64{0, 50, 110, 120}, 60, 1},
		{"a tie goes to the older", []int64{0, 50, 70, 120}, 60, 1},
		{"buffer shorter than the window gives the oldest", []int64{0, 10, 20}, 600, 0},
		{"walk stops when the distance grows", []int64{0, 10, 65, 125}, 60, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nearestOld(tt.times, tt.window); got != tt.want {
				t.Errorf("nearestOld(%v, %d) = %d, want %d", tt.times, tt.window, got, tt.want)
			}
		})
	}
}

func sample(host string, session int64, pid int32, cpu int64) snapshot.ProcessSample {
	return snapshot.ProcessSample{Kind: pipeline.KindProcess, Host: host, TmID: testTmID, Session: session, PID: pid, Creation: 1,
		Values: [pipeline.NumFigures]int64{pipeline.CPUUser: cpu}, Present: 1<<pipeline.NumCounters - 1}
}

func ingest(t *testing.T, s *store, at time.Duration, procs ...snapshot.ProcessSample) {
	t.Helper()
	if err := s.begin(int64(at)); err != nil {
		t.Fatal(err)
	}
	for i := range procs {
		if err := s.add(&procs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.commit(nil); err != nil {
		t.Fatal(err)
	}
}

func TestAutomaticBufferKeepsTheLongestWindowAndAtLeast30(t *testing.T) {
	tests := []struct {
		name    string
		windows []time.Duration
		want    int
	}{
		{"short window keeps the floor of 30", []time.Duration{time.Minute}, 30},
		{"10m at 10s keeps 61 snapshots", []time.Duration{time.Minute, 10 * time.Minute}, 61},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(tt.windows, 0)
			for i := range 100 {
				ingest(t, s, time.Duration(i)*10*time.Second, sample("sdw1", 1, 10, int64(i)))
			}
			if len(s.windows.retained) != tt.want {
				t.Errorf("ring holds %d snapshots, want %d", len(s.windows.retained), tt.want)
			}
		})
	}
}

func TestExplicitMaxStoredPointsTrims(t *testing.T) {
	s := newStore([]time.Duration{10 * time.Minute}, 5)
	for i := range 20 {
		ingest(t, s, time.Duration(i)*10*time.Second, sample("sdw1", 1, 10, int64(i)*1e9))
	}
	if len(s.windows.retained) != 5 {
		t.Fatalf("ring holds %d snapshots, want 5", len(s.windows.retained))
	}
	f := s.computeFigures()
	if got := f.windows[0].span; got != int64(40*time.Second) {
		t.Errorf("span = %v, want 40s (the oldest of 5 kept)", time.Duration(got))
	}
	if got := f.windows[0].deltas[0][pipeline.CPUUser]; got != 4e9 {
		t.Errorf("cpu delta = %d, want 4e9", got)
	}
}

func TestExitedProcessesAreFreedOnceOutOfTheBuffer(t *testing.T) {
	s := newStore([]time.Duration{time.Minute}, 3)
	ingest(t, s, 0, sample("sdw1", 1, 10, 1), sample("sdw1", 2, 20, 1))
	for i := 1; i <= 4; i++ {
		ingest(t, s, time.Duration(i)*time.Minute, sample("sdw1", 1, 10, int64(i)))
	}
	if len(s.procs.index) != 1 || len(s.sessions.index) != 1 {
		t.Errorf("%d processes and %d sessions still indexed, want 1 and 1", len(s.procs.index), len(s.sessions.index))
	}
	ingest(t, s, 5*time.Minute, sample("sdw1", 1, 10, 5), sample("sdw1", 3, 30, 1))
	if len(s.procs.keys) != 2 || len(s.sessions.keys) != 2 {
		t.Errorf("freed rows not reused: %d process rows, %d session rows", len(s.procs.keys), len(s.sessions.keys))
	}
}

func TestSessionIndexFindsOneSessionsRows(t *testing.T) {
	s := newStore([]time.Duration{time.Minute}, 0)
	var procs []snapshot.ProcessSample
	for i := range 300 {
		procs = append(procs, sample("sdw1", int64(i%7), int32(i), 0))
	}
	ingest(t, s, 0, procs...)
	sn := s.windows.retained[0]
	total := 0
	for id := range int64(7) {
		rows := sn.sessionRows(s.sessions.index[pipeline.SessionKey{TmID: testTmID, ID: id}])
		total += len(rows)
		for _, r := range rows {
			if got := s.sessions.keys[s.procs.keys[r].session].ID; got != id {
				t.Errorf("session %d's rows hold a process of session %d", id, got)
			}
		}
	}
	if total != 300 {
		t.Errorf("rows over all sessions = %d, want 300", total)
	}
	if rows := sn.sessionRows(9999); rows != nil {
		t.Errorf("unknown session has rows %v", rows)
	}
}

func TestDuplicateProcessInOneSnapshotIsRejected(t *testing.T) {
	s := newStore([]time.Duration{time.Minute}, 0)
	if err := s.begin(1); err != nil {
		t.Fatal(err)
	}
	p := sample("sdw1", 1, 10, 5)
	if err := s.add(&p); err != nil {
		t.Fatal(err)
	}
	if err := s.add(&p); err != errDuplicateProcess {
		t.Errorf("second add = %v, want errDuplicateProcess", err)
	}
}

func TestFiguresDoNotDependOnProcessOrder(t *testing.T) {
	cfg := &Config{Windows: []time.Duration{time.Minute}}
	build := func(rng *rand.Rand) []pmetric.Metrics {
		var out []pmetric.Metrics
		for k := range 3 {
			var procs = []struct {
				host     string
				seg, pid int64
			}{{"sdw1", 0, 1}, {"sdw1", 1, 2}, {"sdw2", 2, 3}, {"sdw2", 3, 4}, {"sdw3", 4, 5}}
			rng.Shuffle(len(procs), func(i, j int) { procs[i], procs[j] = procs[j], procs[i] })
			s := snap(float64(k*60), nil, []int64{1})
			for _, p := range procs {
				pr := withMemory(proc(p.host, p.seg, 1, p.pid, -10, float64(k)*float64(p.pid), int64(k)*p.pid), 10*p.pid, p.pid, 2*p.pid, 3*p.pid)
				s.Processes = append(s.Processes, pr)
			}
			out = append(out, s.Metrics())
		}
		return out
	}
	var first string
	for seed := int64(1); seed <= 5; seed++ {
		p, sink := newTestProcessor(t, cfg)
		for _, md := range build(rand.New(rand.NewSource(seed))) {
			if err := p.ConsumeMetrics(context.Background(), md); err != nil {
				t.Fatal(err)
			}
		}
		out := sink.AllMetrics()[2]
		got := pmetric.NewMetrics()
		rms := out.ResourceMetrics()
		for i := range rms.Len() {
			if pipeline.KindOf(rms.At(i).Resource().Attributes()) == pipeline.KindSession {
				rms.At(i).CopyTo(got.ResourceMetrics().AppendEmpty())
			}
		}
		if s := marshal(t, got); first == "" {
			first = s
		} else if s != first {
			t.Fatalf("seed %d: session figures differ with another process order", seed)
		}
	}
	p, sink := newTestProcessor(t, cfg)
	for _, md := range build(rand.New(rand.NewSource(1))) {
		_ = p.ConsumeMetrics(context.Background(), md)
	}
	if got := figure(t, sink.AllMetrics()[2], 1, pipeline.MetricSessionMemoryUsage, pipeline.AttrMemoryType, pipeline.MemoryTypeRSS, pipeline.AttrMemoryAggregation, pipeline.MemoryAggregationMaxHost); got != 70 {
		t.Errorf("max_host rss = %v, want 70 (sdw2: 30 + 40)", got)
	}
}

func TestBadProcessResourcesAreSkippedNotFatal(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	md := snap(0, nil, []int64{1}, proc("sdw1", 0, 1, 100, -10, 5, 0), proc("sdw1", 1, 1, 101, -10, 7, 0)).Metrics()
	rms := md.ResourceMetrics()
	broken := 0
	for i := range rms.Len() {
		if pipeline.KindOf(rms.At(i).Resource().Attributes()) != pipeline.KindProcess {
			continue
		}
		ms := rms.At(i).ScopeMetrics().At(0).Metrics()
		for j := range ms.Len() {
			forEachPoint(ms.At(j), func(dp pmetric.NumberDataPoint) {
				if pid, _ := dp.Attributes().Get(pipeline.AttrProcessPID); pid.Int() == 101 {
					dp.SetStartTimestamp(0) // no creation time: no identity
					broken = 1
				}
			})
		}
	}
	bad := rms.AppendEmpty()
	bad.Resource().Attributes().PutStr(pipeline.AttrResourceKind, pipeline.KindProcess.String()) // no identity at all
	if broken != 1 {
		t.Fatal("test set-up: process 101 not found")
	}
	if err := p.ConsumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	out := sink.AllMetrics()[0]
	if got := figure(t, out, 1, pipeline.MetricSessionCPUTime, pipeline.AttrWindow, pipeline.WindowLifetime, pipeline.AttrCPUMode, pipeline.CPUModeUser); got != 5 {
		t.Errorf("lifetime cpu = %v, want 5 (only the valid process)", got)
	}
	if got := figure(t, out, 1, pipeline.MetricSessionProcesses); got != 1 {
		t.Errorf("processes = %v, want 1", got)
	}
}

func TestSnapshotWithoutAnyTimestampIsForwardedWithoutFigures(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	md := pmetric.NewMetrics()
	md.ResourceMetrics().AppendEmpty().Resource().Attributes().PutStr(pipeline.AttrResourceKind, pipeline.KindSnapshot.String())
	sess := md.ResourceMetrics().AppendEmpty().Resource().Attributes()
	sess.PutStr(pipeline.AttrResourceKind, pipeline.KindSession.String())
	sess.PutInt(pipeline.AttrSessionID, 1)
	if err := p.ConsumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	if _, err := lookupFigure(sink.AllMetrics()[0], 1, pipeline.MetricSessionProcesses); err == nil {
		t.Error("a snapshot without a time got figures")
	}
}
