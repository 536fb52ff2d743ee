// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/internal/pipeline/sparse"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadatatest"
	"github.com/gpotel/gpotel/segmentagent"
	"github.com/gpotel/gpotel/segmentagent/procfixture"
)

// deltaAgent serves the production agent over a fixture procfs, and can
// be restarted, lose its answers, or act as yagpcc's agent does: ignore
// the request's gpotel fields, and answer in full without them.
type deltaAgent struct {
	t      *testing.T
	root   string
	svc    *segmentagent.Service
	yagpcc bool
	lose   bool
	kinds  strings.Builder // F (full) or D (delta) per answer given
}

func (a *deltaAgent) restart() {
	cfg := segmentagent.ServiceConfig{ProcRoot: a.root, AllowedUsers: []string{strconv.Itoa(os.Getuid())},
		PostmasterPidFiles: []string{procfixture.PostmasterPidFile(a.root)}, Hostname: "sdw1"}
	cfg.Cgroups.Disabled = true
	svc, err := segmentagent.NewService(cfg, nil, nil)
	if err != nil {
		a.t.Fatal(err)
	}
	a.svc = svc
}

func (a *deltaAgent) GetPidProcStat(ctx context.Context, req *yagpcc.GetPidProcInfoReq) (*yagpcc.GetPidProcInfoResponse, error) {
	if a.yagpcc {
		req = &yagpcc.GetPidProcInfoReq{SegmentProcess: req.GetSegmentProcess()}
	}
	resp, err := a.svc.GetPidProcStat(ctx, req)
	if err != nil {
		return nil, err
	}
	if resp.GetDelta() {
		a.kinds.WriteByte('D')
	} else {
		a.kinds.WriteByte('F')
	}
	if a.lose {
		return nil, errors.New("connection reset: the answer was lost")
	}
	return resp, nil
}

// takeKinds returns the answers' kinds since the last call.
func (a *deltaAgent) takeKinds() string {
	k := a.kinds.String()
	a.kinds.Reset()
	return k
}

// recordingPipeline records every process batch offered to the
// processor, and refuses the next one when told.
type recordingPipeline struct {
	mu      sync.Mutex
	batches []pmetric.Metrics
	refuse  bool
}

func (*recordingPipeline) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (p *recordingPipeline) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := pmetric.NewMetrics()
	md.CopyTo(c)
	p.batches = append(p.batches, c)
	if p.refuse {
		p.refuse = false
		return errors.New("refused: a full batch of the host is due")
	}
	return nil
}

// processorInput is what the processor got in one scrape, the closing
// batch last, as JSON with every timestamp and the read delay (wall-clock
// figures of the scrape) taken out.
func (p *recordingPipeline) processorInput(t *testing.T, closing pmetric.Metrics) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out strings.Builder
	for _, md := range append(p.batches, closing) {
		stripWallClock(md)
		b, err := (&pmetric.JSONMarshaler{}).MarshalMetrics(md)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
		out.WriteByte('\n')
	}
	p.batches = nil
	return out.String()
}

func stripWallClock(md pmetric.Metrics) {
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		sms := md.ResourceMetrics().At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			ms.RemoveIf(func(m pmetric.Metric) bool { return m.Name() == pipeline.MetricHostReadDelay })
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					zeroTimes(m.Gauge().DataPoints())
				case pmetric.MetricTypeSum:
					zeroTimes(m.Sum().DataPoints())
				}
			}
		}
	}
}

func zeroTimes(dps pmetric.NumberDataPointSlice) {
	for i := 0; i < dps.Len(); i++ {
		dps.At(i).SetTimestamp(0)
		dps.At(i).SetStartTimestamp(0)
	}
}

func deltaScraper(t *testing.T, src clusterSource, agent procReader, next consumer.Metrics) *sessionScraper {
	cfg := validConfig()
	cfg.MaxPidsPerCall = 3 // two batches for the host: each its own client of the agent
	cfg.ExitRecords = false
	s, err := newSessionScraper(cfg, metadatatest.NewSettings(componenttest.NewTelemetry()), src, next)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	s.dir.readers["sdw1"] = agent
	t.Cleanup(func() { _ = s.shutdown(context.Background()) })
	return s
}

