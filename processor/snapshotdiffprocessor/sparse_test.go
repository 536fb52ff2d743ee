// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// A fault is what the wire between the receiver and the processor does
// to one process batch.
type fault int

const (
	pass   fault = iota
	lose         // dropped, and the receiver told it went through
	refuse       // refused on the way (a memory_limiter, say)
	hold         // handed on after the batch that follows it
)

// delivery is a process batch that reached the processor.
type delivery struct {
	at     time.Time
	header snapshot.BatchHeader
	err    error
}

// wire hands batches from the receiver to the processor, doing to each
// process batch what fault says.
type wire struct {
	t          testing.TB
	next       consumer.Metrics
	fault      func(at time.Time, h snapshot.BatchHeader) fault
	forge      func(at time.Time, h snapshot.BatchHeader, md pmetric.Metrics) // nil: none
	held       []pmetric.Metrics
	deliveries []delivery
}

func (w *wire) consume(ctx context.Context, md pmetric.Metrics) error {
	b := snapshot.ReadBatch(md)
	if b.Header < 0 {
		return w.next.ConsumeMetrics(ctx, md)
	}
	h, err := snapshot.DecodeBatchHeader(md.ResourceMetrics().At(b.Header))
	if err != nil {
		w.t.Fatal(err)
	}
	at := b.Time.AsTime()
	if w.forge != nil {
		w.forge(at, h, md)
	}
	switch w.fault(at, h) {
	case lose:
		return nil
	case refuse:
		return errors.New("refused on the way")
	case hold:
		w.held = append(w.held, md)
		return nil
	}
	err = w.deliver(ctx, at, h, md)
	for _, late := range w.held {
		lb := snapshot.ReadBatch(late)
		lh, _ := snapshot.DecodeBatchHeader(late.ResourceMetrics().At(lb.Header))
		_ = w.deliver(ctx, lb.Time.AsTime(), lh, late) // the sender was long told it went through
	}
	w.held = nil
	return err
}

func (w *wire) deliver(ctx context.Context, at time.Time, h snapshot.BatchHeader, md pmetric.Metrics) error {
	err := w.next.ConsumeMetrics(ctx, md)
	w.deliveries = append(w.deliveries, delivery{at: at, header: h, err: err})
	return err
}

// sparseTick is tick k of the sparse tests: on sdw1, process 100's user
// CPU moves every tick, and 101's system CPU only at tick 5, the rest of
// it unchanged; process 102 leaves after tick 2; on sdw2, process 200's
// user CPU moves every tick. One session; each process's memory stays
// the same, so a batch sends the CPU figure that moved and nothing else.
func sparseTick(k int) pipelinetest.Snapshot {
	withRSS := func(p pipelinetest.Process, rss int64) pipelinetest.Process {
		p.RSS = rss
		return p
	}
	steady := withRSS(proc("sdw1", 0, 1, 101, -10, 10, 0), 2000)
	steady.CPUSystem = 1
	if k >= 5 {
		steady.CPUSystem = 2
	}
	procs := []pipelinetest.Process{
		withRSS(proc("sdw1", 0, 1, 100, -10, float64(1+k), 0), 1000),
		steady,
		withRSS(proc("sdw2", 1, 1, 200, -10, float64(20+k), 0), 4000),
	}
	if k <= 2 {
		procs = append(procs, withRSS(proc("sdw1", 0, 1, 102, -10, float64(30+k), 0), 8000))
	}
	return snap(float64(60*k), nil, []int64{1}, procs...)
}

// sparseRun sends ticks 0..6 through the wire, from a receiver and a
// processor that restart where asked, and returns the processor's output
// per tick and what reached it.
type sparseRun struct {
	fault             func(at time.Time, h snapshot.BatchHeader) fault
	forge             func(at time.Time, h snapshot.BatchHeader, md pmetric.Metrics)
	tick              func(k int) pipelinetest.Snapshot // nil: sparseTick
	config            *Config                           // nil: a 2m window
	restartReceiverAt int                               // tick; 0: never
	restartProcessAt  int
	batchSize         int
}

