// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"context"
	"math"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
)

type want struct {
	session int64
	metric  string
	attrs   []string
	value   float64
}

func cpuUser(session int64, window string, v float64) want {
	return want{session, pipeline.MetricSessionCPUTime, []string{pipeline.AttrWindow, window, pipeline.AttrCPUMode, pipeline.CPUModeUser}, v}
}

func readBytes(session int64, window string, v float64) want {
	return want{session, pipeline.MetricSessionDiskIO, []string{pipeline.AttrWindow, window, pipeline.AttrDirection, pipeline.DirectionRead}, v}
}

func span(session int64, window string, v float64) want {
	return want{session, pipeline.MetricSessionWindowSpan, []string{pipeline.AttrWindow, window}, v}
}

func partial(session int64, window string, v float64) want {
	return want{session, pipeline.MetricSessionPartial, []string{pipeline.AttrWindow, window}, v}
}

func memory(session int64, kind, agg string, v float64) want {
	return want{session, pipeline.MetricSessionMemoryUsage, []string{pipeline.AttrMemoryType, kind, pipeline.AttrMemoryAggregation, agg}, v}
}

func plain(session int64, metric string, v float64) want {
	return want{session, metric, nil, v}
}

func withMemory(p pipelinetest.Process, rss, anon, file, shmem int64) pipelinetest.Process {
	p.RSS, p.RSSAnon, p.RSSFile, p.RSSShmem = rss, anon, file, shmem
	return p
}

