// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/cpuslots"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

func gpRows() []SegmentConfigRow {
	return []SegmentConfigRow{
		{Content: -1, Role: "p", Status: "u", Hostname: "mdw"},
		{Content: -1, Role: "m", Status: "u", Hostname: "smdw"},
		{Content: 0, Role: "p", Status: "u", Hostname: "sdw1"},
		{Content: 0, Role: "m", Status: "u", Hostname: "sdw-mirror"},
		{Content: 1, Role: "p", Status: "u", Hostname: "sdw2"},
		{Content: 2, Role: "p", Status: "d", Hostname: "sdw-down"},
		{Content: 2, Role: "m", Status: "d", Hostname: "sdw-down-mirror"},
	}
}

func TestTopologyRoutesOnlyUpPrimaries(t *testing.T) {
	topo, err := buildTopology(gpRows(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for seg, want := range map[int64]string{-1: "mdw", 0: "sdw1", 1: "sdw2"} {
		if got, ok := topo.HostOf(seg); !ok || got != want {
			t.Errorf("segment %d → %q, want %q", seg, got, want)
		}
	}
	if h, ok := topo.HostOf(2); ok {
		t.Errorf("a down segment routes to %q", h)
	}
	for _, h := range topo.Hosts() {
		if strings.Contains(h, "mirror") || strings.Contains(h, "down") || h == "smdw" {
			t.Errorf("host list holds a non-routing host %q: %v", h, topo.Hosts())
		}
	}
	if topo.CoordinatorHost() != "mdw" {
		t.Errorf("coordinator host %q", topo.CoordinatorHost())
	}
}

func TestTopologyAfterFailoverRoutesToThePromotedMirror(t *testing.T) {
	rows := []SegmentConfigRow{
		{Content: -1, Role: "p", Status: "u", Hostname: "mdw"},
		{Content: 0, Role: "m", Status: "d", Hostname: "sdw1"},
		{Content: 0, Role: "p", Status: "u", Hostname: "sdw2"},
	}
	topo, err := buildTopology(rows, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := topo.HostOf(0); h != "sdw2" {
		t.Fatalf("content 0 → %q, want the acting primary sdw2", h)
	}
}

func TestTopologyWithoutACoordinatorIsAnError(t *testing.T) {
	if _, err := buildTopology([]SegmentConfigRow{{Content: 0, Role: "p", Status: "u", Hostname: "sdw1"}}, time.Now()); err == nil {
		t.Fatal("no error for a catalog without the coordinator")
	}
}

func TestTopologyStaleAfterTTL(t *testing.T) {
	t0 := time.Now()
	topo := singleHostTopology("pg1", t0)
	if topo.Stale(t0.Add(59*time.Second), time.Minute) || !topo.Stale(t0.Add(time.Minute), time.Minute) {
		t.Fatal("TTL not honoured")
	}
	if h, _ := topo.HostOf(-1); h != "pg1" {
		t.Fatalf("postgresql host %q", h)
	}
}

func TestGroupByHostRoutesDedupsAndReportsUnknownSegments(t *testing.T) {
	topo, _ := buildTopology(gpRows(), time.Now())
	backends := []Backend{
		{SegmentID: -1, PID: 10, SessionID: 5, BackendType: "client backend"},
		{SegmentID: 0, PID: 20, SessionID: 5},
		{SegmentID: 1, PID: 30, SessionID: 5},
		{SegmentID: 0, PID: 20, SessionID: 5}, // listed twice
		{SegmentID: 2, PID: 40, SessionID: 5}, // down segment
		{SegmentID: 7, PID: 50, SessionID: 5}, // unknown segment
		{SegmentID: 1, PID: 31, SessionID: 0, BackendType: "checkpointer"},
	}
	queries, unknown := groupByHost(backends, topo, true)
	got := map[string][]int64{}
	for _, q := range queries {
		for _, p := range q.procs {
			got[q.host] = append(got[q.host], p.PID)
		}
	}
	if len(queries) != 3 || queries[0].host != "mdw" || queries[1].host != "sdw1" || queries[2].host != "sdw2" {
		t.Fatalf("hosts %v", queries)
	}
	if len(got["sdw1"]) != 1 || len(got["sdw2"]) != 2 || len(got["mdw"]) != 1 {
		t.Fatalf("routing %v", got)
	}
	if len(unknown) != 2 || unknown[0] != 2 || unknown[1] != 7 {
		t.Fatalf("unknown segments %v", unknown)
	}
	queries, _ = groupByHost(backends, topo, false)
	for _, q := range queries {
		for _, p := range q.procs {
			if p.PID == 31 {
				t.Fatal("system process kept with include_system_processes false")
			}
		}
	}
}

func TestSystemProcessMarking(t *testing.T) {
	for _, tc := range []struct {
		sess int64
		bt   string
		want bool
	}{
		{0, "", true},
		{0, "client backend", true},
		{12, "", false},
		{12, "client backend", false},
		{12, "parallel worker", false},
		{12, "checkpointer", true},
		{12, "autovacuum worker", true},
	} {
		if got := isSystemProcess(tc.sess, tc.bt); got != tc.want {
			t.Errorf("isSystemProcess(%d, %q) = %v", tc.sess, tc.bt, got)
		}
	}
}

func strp(s string) *string { return &s }
func i64p(v int64) *int64   { return &v }

func TestSessionHeadsGreenplumOnePerSessID(t *testing.T) {
	t0 := time.Now()
	t1 := t0.Add(time.Second)
	rows := []SessionRow{
		{PID: 100, SessionID: 7, BackendType: strp("parallel worker"), BackendStart: &t0},
		{PID: 101, SessionID: 7, BackendType: strp("client backend"), BackendStart: &t1},
		{PID: 200, SessionID: 8, BackendStart: &t1},
		{PID: 199, SessionID: 8, BackendStart: &t0},
		{PID: 300, SessionID: 0, BackendType: strp("checkpointer")},
	}
	heads := sessionHeads(dialect.GP7, rows)
	if len(heads) != 2 || heads[0].PID != 101 || heads[1].PID != 199 {
		t.Fatalf("heads %+v", heads)
	}
}

// A backend that connected between the backends' read and the sessions'
// read is in the sessions only: it is asked about too, as a coordinator
// backend of its session (make run: a churn session listed so and gone by
// the next scrape ended unknown, its exit record attributed to nothing).
func TestABackendThatConnectedBetweenTheReadsIsAsked(t *testing.T) {
	backends := []Backend{
		{SegmentID: -1, PID: 10, SessionID: 5, BackendType: "client backend"},
		{SegmentID: 0, PID: 11, SessionID: 5},
		{SegmentID: 0, PID: 12, SessionID: 6}, // a segment's pid, the same as a coordinator's below
	}
	sessions := []SessionRow{
		{PID: 10, SessionID: 5, BackendType: strp("client backend")},
		{PID: 12, SessionID: 7, BackendType: strp("client backend")}, // connected in between
		{PID: 13, SessionID: 0}, // no backend_type column
	}
	got := withCoordinatorRows(backends, sessions)
	want := append(slices.Clone(backends),
		Backend{SegmentID: -1, PID: 12, SessionID: 7, BackendType: "client backend"},
		Backend{SegmentID: -1, PID: 13, SessionID: 0})
	if !slices.Equal(got, want) {
		t.Errorf("backends %+v, want %+v", got, want)
	}
}

func TestSessionHeadsPostgreSQLSkipsParallelWorkers(t *testing.T) {
	rows := []SessionRow{
		{PID: 100, SessionID: 100, BackendType: strp("client backend")},
		{PID: 101, SessionID: 100, LeaderPID: i64p(100), BackendType: strp("parallel worker")},
		{PID: 102, SessionID: 102, BackendType: strp("checkpointer")},
	}
	heads := sessionHeads(dialect.PostgreSQL, rows)
	if len(heads) != 2 || heads[0].PID != 100 || heads[1].PID != 102 || !isSystemSession(heads[1]) || isSystemSession(heads[0]) {
		t.Fatalf("heads %+v", heads)
	}
}

var goodHost = &yagpcc.ProcHost{Hostname: "sdw1", ClkTck: 100, PageSize: 4096, BootTimeUnix: 1_700_000_000}

func TestCheckAnswerRejectsGarbage(t *testing.T) {
	asked := map[int64]*Backend{1: {PID: 1}, 2: {PID: 2}}
	for _, tc := range []struct {
		name string
		resp *yagpcc.GetPidProcInfoResponse
	}{
		{"nil", nil},
		{"no host constants", &yagpcc.GetPidProcInfoResponse{}},
		{"zero clk_tck", &yagpcc.GetPidProcInfoResponse{Host: &yagpcc.ProcHost{PageSize: 4096, BootTimeUnix: 1}}},
		{"pid not asked", &yagpcc.GetPidProcInfoResponse{Host: goodHost, PidProcData: []*yagpcc.GpPidProcInfo{{Pid: 3}}}},
		{"pid twice", &yagpcc.GetPidProcInfoResponse{Host: goodHost, PidProcData: []*yagpcc.GpPidProcInfo{{Pid: 1}, {Pid: 1}}}},
	} {
		if _, err := checkAnswer(tc.resp, 0, asked); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	if _, err := checkAnswer(&yagpcc.GetPidProcInfoResponse{Host: goodHost, PidProcData: []*yagpcc.GpPidProcInfo{{Pid: 2}}}, 0, asked); err != nil {
		t.Errorf("a partial answer is fine: %v", err)
	}
}

// scriptedReader answers from the request itself, or misbehaves as told.
type scriptedReader struct {
	calls    atomic.Int32
	maxBatch atomic.Int32
	inFlight atomic.Int32
	peak     atomic.Int32
	hang     bool
	fail     error
	garbage  bool
}

func (r *scriptedReader) GetPidProcStat(ctx context.Context, req *yagpcc.GetPidProcInfoReq) (*yagpcc.GetPidProcInfoResponse, error) {
	r.calls.Add(1)
	raisePeak(&r.peak, r.inFlight.Add(1))
	defer r.inFlight.Add(-1)
	if b := int32(len(req.GetSegmentProcess())); b > r.maxBatch.Load() {
		r.maxBatch.Store(b)
	}
	if r.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if r.fail != nil {
		return nil, r.fail
	}
	resp := &yagpcc.GetPidProcInfoResponse{Host: goodHost}
	if r.garbage {
		resp.Host = &yagpcc.ProcHost{}
	}
	for _, sp := range req.GetSegmentProcess() {
		resp.PidProcData = append(resp.PidProcData, &yagpcc.GpPidProcInfo{
			GpSegmentId: sp.GetGpSegmentId(), SessId: sp.GetSessId(), Pid: sp.GetPid(),
			ProcStat: &yagpcc.ProcStat{Utime: 100, Stime: 50, Starttime: 200},
		})
	}
	resp.Summary = &yagpcc.ProcReadSummary{Requested: int64(len(req.GetSegmentProcess())), Answered: int64(len(resp.PidProcData))}
	return resp, nil
}

// raisePeak makes peak at least n.
func raisePeak(peak *atomic.Int32, n int32) {
	for {
		p := peak.Load()
		if n <= p || peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func directoryOf(cfg *Config, readers map[string]procReader) *agentDirectory {
	d := newAgentDirectory(cfg, nil, componentTelemetry(), nil)
	for h, r := range readers {
		d.readers[h] = r
	}
	return d
}

func procsOn(seg int64, n int) []Backend {
	out := make([]Backend, n)
	for i := range out {
		out[i] = Backend{SegmentID: seg, PID: int64(1000*int(seg+2) + i), SessionID: 9}
	}
	return out
}

// acceptAll is a pipeline that takes every answer.
func acceptAll(_ context.Context, a *agentAnswer) (int, int, error) {
	return len(a.infos) + len(a.unchanged), 0, nil
}

func TestRefusedAnswerMarksItsHostDownAndTheRestStillGoes(t *testing.T) {
	cfg := validConfig()
	cfg.MaxPidsPerCall = 2
	dir := directoryOf(cfg, map[string]procReader{"sdw1": &scriptedReader{}, "sdw2": &scriptedReader{}})
	calls := map[string]int{}
	var mu sync.Mutex
	refuseFirstOfSdw1 := func(_ context.Context, a *agentAnswer) (int, int, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[a.host]++
		if a.host == "sdw1" && calls[a.host] == 1 {
			return len(a.infos), 0, errors.New("memory limit reached")
		}
		return len(a.infos), 0, nil
	}
	res := fanOut(context.Background(), cfg, dir, []hostQuery{{host: "sdw1", procs: procsOn(0, 4)}, {host: "sdw2", procs: procsOn(1, 2)}}, refuseFirstOfSdw1)
	if res[0].up || !strings.Contains(res[0].err.Error(), "memory limit") {
		t.Errorf("sdw1 up=%v err=%v, want down for its refused batch", res[0].up, res[0].err)
	}
	if calls["sdw1"] != 2 || !res[1].up {
		t.Errorf("sdw1 batches handed on %d (want 2: the refusal stops nothing), sdw2 up=%v", calls["sdw1"], res[1].up)
	}
}

func TestFanOutBatchesEveryHostWithinTheLimit(t *testing.T) {
	cfg := validConfig()
	cfg.MaxPidsPerCall = 2
	a, b := &scriptedReader{}, &scriptedReader{}
	dir := directoryOf(cfg, map[string]procReader{"sdw1": a, "sdw2": b})
	res := fanOut(context.Background(), cfg, dir, []hostQuery{{host: "sdw1", procs: procsOn(0, 5)}, {host: "sdw2", procs: procsOn(1, 4)}}, acceptAll)
	if a.calls.Load() != 3 || b.calls.Load() != 2 {
		t.Fatalf("calls sdw1=%d sdw2=%d, want 3 and 2", a.calls.Load(), b.calls.Load())
	}
	if a.maxBatch.Load() > 2 || b.maxBatch.Load() > 2 {
		t.Fatal("a batch exceeded max_pids_per_call")
	}
	if !res[0].up || !res[1].up || res[0].answered != 5 || res[1].answered != 4 || res[0].written != 5 {
		t.Fatalf("results %+v", res)
	}
}

func TestFanOutBoundsParallelHosts(t *testing.T) {
	cfg := validConfig()
	cfg.MaxParallelHosts = 2
	shared := &slowReader{delay: 20 * time.Millisecond}
	readers, queries := hostsOfOneReader(shared, 5)
	fanOut(context.Background(), cfg, directoryOf(cfg, readers), queries, acceptAll)
	if p := shared.peak.Load(); p > 2 || p < 1 {
		t.Fatalf("peak concurrent hosts %d, want at most max_parallel_hosts=2", p)
	}
}

func TestAnswersGoThroughTheEmitSlotsWhileHostsAreAskedInParallel(t *testing.T) {
	cfg := validConfig()
	cfg.MaxParallelHosts = 4
	shared := &slowReader{delay: 20 * time.Millisecond}
	readers, queries := hostsOfOneReader(shared, 8)
	var inSink, sinkPeak atomic.Int32
	slow := func(ctx context.Context, a *agentAnswer) (int, int, error) {
		raisePeak(&sinkPeak, inSink.Add(1))
		defer inSink.Add(-1)
		time.Sleep(10 * time.Millisecond) // a slow pipeline: time for answers to overlap, not a wait
		return acceptAll(ctx, a)
	}
	res := fanOut(context.Background(), cfg, directoryOf(cfg, readers), queries, throughSlots(cpuslots.New(1), slow))
	for _, r := range res {
		if !r.up || r.written != 1 {
			t.Fatalf("host %s up=%v written=%d err=%v, want every answer handed on", r.host, r.up, r.written, r.err)
		}
	}
	if p := sinkPeak.Load(); p != 1 {
		t.Errorf("peak answers in the pipeline at once %d, want 1 (one slot)", p)
	}
	if p := shared.peak.Load(); p < 2 {
		t.Logf("agents were asked %d at a time: this run did not overlap them", p)
	}
}

// The agents' answers are decoded in the process-wide pipeline slots the
// writing of them takes too, so that at most GOMAXPROCS - 1 goroutines
// of the receiver do CPU-heavy work while a tick is taken in and one P
// stays free for the API (docs/performance.md, issue 36).
func TestAnswersAreDecodedAndWrittenInThePipelineSlots(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	s := unitScraper(t, validConfig(), newMemorySource(1, nil), nil, tt)
	if s.dir.agents.DecodeSlots() != cpuslots.Pipeline {
		t.Error("the agents' answers are not decoded in the pipeline slots")
	}
	if s.emitSlots != cpuslots.Pipeline {
		t.Error("the answers are not written in the pipeline slots")
	}
}

// hostsOfOneReader is n hosts h1..hn, each with one process, all answered by r.
func hostsOfOneReader(r procReader, n int) (map[string]procReader, []hostQuery) {
	readers := map[string]procReader{}
	var queries []hostQuery
	for i := 1; i <= n; i++ {
		h := fmt.Sprintf("h%d", i)
		readers[h] = r
		queries = append(queries, hostQuery{host: h, procs: procsOn(0, 1)})
	}
	return readers, queries
}

type slowReader struct {
	delay          time.Duration
	inFlight, peak atomic.Int32
}

func (r *slowReader) GetPidProcStat(ctx context.Context, req *yagpcc.GetPidProcInfoReq) (*yagpcc.GetPidProcInfoResponse, error) {
	raisePeak(&r.peak, r.inFlight.Add(1))
	defer r.inFlight.Add(-1)
	time.Sleep(r.delay) // the slow agent this double plays: latency to overlap calls, not a wait
	return (&scriptedReader{}).GetPidProcStat(ctx, req)
}

func TestFanOutMarksFailingHostsDownAndKeepsTheRest(t *testing.T) {
	cfg := validConfig()
	cfg.HostTimeout = 50 * time.Millisecond
	dir := directoryOf(cfg, map[string]procReader{
		"ok":      &scriptedReader{},
		"hung":    &scriptedReader{hang: true},
		"refused": &scriptedReader{fail: errors.New("connection refused")},
		"garbage": &scriptedReader{garbage: true},
	})
	// The fan-out's own context outlives host_timeout by far, so a hung host
	// that times out was stopped by host_timeout.
	ctx := await.Context(t)
	res := fanOut(ctx, cfg, dir, []hostQuery{
		{host: "garbage", procs: procsOn(0, 2)}, {host: "hung", procs: procsOn(1, 2)}, {host: "ok", procs: procsOn(2, 2)}, {host: "refused", procs: procsOn(3, 2)},
	}, acceptAll)
	if ctx.Err() != nil {
		t.Fatal("a hung host held the fan-out until the test's deadline")
	}
	for _, r := range res {
		wantUp := r.host == "ok"
		if r.up != wantUp {
			t.Errorf("host %s up=%v (err %v)", r.host, r.up, r.err)
		}
		if !wantUp && (r.err == nil || r.written != 0) {
			t.Errorf("host %s: err %v, %d processes written", r.host, r.err, r.written)
		}
	}
	if !errors.Is(res[1].err, context.DeadlineExceeded) && !strings.Contains(res[1].err.Error(), "deadline") {
		t.Errorf("hung host error %v does not say it timed out", res[1].err)
	}
}

// A host that ran out its host_timeout on its exit records (or postmasters)
// is not asked for its processes in the same scrape: it is reported down
// with why, and a host whose call failed fast is still asked.
func TestHostSilentOnExitRecordsIsNotAskedInTheSameScrape(t *testing.T) {
	cfg := validConfig()
	hung, refused, ok := &scriptedReader{}, &scriptedReader{}, &scriptedReader{}
	dir := directoryOf(cfg, map[string]procReader{"hung": hung, "refused": refused, "ok": ok})
	queries := []hostQuery{{host: "hung", procs: procsOn(0, 2)}, {host: "refused", procs: procsOn(1, 2)}, {host: "ok", procs: procsOn(2, 2)}}
	markSilentHosts(queries, []hostExits{
		{host: "hung", err: fmt.Errorf("host hung: GetExitRecords: %w", status.Error(codes.DeadlineExceeded, "context deadline exceeded"))},
		{host: "refused", err: status.Error(codes.Unavailable, "connection refused")},
		{host: "ok", parentsErr: errors.New("no such process")},
	})
	res := fanOut(context.Background(), cfg, dir, queries, acceptAll)
	if hung.calls.Load() != 0 || res[0].up || !strings.Contains(res[0].err.Error(), "not asked") {
		t.Errorf("silent host asked %d times, up=%v, err %v; want not asked and down", hung.calls.Load(), res[0].up, res[0].err)
	}
	if refused.calls.Load() != 1 || !res[1].up || ok.calls.Load() != 1 || !res[2].up {
		t.Errorf("fast-failing hosts asked %d and %d times (up %v, %v); want asked once each and up",
			refused.calls.Load(), ok.calls.Load(), res[1].up, res[2].up)
	}
}

// A backend type the rows repeat is read without an allocation; NULL
// reads as ""; a flood of distinct values is read right but not all kept.
func TestInternedTextSharesRepeatedValues(t *testing.T) {
	it := internedText{seen: map[string]string{}}
	row := []byte("client backend")
	if err := it.ScanBytes(row); err != nil || it.v != "client backend" {
		t.Fatalf("read %q, %v", it.v, err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = it.ScanBytes(row) }); n != 0 {
		t.Errorf("%v allocations per repeated value, want 0", n)
	}
	if _ = it.ScanBytes(nil); it.v != "" {
		t.Errorf("NULL read as %q", it.v)
	}
	for i := range 2 * maxInterned {
		v := fmt.Sprintf("type %d", i)
		if _ = it.ScanBytes([]byte(v)); it.v != v {
			t.Fatalf("read %q, want %q", it.v, v)
		}
	}
	if len(it.seen) > maxInterned {
		t.Errorf("%d values kept, at most %d", len(it.seen), maxInterned)
	}
}