func (r sparseRun) run(t *testing.T) (out []pmetric.Metrics, w *wire, refused []map[string]error) {
	t.Helper()
	cfg, tick := r.config, r.tick
	if cfg == nil {
		cfg = &Config{Windows: []time.Duration{2 * time.Minute}}
	}
	if tick == nil {
		tick = sparseTick
	}
	newProcessor := func() (processor.Metrics, *consumertest.MetricsSink) {
		return newTestProcessor(t, cfg)
	}
	p, sink := newProcessor()
	w = &wire{t: t, fault: r.fault, forge: r.forge, next: p}
	if w.fault == nil {
		w.fault = func(time.Time, snapshot.BatchHeader) fault { return pass }
	}
	into, err := consumer.NewMetrics(w.consume)
	if err != nil {
		t.Fatal(err)
	}
	rec := pipelinetest.NewReceiver(into)
	rec.BatchSize = r.batchSize
	for k := 0; k <= 6; k++ {
		if k > 0 && k == r.restartReceiverAt {
			rec = pipelinetest.NewReceiver(into)
			rec.BatchSize = r.batchSize
		}
		if k > 0 && k == r.restartProcessAt {
			p, sink = newProcessor()
			w.next = p
		}
		errs, err := rec.Send(context.Background(), tick(k))
		if err != nil {
			t.Fatalf("tick %d: closing batch: %v", k, err)
		}
		refused = append(refused, errs)
		all := sink.AllMetrics()
		out = append(out, all[len(all)-1])
	}
	return out, w, refused
}

// checkSparseEnd checks the figures of the last tick, the same whatever
// happened at tick 2: over 2m (from tick 4) processes 100 and 200 moved
// 2 s of user CPU each and 101 one of system CPU; lifetime is every live
// process's total (user 7 + 10 + 26, system 2); the memory is the live
// processes' (1000 + 2000 + 4000), carried whole although only CPU moved.
func checkSparseEnd(t *testing.T, out []pmetric.Metrics) {
	t.Helper()
	last := out[len(out)-1]
	for _, c := range []struct {
		what string
		got  float64
		want float64
	}{
		{"user CPU over 2m", figure(t, last, 1, pipeline.MetricSessionCPUTime, pipeline.AttrWindow, "2m", pipeline.AttrCPUMode, pipeline.CPUModeUser), 4},
		{"lifetime user CPU", figure(t, last, 1, pipeline.MetricSessionCPUTime, pipeline.AttrWindow, pipeline.WindowLifetime, pipeline.AttrCPUMode, pipeline.CPUModeUser), 43},
		{"system CPU over 2m", figure(t, last, 1, pipeline.MetricSessionCPUTime, pipeline.AttrWindow, "2m", pipeline.AttrCPUMode, pipeline.CPUModeSys), 1},
		{"lifetime system CPU", figure(t, last, 1, pipeline.MetricSessionCPUTime, pipeline.AttrWindow, pipeline.WindowLifetime, pipeline.AttrCPUMode, pipeline.CPUModeSys), 2},
		{"rss", figure(t, last, 1, pipeline.MetricSessionMemoryUsage, pipeline.AttrMemoryType, pipeline.MemoryTypeRSS, pipeline.AttrMemoryAggregation, pipeline.MemoryAggregationCluster), 7000},
		{"2m partial", figure(t, last, 1, pipeline.MetricSessionPartial, pipeline.AttrWindow, "2m"), 0},
		{"processes", figure(t, last, 1, pipeline.MetricSessionProcesses), 3},
		{"hosts", figure(t, last, 1, pipeline.MetricSessionHosts), 2},
	} {
		if c.got != c.want {
			t.Errorf("tick 6: %s = %v, want %v", c.what, c.got, c.want)
		}
	}
}