// The sparse batches rule is unchanged by delta answers: over a timeline
// through every uncertain case, a receiver whose agent leaves out what did
// not change hands the processor exactly what a receiver whose agent is
// yagpcc's (full answers, the extension ignored) hands it, for the same
// readings; and each tick's answers are exactly the kind the protocol says.
func TestDeltaAnswersGiveTheProcessorWhatFullAnswersGive(t *testing.T) {
	root := t.TempDir()
	pids := []int{4001, 4002, 4003, 4004, 4005, 4006}
	if err := procfixture.Write(root, pids, os.Getuid()); err != nil {
		t.Fatal(err)
	}
	write := func(p procfixture.Process) {
		p.UID = os.Getuid()
		_ = os.RemoveAll(filepath.Join(root, strconv.Itoa(p.PID)))
		if err := procfixture.WriteProcesses(root, []procfixture.Process{p}); err != nil {
			t.Fatal(err)
		}
	}
	end := func(pid int) { _ = os.RemoveAll(filepath.Join(root, strconv.Itoa(pid))) }
	src := newMemorySource(1, pids)

	withExt := &deltaAgent{t: t, root: root}
	withExt.restart()
	yagpccAgent := &deltaAgent{t: t, root: root, yagpcc: true}
	yagpccAgent.restart()
	deltaPipe, fullPipe := &recordingPipeline{}, &recordingPipeline{}
	deltaRecv := deltaScraper(t, src, withExt, deltaPipe)
	fullRecv := deltaScraper(t, src, yagpccAgent, fullPipe)

	for _, tick := range []struct {
		name  string
		step  func()
		kinds string // of withExt's answers, one per batch
	}{
		{"first scrape", func() {}, "FF"},
		{"nothing moved", func() {}, "DD"},
		{"4002 moved", func() { write(procfixture.Process{PID: 4002, UTime: 77_777}) }, "DD"},
		{"4005 exited, still listed", func() { end(4005) }, "DD"},
		{"4005 reused by a new process", func() { write(procfixture.Process{PID: 4005, StartTime: 999_999}) }, "DD"},
		{"4001 left: every pid moves a batch", func() { src.state.Backends = src.state.Backends[1:] }, "DD"},
		{"agent restart", func() { withExt.restart() }, "FF"},
		{"answer lost", func() { withExt.lose, yagpccAgent.lose = true, true }, "D"},
		{"after the lost answer", func() { withExt.lose, yagpccAgent.lose = false, false }, "FF"},
		{"agent without the extension", func() { withExt.yagpcc = true }, "FF"},
		{"still without", func() { write(procfixture.Process{PID: 4003, STime: 5555}) }, "FF"},
		{"extension back", func() { withExt.yagpcc = false }, "FF"},
		{"then deltas", func() { write(procfixture.Process{PID: 4006, UTime: 1}) }, "DD"},
		{"a batch refused downstream", func() { deltaPipe.refuse, fullPipe.refuse = true, true }, "DD"},
		{"after the refused batch", func() {}, "FF"},
		{"deltas again", func() { write(procfixture.Process{PID: 4004, UTime: 42}) }, "DD"},
	} {
		tick.step()
		closingDelta, errDelta := deltaRecv.scrape(context.Background())
		closingFull, errFull := fullRecv.scrape(context.Background())
		if (errDelta == nil) != (errFull == nil) {
			t.Fatalf("%s: scrape errors differ: %v against %v", tick.name, errDelta, errFull)
		}
		if got := withExt.takeKinds(); got != tick.kinds {
			t.Errorf("%s: answers %q, want %q", tick.name, got, tick.kinds)
		}
		if got := yagpccAgent.takeKinds(); strings.Contains(got, "D") {
			t.Errorf("%s: yagpcc's agent answered %q", tick.name, got)
		}
		if d, f := deltaPipe.processorInput(t, closingDelta), fullPipe.processorInput(t, closingFull); d != f {
			t.Fatalf("%s: the processor's input differs:\nwith delta answers:\n%s\nwith full answers:\n%s", tick.name, d, f)
		}
	}
}

