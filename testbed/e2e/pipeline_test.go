// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/groundtruth"
	"github.com/gpotel/gpotel/testbed/workload"
)

// tolerance is how far a figure may be from the kernel's own counters.
const tolerance = 0.05

// The window config/testbed.yaml serves as last_metrics.
const lastWindow = 10 * time.Second

// TestEndToEnd runs the ocb-built collector, real agents and a real
// PostgreSQL testbed once, and checks what comes out against /proc.
func TestEndToEnd(t *testing.T) {
	needBinaries(t)
	s := startStack(t)
	api := dialAPI(t, s.API)

	t.Run("figures match /proc", func(t *testing.T) { checkFiguresMatchProc(t, s, api) })
	t.Run("an agent killed makes sessions partial, the rest keeps updating", func(t *testing.T) { checkAgentKilled(t, s, api) })
	t.Run("a coordinator restart brings sessions back under the new tm_id", func(t *testing.T) { checkCoordinatorRestart(t, s, api) })
}

// measured is the workload of the accuracy checks, running concurrently.
type measured struct {
	cpu, io, mem, idle *workload.Session
}

func startMeasured(t *testing.T, c *cluster.Cluster, d time.Duration) measured {
	t.Helper()
	ctx := context.Background()
	start := func(spec workload.Spec) *workload.Session {
		w, err := workload.Start(ctx, c, spec)
		if err != nil {
			t.Fatalf("workload %s: %v", spec.Name, err)
		}
		t.Cleanup(func() { _ = w.Stop() })
		return w
	}
	return measured{
		// CPU on the coordinator and on every segment.
		cpu: start(workload.Spec{Name: "e2e-cpu", Kind: workload.CPU, Duration: d}),
		// One segment per host keeps the disk and the two cores from saturating.
		io:   start(workload.Spec{Name: "e2e-io", Kind: workload.IO, Duration: d, Contents: []int{0, 2}, IOBytes: 16 << 20}),
		mem:  start(workload.Spec{Name: "e2e-memory", Kind: workload.Memory, Duration: d, Contents: []int{0, 1, 2}, MemoryBytes: 24 << 20}),
		idle: start(workload.Spec{Name: "e2e-idle", Kind: workload.IdleInTransaction, Duration: d}),
	}
}