func TestWindowRules(t *testing.T) {
	one := []int64{1}
	tests := []struct {
		name    string
		windows []time.Duration
		snaps   []pipelinetest.Snapshot
		want    []want
	}{
		{
			name:    "counter that went down gives 0 for that process",
			windows: []time.Duration{time.Minute},
			snaps: []pipelinetest.Snapshot{
				snap(0, nil, one, proc("sdw1", 0, 1, 100, -10, 10, 1000), proc("sdw1", 1, 1, 101, -10, 1, 0)),
				snap(60, nil, one, proc("sdw1", 0, 1, 100, -10, 5, 500), proc("sdw1", 1, 1, 101, -10, 3, 0)),
			},
			want: []want{cpuUser(1, "1m", 2), readBytes(1, "1m", 0)},
		},
		{
			name:    "pid reused with a new creation time is a new process",
			windows: []time.Duration{time.Minute},
			snaps: []pipelinetest.Snapshot{
				snap(0, nil, one, proc("sdw1", 0, 1, 100, -10, 50, 0)),
				snap(60, nil, one, proc("sdw1", 0, 1, 100, 30, 3, 0)),
			},
			want: []want{cpuUser(1, "1m", 3), plain(1, pipeline.MetricSessionProcesses, 1)},
		},
		{
			name:    "process born inside the window counts from zero",
			windows: []time.Duration{time.Minute},
			snaps: []pipelinetest.Snapshot{
				snap(0, nil, one, proc("sdw1", 0, 1, 100, -10, 1, 0)),
				snap(60, nil, one, proc("sdw1", 0, 1, 100, -10, 2, 0), proc("sdw2", 1, 1, 200, 20, 7, 0)),
			},
			want: []want{cpuUser(1, "1m", 8), plain(1, pipeline.MetricSessionProcesses, 2), plain(1, pipeline.MetricSessionHosts, 2)},
		},
		{
			name:    "process that exited inside the window counts up to its last sighting",
			windows: []time.Duration{2 * time.Minute},
			snaps: []pipelinetest.Snapshot{
				snap(0, nil, one, proc("sdw1", 0, 1, 100, -10, 1, 0), proc("sdw1", 0, 1, 101, -10, 1, 0)),
				snap(60, nil, one, proc("sdw1", 0, 1, 100, -10, 2, 0), proc("sdw1", 0, 1, 101, -10, 4, 0)),
				snap(120, nil, one, proc("sdw1", 0, 1, 100, -10, 3, 0)),
			},
			want: []want{cpuUser(1, "2m", 2+3), partial(1, "2m", 0), plain(1, pipeline.MetricSessionProcesses, 1),
				cpuUser(1, pipeline.WindowLifetime, 3)},
		},
		{
			name:    "silent host keeps its processes' last sighting and marks the session partial",
			windows: []time.Duration{2 * time.Minute},
			snaps: []pipelinetest.Snapshot{
				snap(0, nil, []int64{1, 2}, proc("sdw1", 0, 1, 100, -10, 1, 0), proc("sdw2", 1, 1, 200, -10, 1, 0),
					proc("sdw1", 0, 2, 300, -10, 1, 0)),
				snap(60, nil, []int64{1, 2}, proc("sdw1", 0, 1, 100, -10, 2, 0), proc("sdw2", 1, 1, 200, -10, 5, 0),
					proc("sdw1", 0, 2, 300, -10, 2, 0)),
				snap(120, []string{"sdw2"}, []int64{1, 2}, proc("sdw1", 0, 1, 100, -10, 3, 0),
					proc("sdw1", 0, 2, 300, -10, 3, 0)),
			},
			want: []want{
				cpuUser(1, "2m", 2+4), partial(1, "2m", 1),
				cpuUser(1, pipeline.WindowLifetime, 3+5), partial(1, pipeline.WindowLifetime, 1),
				cpuUser(2, "2m", 2), partial(2, "2m", 0), partial(2, pipeline.WindowLifetime, 0),
			},
		},
		{
			name:    "memory is summed per host before the cluster total and the largest host",
			windows: []time.Duration{time.Minute},
			snaps: []pipelinetest.Snapshot{
				snap(0, nil, one,
					withMemory(proc("sdw1", 0, 1, 100, -10, 0, 0), 100, 60, 30, 10),
					withMemory(proc("sdw1", 1, 1, 101, -10, 0, 0), 100, 50, 40, 10),
					withMemory(proc("sdw2", 2, 1, 200, -10, 0, 0), 150, 120, 20, 10)),
			},
			want: []want{
				memory(1, pipeline.MemoryTypeRSS, pipeline.MemoryAggregationCluster, 350),
				memory(1, pipeline.MemoryTypeRSS, pipeline.MemoryAggregationMaxHost, 200),
				memory(1, pipeline.MemoryTypeRSSAnon, pipeline.MemoryAggregationMaxHost, 120),
				memory(1, pipeline.MemoryTypeRSSShared, pipeline.MemoryAggregationCluster, 120),
				memory(1, pipeline.MemoryTypeRSSShared, pipeline.MemoryAggregationMaxHost, 90),
				plain(1, pipeline.MetricSessionHosts, 2), plain(1, pipeline.MetricSessionProcesses, 3),
			},
		},
		{
			name:    "window longer than the buffer uses the oldest snapshot",
			windows: []time.Duration{10 * time.Minute},
			snaps: []pipelinetest.Snapshot{
				snap(0, nil, one, proc("sdw1", 0, 1, 100, -10, 1, 0)),
				snap(60, nil, one, proc("sdw1", 0, 1, 100, -10, 4, 0)),
				snap(120, nil, one, proc("sdw1", 0, 1, 100, -10, 9, 0)),
			},
			want: []want{cpuUser(1, "10m", 8), span(1, "10m", 120),
				{1, pipeline.MetricSessionCPUTime + pipeline.RateSuffix, []string{pipeline.AttrWindow, "10m", pipeline.AttrCPUMode, pipeline.CPUModeUser}, 8.0 / 120}},
		},
		{
			name:    "irregular intervals pick the snapshot whose age is nearest to the window",
			windows: []time.Duration{5 * time.Minute},
			snaps: []pipelinetest.Snapshot{
				snap(0, nil, one, proc("sdw1", 0, 1, 100, -10, 0, 0)),
				snap(170, nil, one, proc("sdw1", 0, 1, 100, -10, 17, 0)),
				snap(290, nil, one, proc("sdw1", 0, 1, 100, -10, 29, 0)),
				snap(320, nil, one, proc("sdw1", 0, 1, 100, -10, 32, 0)),
				snap(600, nil, one, proc("sdw1", 0, 1, 100, -10, 60, 0)),
			},
			want: []want{cpuUser(1, "5m", 31), span(1, "5m", 310)},
		},
		{
			name:    "one snapshot has a zero span, zero deltas and lifetime totals",
			windows: []time.Duration{time.Minute},
			snaps: []pipelinetest.Snapshot{
				snap(0, nil, one, proc("sdw1", 0, 1, 100, -10, 5, 700)),
			},
			want: []want{cpuUser(1, "1m", 0), span(1, "1m", 0), readBytes(1, "1m", 0),
				{1, pipeline.MetricSessionCPUTime + pipeline.RateSuffix, []string{pipeline.AttrWindow, "1m", pipeline.AttrCPUMode, pipeline.CPUModeUser}, 0},
				cpuUser(1, pipeline.WindowLifetime, 5), readBytes(1, pipeline.WindowLifetime, 700)},
		},
		{
			name:    "two snapshots diff newest against the first",
			windows: []time.Duration{time.Minute},
			snaps: []pipelinetest.Snapshot{
				snap(0, nil, one, proc("sdw1", 0, 1, 100, -10, 5, 700)),
				snap(30, nil, one, proc("sdw1", 0, 1, 100, -10, 6.5, 1000)),
			},
			want: []want{cpuUser(1, "1m", 1.5), span(1, "1m", 30), readBytes(1, "1m", 300),
				{1, pipeline.MetricSessionDiskIO + pipeline.RateSuffix, []string{pipeline.AttrWindow, "1m", pipeline.AttrDirection, pipeline.DirectionRead}, 10}},
		},
		{
			name:    "several windows each find their own old snapshot",
			windows: []time.Duration{time.Minute, 2 * time.Minute},
			snaps: []pipelinetest.Snapshot{
				snap(0, nil, one, proc("sdw1", 0, 1, 100, -10, 0, 0)),
				snap(60, nil, one, proc("sdw1", 0, 1, 100, -10, 1, 0)),
				snap(120, nil, one, proc("sdw1", 0, 1, 100, -10, 3, 0)),
			},
			want: []want{cpuUser(1, "1m", 2), cpuUser(1, "2m", 3), span(1, "1m", 60), span(1, "2m", 120)},
		},
		{
			name:    "a session without processes gets zero figures",
			windows: []time.Duration{time.Minute},
			snaps: []pipelinetest.Snapshot{
				snap(0, nil, []int64{9}),
				snap(60, nil, []int64{9}),
			},
			want: []want{cpuUser(9, "1m", 0), span(9, "1m", 60), plain(9, pipeline.MetricSessionProcesses, 0)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, sink := newTestProcessor(t, &Config{Windows: tt.windows})
			out := feed(t, p, sink, tt.snaps...)
			for _, w := range tt.want {
				if got := figure(t, out, w.session, w.metric, w.attrs...); math.Abs(got-w.value) > 1e-9 {
					t.Errorf("session %d %s %v = %v, want %v", w.session, w.metric, w.attrs, got, w.value)
				}
			}
		})
	}
}