// onFirstBatchOfTick2 does f to sdw1's first batch of tick 2 and passes
// every other batch.
func onFirstBatchOfTick2(f fault) func(time.Time, snapshot.BatchHeader) fault {
	done := false
	return func(when time.Time, h snapshot.BatchHeader) fault {
		if h.Host == "sdw1" && when.Equal(at(120)) && !done {
			done = true
			return f
		}
		return pass
	}
}

// partialAt is the session's 2m partial flag at tick k.
func partialAt(t *testing.T, out []pmetric.Metrics, k int) float64 {
	t.Helper()
	return figure(t, out[k], 1, pipeline.MetricSessionPartial, pipeline.AttrWindow, "2m")
}

// firstAccepted is the first batch of host the processor accepted at or
// after tick k.
func firstAccepted(w *wire, host string, k int) (delivery, bool) {
	for _, d := range w.deliveries {
		if d.header.Host == host && d.err == nil && !d.at.Before(at(float64(60*k))) {
			return d, true
		}
	}
	return delivery{}, false
}

func mustBeFullAt(t *testing.T, w *wire, host string, k int) {
	t.Helper()
	d, ok := firstAccepted(w, host, k)
	switch {
	case !ok:
		t.Errorf("no batch of %s accepted from tick %d on", host, k)
	case !d.header.Full || !d.at.Equal(at(float64(60*k))):
		t.Errorf("first batch of %s accepted from tick %d on: at %v, full %v; want a full batch at tick %d", host, k, d.at, d.header.Full, k)
	}
}

// Without faults, only what changed travels, and the figures are the
// dense ones: the unchanged process is carried, the departed one is not.
func TestSparseBatchesCarryTheUnchangedAndDropTheDeparted(t *testing.T) {
	out, w, _ := sparseRun{}.run(t)
	checkSparseEnd(t, out)
	sent := 0
	for _, d := range w.deliveries {
		if d.header.Host == "sdw1" && !d.header.Full && d.err != nil {
			t.Errorf("sparse batch of sdw1 at %v refused: %v", d.at, d.err)
		}
		if d.header.Full && !d.at.Equal(at(0)) {
			t.Errorf("full batch of %s at %v; only the first tick's should be", d.header.Host, d.at)
		}
		sent++
	}
	if sent != 2*7 {
		t.Errorf("%d process batches delivered, want one per host and tick (14)", sent)
	}
	if got := figure(t, out[3], 1, pipeline.MetricSessionProcesses); got != 3 {
		t.Errorf("tick 3: %v processes, want 3 (102 departed)", got)
	}
}

// A batch refused on the way: its host counts as not answered in that
// snapshot (partial, not exited) and is sent in full next time.
func TestRefusedBatchEndsInAFullBatch(t *testing.T) {
	out, w, refused := sparseRun{fault: onFirstBatchOfTick2(refuse)}.run(t)
	if refused[2]["sdw1"] == nil {
		t.Error("the receiver was not told of the refusal")
	}
	if got := partialAt(t, out, 2); got != 1 {
		t.Errorf("tick 2: partial %v, want 1 (sdw1 did not answer)", got)
	}
	mustBeFullAt(t, w, "sdw1", 3)
	checkSparseEnd(t, out)
}

// A batch lost without a word: the closing batch's count gives it away,
// the host counts as not answered, its next sparse batch is refused, and
// the one after is full.
func TestLostBatchEndsInAFullBatch(t *testing.T) {
	out, w, refused := sparseRun{fault: onFirstBatchOfTick2(lose)}.run(t)
	if got := partialAt(t, out, 2); got != 1 {
		t.Errorf("tick 2: partial %v, want 1 (sdw1's batch never came)", got)
	}
	if refused[3]["sdw1"] == nil {
		t.Error("tick 3: sdw1's sparse batch after the lost one was accepted")
	}
	mustBeFullAt(t, w, "sdw1", 4)
	checkSparseEnd(t, out)
}