func checkFiguresMatchProc(t *testing.T, s *Stack, api yagpcc.GetGPInfoClient) {
	const duration = 22 * time.Second
	// The workloads outlive the measurement (the test's cleanup stops them):
	// on a loaded machine their start can take seconds, and one that ended
	// inside the window would leave its sessions' process counts short.
	w := startMeasured(t, s.Cluster, untilStopped(t))
	began := time.Now()
	var pids []int
	for _, x := range []*workload.Session{w.cpu, w.io, w.mem, w.idle} {
		pids = append(pids, x.AllPids()...)
	}
	truth := sampleTruth(pids, 50*time.Millisecond)
	poller := &apiPoller{api: api, states: map[int64][]*yagpcc.SessionState{}}
	pollCtx, stopPolling := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() { poller.poll(pollCtx, 300*time.Millisecond); close(polled) }()

	// A measurement window, not a wait for a condition: the API and /proc
	// are sampled for duration by the wall clock while the workloads run;
	// the session info check reads pg_stat_activity meanwhile.
	time.Sleep(time.Until(began.Add(duration - 6*time.Second)))
	activity := readActivity(t, s.Cluster, w.idle.CoordinatorPID())
	time.Sleep(time.Until(began.Add(duration - time.Second)))
	stopPolling()
	<-polled
	if err := truth.Stop(); err != nil {
		t.Fatalf("ground truth: %v", err)
	}
	if poller.errs > 3 {
		t.Errorf("%d GetGPSessions calls failed; last: %v", poller.errs, poller.lastEr)
	}

	t.Run("CPU seconds of a session on every segment", func(t *testing.T) {
		st := pickWindowState(t, truth, poller.of(w.cpu.SessID()), len(w.cpu.AllPids()))
		cpu := func(p groundtruth.Process) float64 { return p.CPUSeconds() }
		last := st.GetLastMetrics().GetSystemStat()
		got := last.GetUserTimeSeconds() + last.GetKernelTimeSeconds()
		lo, hi := windowTruthRange(t, truth, st, readBoundsOf(t, s, st), w.cpu.AllPids(), cpu)
		t.Logf("sess %d window %.2fs: gpotel %.3f CPU s, /proc %.3f..%.3f CPU s as read", w.cpu.SessID(), last.GetWindowSeconds(), got, lo, hi)
		if lo < 1 {
			t.Fatalf("the CPU workload burned only %.3f s in the window: nothing to compare", lo)
		}
		if !withinRange(got, lo, hi, tolerance) {
			t.Errorf("last_metrics CPU %.3f s, /proc %.3f..%.3f s as read: off by more than %.0f%%", got, lo, hi, tolerance*100)
		}
		if math.Abs(last.GetRunningTimeSeconds()-got) > 1e-6 {
			t.Errorf("runningTimeSeconds %.6f is not user+kernel %.6f", last.GetRunningTimeSeconds(), got)
		}
		total := st.GetTotalMetrics().GetSystemStat()
		gotTotal := total.GetUserTimeSeconds() + total.GetKernelTimeSeconds()
		wantTotal := pointTruth(t, truth, st, w.cpu.AllPids(), cpu)
		t.Logf("lifetime: gpotel %.3f CPU s, /proc %.3f CPU s", gotTotal, wantTotal)
		if !within(gotTotal, wantTotal, tolerance) {
			t.Errorf("total_metrics CPU %.3f s, /proc %.3f s: off by more than %.0f%%", gotTotal, wantTotal, tolerance*100)
		}
		if last.GetHosts() != 3 || int(last.GetProcesses()) != len(w.cpu.AllPids()) {
			t.Errorf("hosts %d, processes %d; want 3 hosts (mdw, sdw1, sdw2) and %d processes", last.GetHosts(), last.GetProcesses(), len(w.cpu.AllPids()))
		}
		checkOTLP(t, s, st)
	})

	t.Run("bytes written by an I/O session", func(t *testing.T) {
		st := pickWindowState(t, truth, poller.of(w.io.SessID()), len(w.io.AllPids()))
		written := func(p groundtruth.Process) float64 { return float64(p.WriteBytes) }
		got := float64(st.GetLastMetrics().GetSystemStat().GetWriteBytes())
		lo, hi := windowTruthRange(t, truth, st, readBoundsOf(t, s, st), w.io.AllPids(), written)
		t.Logf("sess %d: gpotel wrote %.1f MiB in the window, /proc %.1f..%.1f MiB as read", w.io.SessID(), got/(1<<20), lo/(1<<20), hi/(1<<20))
		if lo < 1<<20 {
			t.Fatalf("the I/O workload wrote only %.0f bytes in the window: nothing to compare", lo)
		}
		if !withinRange(got, lo, hi, tolerance) {
			t.Errorf("last_metrics write_bytes %.0f, /proc %.0f..%.0f as read: off by more than %.0f%%", got, lo, hi, tolerance*100)
		}
		gotTotal := float64(st.GetTotalMetrics().GetSystemStat().GetWriteBytes())
		wantTotal := pointTruth(t, truth, st, w.io.AllPids(), written)
		if !within(gotTotal, wantTotal, tolerance) {
			t.Errorf("total_metrics write_bytes %.0f, /proc %.0f: off by more than %.0f%%", gotTotal, wantTotal, tolerance*100)
		}
		checkOTLP(t, s, st)
	})

	t.Run("resident memory per host and cluster-wide", func(t *testing.T) {
		st := pickWindowState(t, truth, poller.of(w.mem.SessID()), len(w.mem.AllPids()))
		byHost := map[string][]int{}
		for content, ps := range w.mem.Pids() {
			host := s.Cluster.HostOf(content)
			byHost[host] = append(byHost[host], ps...)
		}
		// The agents read /proc during the fan-out that ends at the snapshot time.
		at := st.GetTime().AsTime()
		last := st.GetLastMetrics().GetSystemStat()
		for _, g := range []struct {
			name          string
			f             func(groundtruth.Process) float64
			cluster, host uint64
		}{
			{"rss", func(p groundtruth.Process) float64 { return float64(p.RSSBytes) }, last.GetRss(), last.GetRssMaxHost()},
			{"rss_anon", func(p groundtruth.Process) float64 { return float64(p.RSSAnonBytes) }, last.GetRssAnon(), last.GetRssAnonMaxHost()},
		} {
			sumMin, sumMax, hostMin, hostMax, n := truth.gaugeRange(at.Add(-time.Second), at.Add(50*time.Millisecond), byHost, g.f)
			t.Logf("%s: gpotel cluster %.1f MiB, max host %.1f MiB; /proc over %d readings: cluster %.1f..%.1f MiB, max host %.1f..%.1f MiB",
				g.name, mib(g.cluster), mib(g.host), n, mib(sumMin), mib(sumMax), mib(hostMin), mib(hostMax))
			if n == 0 {
				t.Fatalf("no ground truth near %s", at)
			}
			if v := float64(g.cluster); v < sumMin*(1-tolerance) || v > sumMax*(1+tolerance) {
				t.Errorf("%s cluster %.1f MiB outside /proc's %.1f..%.1f MiB (±%.0f%%)", g.name, mib(v), mib(sumMin), mib(sumMax), tolerance*100)
			}
			if v := float64(g.host); v < hostMin*(1-tolerance) || v > hostMax*(1+tolerance) {
				t.Errorf("%s max host %.1f MiB outside /proc's %.1f..%.1f MiB (±%.0f%%)", g.name, mib(v), mib(hostMin), mib(hostMax), tolerance*100)
			}
		}
		// Each of the 3 segment backends holds most of 24 MiB in local buffers.
		if last.GetRssAnon() < 3*16<<20 {
			t.Errorf("rss_anon %.1f MiB: the memory workload's local buffers are missing", mib(last.GetRssAnon()))
		}
	})

	t.Run("session_info matches pg_stat_activity", func(t *testing.T) {
		states := poller.of(w.idle.SessID())
		if len(states) == 0 {
			t.Fatalf("session %d never appeared in GetGPSessions", w.idle.SessID())
		}
		info := states[len(states)-1].GetSessionInfo()
		got := activityRow{
			pid: info.GetPid(), user: info.GetUser(), database: info.GetDatabase(), application: info.GetApplicationName(),
			clientAddr: info.GetClientAddr(), clientPort: info.GetClientPort(), state: info.GetState(),
			backendXID: info.GetBackendXid(), backendStart: info.GetBackendStart().AsTime(), xactStart: info.GetXactStart().AsTime(),
		}
		if got != activity {
			t.Errorf("session_info differs from pg_stat_activity:\n got %+v\nwant %+v", got, activity)
		}
		if k := states[len(states)-1].GetSessionKey(); k.GetTmId() != tmID(t, s.Cluster) {
			t.Errorf("tm_id %d, coordinator postmaster started at %d", k.GetTmId(), tmID(t, s.Cluster))
		}
	})
}