func TestCounterFirstReportedLateStartsAsBaseline(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{2 * time.Minute}})
	noIO := proc("sdw1", 0, 1, 100, -10, 1, 0)
	noIO.NoIO = true
	withIO := func(read int64) pipelinetest.Process { return proc("sdw1", 0, 1, 100, -10, 1, read) }
	out := feed(t, p, sink,
		snap(0, nil, []int64{1}, noIO),
		snap(60, nil, []int64{1}, withIO(5000)),
		snap(120, nil, []int64{1}, withIO(5600)))
	if got := figure(t, out, 1, pipeline.MetricSessionDiskIO, pipeline.AttrWindow, "2m", pipeline.AttrDirection, pipeline.DirectionRead); got != 600 {
		t.Errorf("read bytes over 2m = %v, want 600 (what was read before the counter appeared is not in the window)", got)
	}
}

// A counter no process of a session reported (an unreadable io file,
// kernel.task_delayacct off) is left out of the session's and its query's
// figures, never written as 0; one process reporting it is enough.
func TestCountersNoProcessReportedAreNotWritten(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	unmeasured := func(pid int64, cpu float64) pipelinetest.Process {
		pr := proc("sdw1", 0, 7, pid, -10, cpu, 0)
		pr.NoIO, pr.NoDelayacct = true, true
		return pr
	}
	measured := func(cpu float64) pipelinetest.Process {
		pr := proc("sdw2", 1, 8, 300, -10, cpu, 100)
		pr.DiskDelay = cpu / 4
		return pr
	}
	unmeasuredToo := proc("sdw1", 0, 8, 301, -10, 1, 0)
	unmeasuredToo.NoDelayacct = true
	at := func(sec float64, procs ...pipelinetest.Process) pipelinetest.Snapshot {
		s := querySnap(sec, running(-5), nil, procs...)
		s.Sessions = append(s.Sessions, pipelinetest.Session{ID: 8, PID: 1008, DB: "postgres", User: "gpadmin", State: "active"})
		return s
	}
	out := feed(t, p, sink,
		at(0, unmeasured(100, 1), measured(1), unmeasuredToo),
		at(30, unmeasured(100, 2), measured(3), unmeasuredToo))
	for _, f := range [][]string{
		{pipeline.MetricSessionDiskIO, pipeline.AttrDirection, pipeline.DirectionRead},
		{pipeline.MetricSessionDiskDelay}, {pipeline.MetricSessionDiskDelay + pipeline.RateSuffix},
	} {
		if v, err := lookupFigure(out, 7, f[0], append([]string{pipeline.AttrWindow, "1m"}, f[1:]...)...); err == nil {
			t.Errorf("session 7 has %v = %v over 1m, yet none of its processes reported it", f, v)
		}
	}
	if rm, ok := queryResource(out, -5); !ok {
		t.Error("no query resource of session 7")
	} else if v, ok := lookupQueryFigure(rm, pipeline.QueryMetric(pipeline.MetricSessionDiskDelay)); ok {
		t.Errorf("session 7's query has a block I/O wait %v, yet none of its processes reported one", v)
	}
	if got := figure(t, out, 8, pipeline.MetricSessionDiskDelay, pipeline.AttrWindow, "1m"); got != 0.5 {
		t.Errorf("session 8's block I/O wait over 1m = %v, want 0.5 (one of its processes reported it)", got)
	}
	if got := figure(t, out, 7, pipeline.MetricSessionCPUTime, pipeline.AttrWindow, "1m", pipeline.AttrCPUMode, pipeline.CPUModeUser); got != 1 {
		t.Errorf("session 7's CPU over 1m = %v, want 1", got)
	}
}