// Two batches of one host swapped on the way: the second to arrive is not
// the one due, so both are refused, and the host is sent in full next time.
func TestReorderedBatchesEndInAFullBatch(t *testing.T) {
	out, w, refused := sparseRun{batchSize: 2, fault: onFirstBatchOfTick2(hold)}.run(t)
	if refused[2]["sdw1"] == nil {
		t.Error("tick 2: the batch that overtook its predecessor was accepted")
	}
	if got := partialAt(t, out, 2); got != 1 {
		t.Errorf("tick 2: partial %v, want 1", got)
	}
	mustBeFullAt(t, w, "sdw1", 3)
	checkSparseEnd(t, out)
}

// A restarted receiver remembers nothing: its first batches are full, and
// the processor takes them without a gap.
func TestReceiverRestartSendsInFull(t *testing.T) {
	out, w, refused := sparseRun{restartReceiverAt: 2}.run(t)
	if len(refused[2]) > 0 {
		t.Errorf("tick 2: batches refused after the receiver restarted: %v", refused[2])
	}
	if got := partialAt(t, out, 2); got != 0 {
		t.Errorf("tick 2: partial %v, want 0", got)
	}
	mustBeFullAt(t, w, "sdw1", 2)
	mustBeFullAt(t, w, "sdw2", 2)
	checkSparseEnd(t, out)
}

// A restarted processor knows no host: it refuses their sparse batches,
// they count as not answered, and come in full next time.
func TestProcessorRestartGetsAFullBatch(t *testing.T) {
	out, w, refused := sparseRun{restartProcessAt: 2}.run(t)
	if refused[2]["sdw1"] == nil || refused[2]["sdw2"] == nil {
		t.Errorf("tick 2: sparse batches accepted by a processor that never saw the hosts: %v", refused[2])
	}
	mustBeFullAt(t, w, "sdw1", 3)
	mustBeFullAt(t, w, "sdw2", 3)
	checkSparseEnd(t, out)
}

// With emit_process_metrics the per-process output stays dense: every
// live process every tick with every figure, the unchanged ones written by
// the processor from their last sighting, and a changed one whole although
// its batch carried only the figure that changed (101 at tick 5).
func TestPerProcessOutputStaysDense(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{2 * time.Minute}, EmitProcessMetrics: true})
	rec := pipelinetest.NewReceiver(p)
	for k := 0; k <= 6; k++ {
		sink.Reset()
		if errs, err := rec.Send(context.Background(), sparseTick(k)); err != nil || len(errs) > 0 {
			t.Fatalf("tick %d: %v %v", k, errs, err)
		}
		cpu, sys, rss := map[int64]float64{}, map[int64]float64{}, map[int64]int64{}
		for _, md := range sink.AllMetrics() {
			if n := countKind(md, pipeline.KindBatch) + countKind(md, pipeline.KindDeparted); n > 0 {
				t.Errorf("tick %d: %d framing resources forwarded", k, n)
			}
			if countKind(md, pipeline.KindSnapshot) > 0 && countKind(md, pipeline.KindProcess) > 0 {
				t.Errorf("tick %d: the closing output holds process resources; the carried ones go one batch per host", k)
			}
			if hosts := processHosts(md); len(hosts) > 1 {
				t.Errorf("tick %d: one batch holds the processes of hosts %v", k, hosts)
			}
			addProcessCPU(md, cpu, sys)
			pipelinetest.Points(md, pipeline.MetricProcessMemoryUsage, func(_ pcommon.Map, dp pmetric.NumberDataPoint) {
				pid, _ := dp.Attributes().Get(pipeline.AttrProcessPID)
				rss[pid.Int()] = dp.IntValue()
			})
		}
		want := map[int64]float64{100: float64(1 + k), 101: 10, 200: float64(20 + k)}
		if k <= 2 {
			want[102] = float64(30 + k)
		}
		if !maps.Equal(cpu, want) {
			t.Errorf("tick %d: per-process user CPU %v, want %v", k, cpu, want)
		}
		// Process 101's system CPU is the one figure of it that changes (tick 5).
		wantSys := map[int64]float64{100: 0, 101: 1, 200: 0}
		if k >= 5 {
			wantSys[101] = 2
		}
		if k <= 2 {
			wantSys[102] = 0
		}
		if !maps.Equal(sys, wantSys) {
			t.Errorf("tick %d: per-process system CPU %v, want %v", k, sys, wantSys)
		}
		wantRSS := map[int64]int64{100: 1000, 101: 2000, 200: 4000}
		if k <= 2 {
			wantRSS[102] = 8000
		}
		if !maps.Equal(rss, wantRSS) {
			t.Errorf("tick %d: per-process rss %v, want %v", k, rss, wantRSS)
		}
	}
}