// pickWindowState chooses the newest complete snapshot whose whole window
// lies inside the ground-truth record, with its last_metrics window full.
func pickWindowState(t *testing.T, truth *truthSeries, states []*yagpcc.SessionState, processes int) *yagpcc.SessionState {
	t.Helper()
	first, last := truth.span()
	var why []string
	for i := len(states) - 1; i >= 0; i-- {
		st := states[i]
		sys := st.GetLastMetrics().GetSystemStat()
		at := st.GetTime().AsTime()
		from := at.Add(-time.Duration(sys.GetWindowSeconds() * float64(time.Second)))
		switch {
		case sys.GetPartial():
			why = append(why, fmt.Sprintf("%s partial", at.Format("15:04:05.000")))
		case int(sys.GetProcesses()) != processes:
			why = append(why, fmt.Sprintf("%s %d processes", at.Format("15:04:05.000"), sys.GetProcesses()))
		case sys.GetWindowSeconds() < 0.7*lastWindow.Seconds():
			why = append(why, fmt.Sprintf("%s window %.1fs", at.Format("15:04:05.000"), sys.GetWindowSeconds()))
		case from.Before(first) || !at.Before(last):
			why = append(why, fmt.Sprintf("%s outside ground truth", at.Format("15:04:05.000")))
		default:
			return st
		}
	}
	t.Fatalf("no usable snapshot among %d (ground truth %s..%s): %s", len(states),
		first.Format("15:04:05.000"), last.Format("15:04:05.000"), strings.Join(why, "; "))
	return nil
}