func TestProcessBatchesAreHeldForTheirClosingBatch(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	s := snap(0, nil, []int64{1}, proc("sdw1", 0, 1, 100, -10, 1, 0), proc("sdw2", 1, 1, 200, -10, 2, 0))
	batches := s.Batches()
	for _, md := range batches[:len(batches)-1] {
		if err := p.ConsumeMetrics(context.Background(), md); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(sink.AllMetrics()); n != 0 {
		t.Fatalf("%d process batches forwarded before the closing batch, want none (emit_process_metrics off)", n)
	}
	if err := p.ConsumeMetrics(context.Background(), batches[len(batches)-1]); err != nil {
		t.Fatal(err)
	}
	if got := figure(t, sink.AllMetrics()[0], 1, pipeline.MetricSessionCPUTime, pipeline.AttrWindow, pipeline.WindowLifetime, pipeline.AttrCPUMode, pipeline.CPUModeUser); got != 3 {
		t.Errorf("lifetime user CPU = %v, want 3 (both hosts' processes, from their batches)", got)
	}
}

func TestOneBatchAndProcessBatchesGiveTheSameFigures(t *testing.T) {
	snaps := []pipelinetest.Snapshot{
		snap(0, nil, []int64{1}, proc("sdw1", 0, 1, 100, -10, 1, 10), proc("sdw2", 1, 1, 200, -10, 2, 20)),
		snap(60, nil, []int64{1}, proc("sdw1", 0, 1, 100, -10, 4, 50), proc("sdw2", 1, 1, 200, -10, 3, 90)),
	}
	batched, sinkB := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	whole, sinkW := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	outB := feed(t, batched, sinkB, snaps...)
	for _, s := range snaps {
		if err := whole.ConsumeMetrics(context.Background(), s.Metrics()); err != nil {
			t.Fatal(err)
		}
	}
	outW := sinkW.AllMetrics()[len(sinkW.AllMetrics())-1]
	if b, w := marshal(t, outB), marshal(t, outW); b != w {
		t.Errorf("figures from process batches differ from one whole batch:\n%s\nwant\n%s", b, w)
	}
}

func TestSnapshotWithoutClosingBatchIsClosedByTheNext(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{2 * time.Minute}})
	first := snap(0, nil, []int64{1}, proc("sdw1", 0, 1, 100, -10, 1, 0))
	lost := snap(60, nil, []int64{1}, proc("sdw1", 0, 1, 100, -10, 5, 0))
	last := snap(120, nil, []int64{1}, proc("sdw1", 0, 1, 100, -10, 7, 0))
	feed(t, p, sink, first)
	// The closing batch at 60 s never arrives (refused by memory_limiter, say).
	if err := p.ConsumeMetrics(context.Background(), lost.Batches()[0]); err != nil {
		t.Fatal(err)
	}
	out := feed(t, p, sink, last)
	if got := figure(t, out, 1, pipeline.MetricSessionCPUTime, pipeline.AttrWindow, "2m", pipeline.AttrCPUMode, pipeline.CPUModeUser); got != 6 {
		t.Errorf("user CPU over 2m = %v, want 6 (the unclosed snapshot keeps the counters consistent)", got)
	}
}