// A process batch whose batch resource does not say its number is
// refused, not read as a listing of every process of its host.
func TestBatchWithoutASequenceIsRefused(t *testing.T) {
	p, _ := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	var batch pmetric.Metrics
	capture, err := consumer.NewMetrics(func(_ context.Context, md pmetric.Metrics) error {
		if snapshot.ReadBatch(md).Header >= 0 && batch == (pmetric.Metrics{}) {
			batch = md
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pipelinetest.NewReceiver(capture).Send(context.Background(), sparseTick(0)); err != nil {
		t.Fatal(err)
	}
	b := snapshot.ReadBatch(batch)
	header := batch.ResourceMetrics().At(b.Header).ScopeMetrics().At(0).Metrics()
	header.RemoveIf(func(m pmetric.Metric) bool { return m.Name() == pipeline.MetricBatchSequence })
	if err := p.ConsumeMetrics(context.Background(), batch); err == nil {
		t.Error("a batch without its sequence number was accepted")
	}
}

// A reused pid: the receiver lists the former process as departed when it
// sends the new one, so the processor stops carrying the former.
func TestReusedPIDDepartsTheFormerProcess(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{2 * time.Minute}})
	rec := pipelinetest.NewReceiver(p)
	former, reused := proc("sdw1", 0, 1, 100, -10, 5, 0), proc("sdw1", 0, 1, 100, 90, 2, 0)
	idle := proc("sdw1", 0, 1, 101, -10, 10, 0)
	for k, procs := range [][]pipelinetest.Process{{former, idle}, {former, idle}, {reused, idle}, {reused, idle}} {
		if errs, err := rec.Send(context.Background(), snap(float64(60*k), nil, []int64{1}, procs...)); err != nil || len(errs) > 0 {
			t.Fatalf("tick %d: %v %v", k, errs, err)
		}
	}
	out := sink.AllMetrics()[len(sink.AllMetrics())-1]
	if got := figure(t, out, 1, pipeline.MetricSessionProcesses); got != 2 {
		t.Errorf("%v processes, want 2 (the former pid 100 left)", got)
	}
	if got := figure(t, out, 1, pipeline.MetricSessionCPUTime, pipeline.AttrWindow, pipeline.WindowLifetime, pipeline.AttrCPUMode, pipeline.CPUModeUser); got != 12 {
		t.Errorf("lifetime user CPU %v, want 12 (the new pid 100's 2 and 101's 10)", got)
	}
}

// moveTick is tick k of TestAProcessThatChangesSessionOrSegment: process
// 100 on sdw1 burns a second of user CPU per tick with 1000 bytes of rss;
// at tick 2 its segment alone changes (0 to 3), at tick 4 its session
// (1 to 2). Process 101 of session 1 never moves.
func moveTick(k int) pipelinetest.Snapshot {
	moving := proc("sdw1", 0, 1, 100, -10, float64(1+k), 0)
	moving.RSS = 1000
	if k >= 2 {
		moving.Segment = 3
	}
	if k >= 4 {
		moving.Session = 2
	}
	steady := proc("sdw1", 0, 1, 101, -10, 10, 0)
	steady.RSS = 2000
	return snap(float64(60*k), nil, []int64{1, 2}, moving, steady)
}

// A process whose segment alone changed is sent with no figure and keeps
// its steps; one that moves to another session leaves the first (the
// receiver departs its former identity) and is a new process of the
// second, seen from its move on: no figure counts twice, and the first
// session's memory drops by its rss.
func TestAProcessThatChangesSessionOrSegment(t *testing.T) {
	out, w, refused := sparseRun{tick: moveTick}.run(t)
	for k, errs := range refused {
		if len(errs) > 0 {
			t.Errorf("tick %d: refused %v", k, errs)
		}
	}
	for _, d := range w.deliveries {
		if d.header.Full && !d.at.Equal(at(0)) {
			t.Errorf("full batch of %s at %v; only the first tick's should be", d.header.Host, d.at)
		}
	}
	type row struct {
		k       int
		session int64
		what    string
		metric  string
		attrs   []string
		want    float64
	}
	user2m := []string{pipeline.AttrWindow, "2m", pipeline.AttrCPUMode, pipeline.CPUModeUser}
	userLife := []string{pipeline.AttrWindow, pipeline.WindowLifetime, pipeline.AttrCPUMode, pipeline.CPUModeUser}
	rss := []string{pipeline.AttrMemoryType, pipeline.MemoryTypeRSS, pipeline.AttrMemoryAggregation, pipeline.MemoryAggregationCluster}
	for _, c := range []row{
		{3, 1, "user CPU over 2m across the segment change", pipeline.MetricSessionCPUTime, user2m, 2},
		{3, 1, "rss across the segment change", pipeline.MetricSessionMemoryUsage, rss, 3000},
		{3, 1, "processes across the segment change", pipeline.MetricSessionProcesses, nil, 2},
		{6, 1, "session 1's user CPU over 2m after the move", pipeline.MetricSessionCPUTime, user2m, 0},
		{6, 1, "session 1's rss after the move", pipeline.MetricSessionMemoryUsage, rss, 2000},
		{6, 1, "session 1's processes after the move", pipeline.MetricSessionProcesses, nil, 1},
		{6, 2, "session 2's user CPU over 2m", pipeline.MetricSessionCPUTime, user2m, 2},
		{6, 2, "session 2's rss", pipeline.MetricSessionMemoryUsage, rss, 1000},
		{6, 2, "session 2's processes", pipeline.MetricSessionProcesses, nil, 1},
	} {
		if got := figure(t, out[c.k], c.session, c.metric, c.attrs...); got != c.want {
			t.Errorf("tick %d: %s = %v, want %v", c.k, c.what, got, c.want)
		}
	}
	// Lifetime figures are the live processes' totals: the moved process's
	// whole life counts in session 2 (7 s at tick 6), none of it in 1.
	for s, want := range map[int64]float64{1: 10, 2: 7} {
		if got := figure(t, out[6], s, pipeline.MetricSessionCPUTime, userLife...); got != want {
			t.Errorf("tick 6: session %d lifetime user CPU %v, want %v", s, got, want)
		}
	}
}

// A sparse entry of a process the processor holds no sighting of has
// nothing to carry its other figures from: the batch is refused, its host
// counts as not answered, and it comes in full next time.
func TestASparseEntryOfAnUnknownProcessIsRefused(t *testing.T) {
	renumber := func(when time.Time, h snapshot.BatchHeader, md pmetric.Metrics) {
		if h.Host != "sdw1" || !when.Equal(at(120)) {
			return
		}
		for _, name := range []string{pipeline.MetricProcessInfo, pipeline.MetricProcessCPUTime} {
			pipelinetest.Points(md, name, func(_ pcommon.Map, dp pmetric.NumberDataPoint) {
				if pid, _ := dp.Attributes().Get(pipeline.AttrProcessPID); pid.Int() == 100 {
					dp.Attributes().PutInt(pipeline.AttrProcessPID, 999)
				}
			})
		}
	}
	out, w, refused := sparseRun{forge: renumber}.run(t)
	if refused[2]["sdw1"] == nil {
		t.Error("tick 2: a sparse entry of an unknown process was accepted")
	}
	if got := partialAt(t, out, 2); got != 1 {
		t.Errorf("tick 2: partial %v, want 1 (sdw1's batch was refused)", got)
	}
	mustBeFullAt(t, w, "sdw1", 3)
	checkSparseEnd(t, out)
}

// processHosts are the hosts whose process resources md holds.
func processHosts(md pmetric.Metrics) []string {
	var hosts []string
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		attrs := rms.At(i).Resource().Attributes()
		if kind, _ := attrs.Get(pipeline.AttrResourceKind); kind.Str() != pipeline.KindProcess.String() {
			continue
		}
		if h, _ := attrs.Get(pipeline.AttrHostName); !slices.Contains(hosts, h.Str()) {
			hosts = append(hosts, h.Str())
		}
	}
	return hosts
}