// windowTruth is the kernel's delta over the state's last_metrics window.
func windowTruth(t *testing.T, truth *truthSeries, st *yagpcc.SessionState, pids []int, f func(groundtruth.Process) float64) float64 {
	t.Helper()
	at := st.GetTime().AsTime()
	from := at.Add(-time.Duration(st.GetLastMetrics().GetSystemStat().GetWindowSeconds() * float64(time.Second)))
	end, err := truth.cumulativeAt(at, pids, f)
	if err != nil {
		t.Fatal(err)
	}
	begin, err := truth.cumulativeAt(from, pids, f)
	if err != nil {
		t.Fatal(err)
	}
	return end - begin
}

// pointTruth is the kernel's cumulative value at the snapshot time.
func pointTruth(t *testing.T, truth *truthSeries, st *yagpcc.SessionState, pids []int, f func(groundtruth.Process) float64) float64 {
	t.Helper()
	v, err := truth.cumulativeAt(st.GetTime().AsTime(), pids, f)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mib[T float64 | uint64](v T) float64 { return float64(v) / (1 << 20) }

// activityRow is what session_info must repeat from pg_stat_activity.
type activityRow struct {
	pid                         int64
	user, database, application string
	clientAddr                  string
	clientPort                  int64
	state, backendXID           string
	backendStart, xactStart     time.Time
}

func readActivity(t *testing.T, c *cluster.Cluster, pid int) activityRow {
	t.Helper()
	ctx := await.Context(t)
	conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var r activityRow
	err = conn.QueryRow(ctx, `SELECT pid, usename, datname, application_name, coalesce(host(client_addr), ''),
		coalesce(client_port, 0), state, coalesce(backend_xid::text, ''), backend_start, xact_start
		FROM pg_catalog.pg_stat_activity WHERE pid = $1`, pid).Scan(
		&r.pid, &r.user, &r.database, &r.application, &r.clientAddr, &r.clientPort, &r.state, &r.backendXID, &r.backendStart, &r.xactStart)
	if err != nil {
		t.Fatalf("pg_stat_activity of pid %d: %v", pid, err)
	}
	r.backendStart, r.xactStart = r.backendStart.UTC(), r.xactStart.UTC()
	return r
}

// tmID is the coordinator's postmaster start time in unix seconds.
func tmID(t *testing.T, c *cluster.Cluster) int64 {
	t.Helper()
	ctx := await.Context(t)
	conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var v int64
	if err := conn.QueryRow(ctx, `SELECT extract(epoch FROM pg_postmaster_start_time())::bigint`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// checkOTLP finds the session's resource for the state's snapshot in what the
// OTLP sink received and checks names, attributes and figures against the API.
func checkOTLP(t *testing.T, s *Stack, st *yagpcc.SessionState) {
	t.Helper()
	at := pcommon.NewTimestampFromTime(st.GetTime().AsTime())
	sessID := st.GetSessionKey().GetSessId()
	var found pmetric.ResourceMetrics
	ok := false
	// otlp_grpc's sending queue holds it for up to its 2 s flush timeout.
	deadline := await.Deadline(t)
	for !ok && time.Now().Before(deadline) {
		for _, md := range s.Sink.Received() {
			rms := md.ResourceMetrics()
			for i := 0; i < rms.Len() && !ok; i++ {
				rm := rms.At(i)
				attrs := rm.Resource().Attributes()
				if str(attrs, pipeline.AttrResourceKind) != pipeline.KindSession.String() || intAttr(attrs, pipeline.AttrSessionID) != sessID {
					continue
				}
				if pts, _ := points(rm, pipeline.MetricSessionCPUTime); pts.Len() > 0 && pts.At(0).Timestamp() == at {
					found, ok = rm, true
				}
			}
		}
		if !ok {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if !ok {
		t.Fatalf("OTLP: no session %d resource for the snapshot at %s among %d requests", sessID, st.GetTime().AsTime().Format(time.RFC3339Nano), s.Sink.Requests())
	}
	attrs := found.Resource().Attributes()
	info := st.GetSessionInfo()
	for key, want := range map[string]any{
		pipeline.AttrTmID:          st.GetSessionKey().GetTmId(),
		pipeline.AttrSessionPID:    info.GetPid(),
		pipeline.AttrDBNamespace:   info.GetDatabase(),
		pipeline.AttrSessionUser:   info.GetUser(),
		pipeline.AttrHostName:      cluster.CoordinatorHost,
		pipeline.AttrSessionSystem: false,
	} {
		v, present := attrs.Get(key)
		if !present || fmt.Sprint(v.AsRaw()) != fmt.Sprint(want) {
			t.Errorf("OTLP resource %s = %v, want %v", key, v.AsRaw(), want)
		}
	}
	window := pipeline.WindowName(lastWindow)
	last := st.GetLastMetrics().GetSystemStat()
	total := st.GetTotalMetrics().GetSystemStat()
	for _, c := range []struct {
		metric, unit string
		attrs        map[string]string
		want         float64
	}{
		{pipeline.MetricSessionCPUTime, "s", map[string]string{pipeline.AttrWindow: window, pipeline.AttrCPUMode: pipeline.CPUModeUser}, last.GetUserTimeSeconds()},
		{pipeline.MetricSessionCPUTime, "s", map[string]string{pipeline.AttrWindow: window, pipeline.AttrCPUMode: pipeline.CPUModeSys}, last.GetKernelTimeSeconds()},
		{pipeline.MetricSessionCPUTime, "s", map[string]string{pipeline.AttrWindow: pipeline.WindowLifetime, pipeline.AttrCPUMode: pipeline.CPUModeUser}, total.GetUserTimeSeconds()},
		{pipeline.MetricSessionDiskIO, "By", map[string]string{pipeline.AttrWindow: window, pipeline.AttrDirection: pipeline.DirectionWrite}, float64(last.GetWriteBytes())},
		{pipeline.MetricSessionDiskIO, "By", map[string]string{pipeline.AttrWindow: window, pipeline.AttrDirection: pipeline.DirectionRead}, float64(last.GetReadBytes())},
		{pipeline.MetricSessionWindowSpan, "s", map[string]string{pipeline.AttrWindow: window}, last.GetWindowSeconds()},
		{pipeline.MetricSessionMemoryUsage, "By", map[string]string{pipeline.AttrMemoryType: pipeline.MemoryTypeRSS, pipeline.AttrMemoryAggregation: pipeline.MemoryAggregationCluster}, float64(last.GetRss())},
	} {
		pts, unit := points(found, c.metric)
		if unit != c.unit {
			t.Errorf("OTLP %s unit %q, want %q", c.metric, unit, c.unit)
		}
		got, present := pointWith(pts, c.attrs)
		if !present {
			t.Errorf("OTLP %s%v missing", c.metric, c.attrs)
			continue
		}
		if math.Abs(got-c.want) > 1e-6*math.Max(1, math.Abs(c.want)) {
			t.Errorf("OTLP %s%v = %v, API says %v", c.metric, c.attrs, got, c.want)
		}
	}
}

func str(m pcommon.Map, key string) string {
	if v, ok := m.Get(key); ok {
		return v.AsString()
	}
	return ""
}

func intAttr(m pcommon.Map, key string) int64 {
	if v, ok := m.Get(key); ok && v.Type() == pcommon.ValueTypeInt {
		return v.Int()
	}
	return -1
}

// points returns a metric's number data points and unit within a resource.
func points(rm pmetric.ResourceMetrics, name string) (pmetric.NumberDataPointSlice, string) {
	sms := rm.ScopeMetrics()
	for i := 0; i < sms.Len(); i++ {
		ms := sms.At(i).Metrics()
		for j := 0; j < ms.Len(); j++ {
			m := ms.At(j)
			if m.Name() != name {
				continue
			}
			switch m.Type() {
			case pmetric.MetricTypeGauge:
				return m.Gauge().DataPoints(), m.Unit()
			case pmetric.MetricTypeSum:
				return m.Sum().DataPoints(), m.Unit()
			}
		}
	}
	return pmetric.NewNumberDataPointSlice(), ""
}

func pointWith(pts pmetric.NumberDataPointSlice, attrs map[string]string) (float64, bool) {
	for i := 0; i < pts.Len(); i++ {
		p := pts.At(i)
		match := true
		for k, v := range attrs {
			if str(p.Attributes(), k) != v {
				match = false
			}
		}
		if match && p.Attributes().Len() == len(attrs) {
			if p.ValueType() == pmetric.NumberDataPointValueTypeInt {
				return float64(p.IntValue()), true
			}
			return p.DoubleValue(), true
		}
	}
	return 0, false
}

// waitFor polls cond until it holds or the limit passes.
// startHealthyCollector runs the ocb-built collector with env and args, stops
// it when the test ends (showing its log if the test failed), and returns once
// its health_check on healthPort answers OK.
func startHealthyCollector(t *testing.T, logPath string, env []string, healthPort int, args ...string) *Process {
	t.Helper()
	collector, err := StartProcess("collector", logPath, env, bins.Collector, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("collector log:\n%s", collector.LogTail(5000))
		}
		_ = collector.Stop(15 * time.Second)
	})
	waitFor(t, "the collector's health check", func() (bool, string) {
		if exited, err := collector.Exited(); exited {
			t.Fatalf("collector exited (%v): %s", err, collector.LogTail(4000))
		}
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(healthPort) + "/")
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return collector
}

// waitFor looks at cond until it holds, up to the test's deadline; detail
// says what it saw, for the failure message.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	await.NoError(t, what, func() error {
		if ok, detail := cond(); !ok {
			return errors.New(detail)
		}
		return nil
	})
}

func stateOf(ctx context.Context, api yagpcc.GetGPInfoClient, sessID int) (*yagpcc.SessionState, error) {
	states, err := allSessions(ctx, api)
	if err != nil {
		return nil, err
	}
	for _, s := range states {
		if s.GetSessionKey().GetSessId() == int64(sessID) {
			return s, nil
		}
	}
	return nil, nil
}

func checkAgentKilled(t *testing.T, s *Stack, api yagpcc.GetGPInfoClient) {
	ctx := context.Background()
	w, err := workload.Start(ctx, s.Cluster, workload.Spec{Name: "e2e-fault-cpu", Kind: workload.CPU, Duration: untilStopped(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	waitFor(t, "the session shows complete", func() (bool, string) {
		st, err := stateOf(ctx, api, w.SessID())
		sys := st.GetLastMetrics().GetSystemStat()
		return err == nil && st != nil && sys.GetHosts() == 3 && !sys.GetPartial(), fmt.Sprintf("%v %v", err, sys)
	})
	const victim = "sdw2"
	if err := s.KillAgent(victim); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var partial []*yagpcc.SessionState
	waitFor(t, "two snapshots after the kill mark the session partial", func() (bool, string) {
		st, err := stateOf(ctx, api, w.SessID())
		if err != nil || st == nil {
			return false, fmt.Sprint(err)
		}
		if st.GetTime().AsTime().After(killed) && st.GetLastMetrics().GetSystemStat().GetPartial() {
			if n := len(partial); n == 0 || st.GetTime().AsTime().After(partial[n-1].GetTime().AsTime()) {
				partial = append(partial, st)
			}
		}
		return len(partial) >= 2, fmt.Sprintf("%d partial snapshots; newest %v", len(partial), st.GetLastMetrics().GetSystemStat())
	})
	// The hosts that still answer keep reporting: lifetime CPU keeps growing.
	a, b := partial[0].GetTotalMetrics().GetSystemStat(), partial[len(partial)-1].GetTotalMetrics().GetSystemStat()
	if b.GetRunningTimeSeconds() <= a.GetRunningTimeSeconds() {
		t.Errorf("lifetime CPU did not grow while %s was down: %.3f then %.3f s", victim, a.GetRunningTimeSeconds(), b.GetRunningTimeSeconds())
	}
	if got := b.GetHosts(); got != 2 {
		t.Errorf("while %s is down the session spans %d answering hosts, want 2", victim, got)
	}
	checkHostDown(t, s, victim, killed)
	if exited, err := s.Collector.Exited(); exited {
		t.Fatalf("collector exited after an agent died: %v", err)
	}

	if err := s.StartAgent(victim); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	waitFor(t, "the session is complete again once the agent is back", func() (bool, string) {
		st, err := stateOf(ctx, api, w.SessID())
		sys := st.GetLastMetrics().GetSystemStat()
		return err == nil && st != nil && st.GetTime().AsTime().After(back) && !sys.GetPartial() && sys.GetHosts() == 3, fmt.Sprint(sys)
	})
}

// checkHostDown looks for gpotel.host.up = 0 for the host in OTLP output after since.
func checkHostDown(t *testing.T, s *Stack, host string, since time.Time) {
	t.Helper()
	waitFor(t, "OTLP reports "+host+" down", func() (bool, string) {
		for _, md := range s.Sink.Received() {
			rms := md.ResourceMetrics()
			for i := 0; i < rms.Len(); i++ {
				rm := rms.At(i)
				if str(rm.Resource().Attributes(), pipeline.AttrResourceKind) != pipeline.KindSnapshot.String() {
					continue
				}
				pts, _ := points(rm, pipeline.MetricHostUp)
				for j := 0; j < pts.Len(); j++ {
					p := pts.At(j)
					if str(p.Attributes(), pipeline.AttrHostName) == host && p.Timestamp().AsTime().After(since) && p.IntValue() == 0 {
						return true, ""
					}
				}
			}
		}
		return false, fmt.Sprintf("%d OTLP requests", s.Sink.Requests())
	})
}

func checkCoordinatorRestart(t *testing.T, s *Stack, api yagpcc.GetGPInfoClient) {
	ctx := await.Context(t)
	before := tmID(t, s.Cluster)
	// tm_id has one-second resolution: a restart within the same second would look like none.
	time.Sleep(time.Until(time.Unix(before+1, 0)))
	if err := s.Cluster.RestartCoordinator(ctx); err != nil {
		t.Fatal(err)
	}
	after := tmID(t, s.Cluster)
	if after == before {
		t.Fatalf("the restart left tm_id at %d", after)
	}
	w, err := workload.Start(ctx, s.Cluster, workload.Spec{Name: "e2e-after-restart", Kind: workload.IdleInTransaction, Duration: untilStopped(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	waitFor(t, "the new session appears under the new tm_id", func() (bool, string) {
		st, err := stateOf(ctx, api, w.SessID())
		if err != nil || st == nil {
			return false, fmt.Sprint(err)
		}
		return st.GetSessionKey().GetTmId() == after, fmt.Sprintf("tm_id %d, want %d", st.GetSessionKey().GetTmId(), after)
	})
	states, err := allSessions(ctx, api)
	if err != nil {
		t.Fatalf("the API stopped answering after the restart: %v", err)
	}
	var tms []int64
	for _, st := range states {
		tms = append(tms, st.GetSessionKey().GetTmId())
	}
	slices.Sort(tms)
	t.Logf("tm_ids served: %v (before %d, after %d)", slices.Compact(tms), before, after)
	if exited, err := s.Collector.Exited(); exited {
		t.Fatalf("collector exited across the coordinator restart: %v", err)
	}
}