func TestPointsOutOfOrderDecodeToTheirProcess(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	s := snap(0, nil, []int64{1}, proc("sdw1", 0, 1, 100, -10, 1, 0), proc("sdw1", 0, 1, 101, -10, 2, 0))
	md := s.Metrics()
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		if pipeline.KindOf(rms.At(i).Resource().Attributes()) != pipeline.KindProcess {
			continue
		}
		ms := rms.At(i).ScopeMetrics().At(0).Metrics()
		for j := range ms.Len() {
			if ms.At(j).Name() == pipeline.MetricProcessCPUTime {
				dps := ms.At(j).Sum().DataPoints()
				dps.Sort(func(a, b pmetric.NumberDataPoint) bool { return a.DoubleValue() > b.DoubleValue() })
			}
		}
	}
	if err := p.ConsumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	out := sink.AllMetrics()[0]
	if got := figure(t, out, 1, pipeline.MetricSessionCPUTime, pipeline.AttrWindow, pipeline.WindowLifetime, pipeline.AttrCPUMode, pipeline.CPUModeUser); got != 3 {
		t.Errorf("lifetime user CPU = %v, want 3", got)
	}
	if got := figure(t, out, 1, pipeline.MetricSessionProcesses); got != 2 {
		t.Errorf("processes = %v, want 2", got)
	}
}

func TestProcessPointWithoutPIDIsSkipped(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	md := snap(0, nil, []int64{1}, proc("sdw1", 0, 1, 100, -10, 1, 0)).Metrics()
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		if pipeline.KindOf(rms.At(i).Resource().Attributes()) == pipeline.KindProcess {
			ms := rms.At(i).ScopeMetrics().At(0).Metrics()
			for j := range ms.Len() {
				if ms.At(j).Name() == pipeline.MetricProcessCPUTime {
					ms.At(j).Sum().DataPoints().At(0).Attributes().Remove(pipeline.AttrProcessPID)
				}
			}
		}
	}
	if err := p.ConsumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	if got, err := lookupFigure(sink.AllMetrics()[0], 1, pipeline.MetricSessionCPUTime, pipeline.AttrWindow, pipeline.WindowLifetime, pipeline.AttrCPUMode, pipeline.CPUModeUser); err == nil {
		t.Errorf("lifetime user CPU = %v, want none (the point without a pid is not anybody's: no process reported user CPU)", got)
	}
}