// With unchanged_processes: leave_out the per-process output holds the
// processes that changed since the previous snapshot, each whole, and
// none that a sparse host left out as unchanged; the session figures are
// the same as when they are carried.
func TestLeftOutUnchangedProcessesAreNotSent(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{2 * time.Minute}, EmitProcessMetrics: true,
		UnchangedProcesses: UnchangedLeaveOut})
	rec := pipelinetest.NewReceiver(p)
	for k := 0; k <= 6; k++ {
		sink.Reset()
		if errs, err := rec.Send(context.Background(), sparseTick(k)); err != nil || len(errs) > 0 {
			t.Fatalf("tick %d: %v %v", k, errs, err)
		}
		user, sys := map[int64]float64{}, map[int64]float64{}
		for _, md := range sink.AllMetrics() {
			addProcessCPU(md, user, sys)
		}
		// 100 and 200 move every tick, 102 until it leaves after tick 2;
		// 101 only at tick 5 (its system CPU), and at tick 0, the first.
		want := map[int64]float64{100: float64(1 + k), 200: float64(20 + k)}
		if k <= 2 {
			want[102] = float64(30 + k)
		}
		if k == 0 || k == 5 {
			want[101] = 10
		}
		if !maps.Equal(user, want) {
			t.Errorf("tick %d: per-process user CPU %v, want %v", k, user, want)
		}
		if got, ok := sys[101]; k == 5 && (!ok || got != 2) {
			t.Errorf("tick 5: process 101's system CPU %v (%v), want 2 (it is sent whole)", got, ok)
		}
	}
}

func TestUnchangedProcessesIsValidated(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	if cfg.UnchangedProcesses != UnchangedCarry {
		t.Errorf("default unchanged_processes %q, want %q", cfg.UnchangedProcesses, UnchangedCarry)
	}
	cfg.UnchangedProcesses = "drop"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `unchanged_processes "drop"`) {
		t.Errorf("unchanged_processes drop: %v, want it refused by name", err)
	}
}

// addProcessCPU puts md's per-process user and system CPU into user and
// sys by pid.
func addProcessCPU(md pmetric.Metrics, user, sys map[int64]float64) {
	pipelinetest.Points(md, pipeline.MetricProcessCPUTime, func(_ pcommon.Map, dp pmetric.NumberDataPoint) {
		pid, _ := dp.Attributes().Get(pipeline.AttrProcessPID)
		switch mode, _ := dp.Attributes().Get(pipeline.AttrCPUMode); mode.Str() {
		case pipeline.CPUModeUser:
			user[pid.Int()] = dp.DoubleValue()
		case pipeline.CPUModeSys:
			sys[pid.Int()] = dp.DoubleValue()
		}
	})
}