// A collector restart is a new client: the agent answers it in full
// although it kept the last answer of the run before.
func TestACollectorRestartIsAnsweredInFull(t *testing.T) {
	root := t.TempDir()
	if err := procfixture.Write(root, []int{4001, 4002}, os.Getuid()); err != nil {
		t.Fatal(err)
	}
	src := newMemorySource(1, []int{4001, 4002})
	agent := &deltaAgent{t: t, root: root}
	agent.restart()
	before := deltaScraper(t, src, agent, &recordingPipeline{})
	for range 2 {
		if _, err := before.scrape(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	after := deltaScraper(t, src, agent, &recordingPipeline{})
	for range 2 {
		if _, err := after.scrape(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := agent.takeKinds(); got != "FDFD" {
		t.Errorf("answers %q, want FDFD: the restarted collector's first answer full", got)
	}
}

// A delta answer to a request that named no generation, or one that
// lists a pid both answered and gone, is not trusted.
func TestCheckAnswerRejectsADeltaAnswerNotAskedFor(t *testing.T) {
	asked := map[int64]*Backend{1: {PID: 1}, 2: {PID: 2}}
	delta := &yagpcc.GetPidProcInfoResponse{Host: goodHost, Delta: true}
	if _, err := checkAnswer(delta, 0, asked); err == nil {
		t.Error("a delta answer to a request naming no generation accepted")
	}
	if _, err := checkAnswer(delta, 7, asked); err != nil {
		t.Errorf("a delta answer to a request naming generation 7: %v", err)
	}
	gone := &yagpcc.GetPidProcInfoResponse{Host: goodHost, Delta: true, PidProcData: []*yagpcc.GpPidProcInfo{{Pid: 1}}, GonePids: []int64{1}}
	if _, err := checkAnswer(gone, 7, asked); err == nil {
		t.Error("a pid both answered and gone accepted")
	}
	if _, err := checkAnswer(&yagpcc.GetPidProcInfoResponse{Host: goodHost, Delta: true, GonePids: []int64{3}}, 7, asked); err == nil {
		t.Error("a pid gone that was not asked about accepted")
	}
	// Twice gone would count one left out too few, on a host carried as a whole.
	if _, err := checkAnswer(&yagpcc.GetPidProcInfoResponse{Host: goodHost, Delta: true, GonePids: []int64{2, 2}}, 7, asked); err == nil {
		t.Error("a pid listed gone twice accepted")
	}
}

// A delta answer's sessions run in the groups it lists per session, the
// unchanged processes it leaves out included; the per-process indexes of
// the processes it answers add nothing to them.
func TestADeltaAnswerGivesEachSessionTheGroupsItLists(t *testing.T) {
	groups := []*gpotelv1.ControlGroup{{Version: 2, Path: "/gpdb.service/6437"}, {Version: 2, Path: "/system.slice"}}
	one := uint32(1)
	resp := &yagpcc.GetPidProcInfoResponse{Host: goodHost, Delta: true, ControlGroups: groups,
		PidProcData:          []*yagpcc.GpPidProcInfo{{Pid: 2, ControlGroup: &one}},
		SessionControlGroups: []*yagpcc.SessionControlGroups{{SessId: 7, ControlGroups: []uint32{0}}, {SessId: 8, ControlGroups: []uint32{0, 1, 9}}}}
	var h hostCgroups
	h.add(resp, map[int64]*Backend{1: {PID: 1, SessionID: 7}, 2: {PID: 2, SessionID: 7}, 3: {PID: 3, SessionID: 8}})
	want := map[int64][]int{7: {0}, 8: {0, 1}}
	if !reflect.DeepEqual(h.sessions, want) {
		t.Errorf("sessions' groups %v, want %v (an index past the list ignored)", h.sessions, want)
	}
}

// liarAgent answers pid 2 never, and from its second answer on claims
// every unanswered pid unchanged (a delta answer with nothing gone).
type liarAgent struct{ answers int }

func (a *liarAgent) GetPidProcStat(_ context.Context, req *yagpcc.GetPidProcInfoReq) (*yagpcc.GetPidProcInfoResponse, error) {
	a.answers++
	resp := &yagpcc.GetPidProcInfoResponse{Host: goodHost, DeltaGeneration: uint64(a.answers), Delta: req.GetDeltaSince() != 0}
	if resp.Delta {
		return resp, nil
	}
	for _, sp := range req.GetSegmentProcess() {
		if sp.GetPid() != 2 {
			resp.PidProcData = append(resp.PidProcData, &yagpcc.GpPidProcInfo{SessId: sp.GetSessId(), Pid: sp.GetPid(),
				ProcStat: &yagpcc.ProcStat{Utime: 1, Starttime: 200}})
		}
	}
	return resp, nil
}

// An agent that leaves out as unchanged a process the receiver never
// sent (it claims what it cannot know) does not make the receiver carry
// it: the host did not answer that scrape, and the next asks in full.
func TestAProcessLeftOutThatWasNeverSentFailsTheHost(t *testing.T) {
	agent := &liarAgent{}
	src := newMemorySource(1, []int{1, 2})
	s := deltaScraper(t, src, agent, &recordingPipeline{})
	var ups []int64
	var failed []bool
	for range 3 {
		md, err := s.scrape(context.Background())
		ups, failed = append(ups, hostUp(md)["sdw1"]), append(failed, err != nil)
	}
	if want := []int64{1, 0, 1}; !reflect.DeepEqual(ups, want) {
		t.Errorf("host.up per scrape %v, want %v: the lie fails the host once, then a full answer", ups, want)
	}
	if want := []bool{false, true, false}; !reflect.DeepEqual(failed, want) {
		t.Errorf("scrape failed per scrape %v, want %v: the host that did not answer makes its scrape partial", failed, want)
	}
}

// A host asked about exactly the processes of its last snapshot, with a
// generation named for each of its batches, has its unchanged processes
// carried as a whole; a batch without a generation (its answer will be
// full), another process asked about, or a process asked about in another
// session, has them kept one by one.
func TestAHostAskedAboutTheSameProcessesIsCarriedAsAWhole(t *testing.T) {
	cfg := validConfig()
	cfg.MaxPidsPerCall = 2
	accept, _ := consumer.NewMetrics(func(context.Context, pmetric.Metrics) error { return nil })
	s := &sessionScraper{cfg: cfg, deltaClient: "gpotel-test", generations: map[string][]uint64{}}
	sender := sparse.NewSender(snapshot.NewProcessEncoder(snapshot.Scope{}, snapshot.Switches{}), accept, false)
	procs := []Backend{{PID: 1, SessionID: 7}, {PID: 2, SessionID: 7}, {PID: 3, SessionID: 8}}
	tick := int64(0)
	carried := func(procs []Backend, since []uint64) bool {
		tick++
		out := sender.Snapshot(time.Unix(1_700_000_000+tick, 0), 1)
		s.generations["sdw1"] = since
		queries := []hostQuery{{host: "sdw1", procs: procs}}
		s.askForDeltas(queries, out)
		var entries []snapshot.ProcessEntry
		for _, b := range procs {
			entries = append(entries, snapshot.ProcessEntry{Session: b.SessionID,
				Process: snapshot.Process{PID: b.PID, CreationTime: time.Unix(1_600_000_000, 0), HasStat: true}})
		}
		if queries[0].carry {
			_, _, _ = out.Send(context.Background(), "sdw1", nil, nil)
			_, _ = out.Carry("sdw1", len(procs), nil)
		} else {
			_, _, _ = out.Send(context.Background(), "sdw1", entries, nil)
		}
		c := &snapshot.Closing{Hosts: []snapshot.HostAnswer{{Host: "sdw1", Up: true}}}
		out.Close(c)
		if !c.Hosts[0].Up {
			t.Fatalf("snapshot %d: the host closed as not answered", tick)
		}
		return queries[0].carry
	}
	moved := []Backend{{PID: 1, SessionID: 7}, {PID: 2, SessionID: 9}, {PID: 3, SessionID: 8}}
	for _, step := range []struct {
		name  string
		procs []Backend
		since []uint64
		want  bool
	}{
		{"first snapshot", procs, nil, false},
		{"the same processes, every batch named", procs, []uint64{4, 5}, true},
		{"and again", procs, []uint64{6, 7}, true},
		{"a batch without a generation", procs, []uint64{8, 0}, false},
		{"one generation for two batches", procs, []uint64{9}, false},
		{"a process more", append(slices.Clone(procs), Backend{PID: 4, SessionID: 8}), []uint64{10, 11}, false},
		{"a process in another session", moved, []uint64{12, 13}, false},
		{"then the same again", moved, []uint64{14, 15}, true},
	} {
		if got := carried(step.procs, step.since); got != step.want {
			t.Errorf("%s: carried %v, want %v", step.name, got, step.want)
		}
	}
}