func TestForeignResourcesPassThroughUntouched(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	in := snap(0, nil, []int64{1}, proc("sdw1", 0, 1, 100, -10, 1, 0)).Metrics()
	foreign := in.ResourceMetrics().AppendEmpty()
	foreign.Resource().Attributes().PutStr("service.name", "something-else")
	m := foreign.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("process.cpu.time")
	m.SetEmptySum().DataPoints().AppendEmpty().SetDoubleValue(42)
	only := pmetric.NewMetrics()
	foreign.CopyTo(only.ResourceMetrics().AppendEmpty())
	want := marshal(t, only)

	if err := p.ConsumeMetrics(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	out := sink.AllMetrics()[0]
	found := 0
	rms := out.ResourceMetrics()
	for i := range rms.Len() {
		if _, ok := rms.At(i).Resource().Attributes().Get(pipeline.AttrResourceKind); ok {
			continue
		}
		found++
		got := pmetric.NewMetrics()
		rms.At(i).CopyTo(got.ResourceMetrics().AppendEmpty())
		if g := marshal(t, got); g != want {
			t.Errorf("foreign resource changed:\n%s\nwant\n%s", g, want)
		}
	}
	if found != 1 {
		t.Errorf("found %d foreign resources, want 1", found)
	}
	if countKind(out, pipeline.KindSnapshot) != 1 {
		t.Error("snapshot resource did not pass through")
	}
}

func TestProcessResourcesOnlyWhenOptedIn(t *testing.T) {
	for _, emit := range []bool{false, true} {
		p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}, EmitProcessMetrics: emit})
		out := feed(t, p, sink, snap(0, nil, []int64{1},
			proc("sdw1", 0, 1, 100, -10, 1, 0), proc("sdw2", 1, 1, 200, -10, 1, 0)))
		want := 0
		if emit {
			want = 2
		}
		got := 0
		for _, md := range sink.AllMetrics() {
			got += countKind(md, pipeline.KindProcess)
		}
		if got != want {
			t.Errorf("emit_process_metrics=%v: %d process resources forwarded, want %d", emit, got, want)
		}
		if got := countKind(out, pipeline.KindSession); got != 1 {
			t.Errorf("emit_process_metrics=%v: %d session resources forwarded, want 1", emit, got)
		}
	}
}

func TestSessionStateIsForwarded(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	out := feed(t, p, sink, snap(0, nil, []int64{1}, proc("sdw1", 0, 1, 100, -10, 1, 0)))
	rms := out.ResourceMetrics()
	for i := range rms.Len() {
		if pipeline.KindOf(rms.At(i).Resource().Attributes()) != pipeline.KindSession {
			continue
		}
		m := rms.At(i).ScopeMetrics().At(0).Metrics().At(0)
		state, ok := m.Metadata().Get(pipeline.MetaState)
		if m.Name() != pipeline.MetricSessionInfo || !ok || state.Str() != "active" {
			t.Errorf("session info not forwarded as the receiver wrote it: %s %v", m.Name(), state.AsString())
		}
		return
	}
	t.Fatal("no session resource in the output")
}

func TestSnapshotNotNewerIsForwardedWithoutFigures(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	s := snap(60, nil, []int64{1}, proc("sdw1", 0, 1, 100, -10, 1, 0))
	feed(t, p, sink, s)
	out := feed(t, p, sink, s)
	if _, err := lookupFigure(out, 1, pipeline.MetricSessionCPUTime, pipeline.AttrWindow, "1m", pipeline.AttrCPUMode, pipeline.CPUModeUser); err == nil {
		t.Error("a repeated snapshot got session figures")
	}
	if countKind(out, pipeline.KindProcess) != 0 {
		t.Error("process resources of a rejected snapshot were forwarded without emit_process_metrics")
	}
}

func TestSecondsKeepNanosecondPrecision(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	out := feed(t, p, sink,
		snap(0, nil, []int64{1}, proc("sdw1", 0, 1, 100, -10, 123456.01, 0)),
		snap(60, nil, []int64{1}, proc("sdw1", 0, 1, 100, -10, 123456.02, 0)))
	if got := figure(t, out, 1, pipeline.MetricSessionCPUTime, pipeline.AttrWindow, "1m", pipeline.AttrCPUMode, pipeline.CPUModeUser); math.Abs(got-0.01) > 1e-9 {
		t.Errorf("cpu delta = %v, want 0.01", got)
	}
}

func marshal(t testing.TB, md pmetric.Metrics) string {
	t.Helper()
	b, err := (&pmetric.JSONMarshaler{}).MarshalMetrics(md)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
