// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/agentconn"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline/sparse"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/segmentagent/procfixture"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// scaleSessions is how many client sessions the synthetic catalog holds.
const scaleSessions = 50

// scaleRole connects the collector to the synthetic catalog: its search path
// puts gpotel_scale in front of the testbed's Greenplum compat schema.
const scaleRole = "gpotel_scale"

// installScaleCatalog makes the coordinator describe a cluster of hosts
// sdw1..sdwN with one primary each, every primary running the same fixture
// pids, spread over scaleSessions sessions: the real discovery SQL runs
// against it unchanged, and only the rows are synthetic.
func installScaleCatalog(ctx context.Context, c *cluster.Cluster, hosts int, pids []int, coordinatorPID func(s int) int) error {
	conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }()
	var b strings.Builder
	// The scale role reads this schema before pg_catalog: its pg_stat_activity
	// and gp_segment_configuration are tables of the same shape, and its
	// gp_dist_random reads dist_activity the way the testbed's reads the segments.
	fmt.Fprintf(&b, `
CREATE SCHEMA %[1]s;
CREATE TABLE %[1]s.pg_stat_activity AS SELECT * FROM pg_catalog.pg_stat_activity WHERE false;
CREATE TABLE %[1]s.gp_segment_configuration (LIKE pg_catalog.gp_segment_configuration);
CREATE TABLE %[1]s.dist_activity AS SELECT NULL::integer AS content, * FROM pg_catalog.pg_stat_activity WHERE false;
%[5]s;
CREATE ROLE %[1]s LOGIN SUPERUSER;
ALTER ROLE %[1]s SET search_path = %[1]s, pg_catalog, public;
INSERT INTO %[1]s.gp_segment_configuration (dbid, content, role, preferred_role, mode, status, port, hostname, address, datadir)
  SELECT h + 2, h, 'p', 'p', 'n', 'u', 6000 + h, 'sdw' || (h + 1), 'sdw' || (h + 1), '/data/gpseg' || h FROM generate_series(0, %[2]d - 1) h
  UNION ALL SELECT 1, -1, 'p', 'p', 'n', 'u', 5432, '%[3]s', '%[3]s', '/data/gpseg-1';
INSERT INTO %[1]s.dist_activity (content, pid, sess_id) SELECT h, p, 1000 + (i %% %[4]d)
  FROM generate_series(0, %[2]d - 1) h, unnest($1::integer[]) WITH ORDINALITY AS u(p, i);
`, scaleRole, hosts, cluster.CoordinatorHost, scaleSessions, strings.TrimSuffix(strings.TrimSpace(c.DistRandomSQL(scaleRole, scaleRole+".dist_activity")), ";"))
	if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
		return err
	}
	// Statements one by one: the last one takes the pid array as a parameter.
	stmts := strings.Split(strings.TrimSpace(b.String()), ";\n")
	for i, q := range stmts {
		var args []any
		if i == len(stmts)-1 {
			args = []any{pids}
		}
		if _, err := conn.Exec(ctx, strings.TrimSuffix(q, ";"), args...); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	batch := &pgx.Batch{}
	for s := 0; s < scaleSessions; s++ {
		batch.Queue(fmt.Sprintf(`INSERT INTO %s.pg_stat_activity (datname, pid, sess_id, usename, application_name, client_addr,
			client_port, backend_start, xact_start, query_start, state_change, state, query)
			VALUES ('tpch', $1, $2, 'gpadmin', 'scale', '10.0.0.1', $3, now(), now(), now(), now(), 'active', 'SELECT count(*) FROM lineitem')`, scaleRole),
			coordinatorPID(s), 1000+s, 40000+s)
	}
	return conn.SendBatch(ctx, batch).Close()
}

// scaleSizes are BenchmarkCollectorScale's clusters: 2000 backends per host.
var scaleSizes = []struct {
	name     string
	hosts    int
	interval time.Duration // collection interval: a tick must fit in it
}{
	{"10k", 5, 2 * time.Second},
	{"50k", 25, 3 * time.Second},
	{"200k", 100, 6 * time.Second},
	{"1M", 500, 30 * time.Second},
}

const scalePerHost = 2000

// scaleActivities are the shares of processes whose figures move per
// tick, in percent: the replay agents pick them at random each tick.
var scaleActivities = []int{100, 30, 10}

// BenchmarkCollectorScale is the ocb-built collector alone at cluster
// scale: the real discovery SQL against a real coordinator whose catalog
// lists hosts x 2000 backends, and agents that answer from pre-recorded
// replies (one process, this one, serves every host's endpoint at almost
// no CPU). 30 snapshots retained, emit_process_metrics off. Each size
// runs at each activity (activeN: N % of the processes move per tick,
// the rest answer exactly what they answered before). Reported per
// tick: the collector's own CPU (from /proc/<pid>/stat), its peak RSS
// (VmHWM, reset before the measured ticks of each activity; the peak
// since the collector started apart) per process, GetGPSessions p99
// measured while ticks run, the
// points handed to the processor (the collector's own
// otelcol_processor_incoming_items), and what decoding the agents'
// answers costs (timed here, on one served answer, with the collector's
// decoder), and the bytes the answers took on the wire, agents to
// collector, beside what full answers would have taken (the replay agents
// answer delta_client as the real agent does: only what moved; with
// GPOTEL_SCALE_FULL_ANSWERS=1 they ignore it, as yagpcc's agent does).
// The 1M size runs only with GPOTEL_SCALE_1M=1 (make bench-scale-1m).
func BenchmarkCollectorScale(b *testing.B) {
	benchCollectorScale(b, false)
}

// BenchmarkCollectorScaleEmitProcesses is the same with emit_process_metrics
// on: every process batch, and the processes carried unchanged one batch
// per host, go on to the otlp_grpc exporter.
func BenchmarkCollectorScaleEmitProcesses(b *testing.B) {
	benchCollectorScale(b, true)
}

func benchCollectorScale(b *testing.B, emit bool) {
	if testing.Short() {
		b.Skip("end-to-end")
	}
	for _, size := range scaleSizes {
		b.Run(size.name, func(b *testing.B) {
			if size.hosts*scalePerHost >= 1_000_000 && os.Getenv("GPOTEL_SCALE_1M") == "" {
				b.Skip("1M processes: set GPOTEL_SCALE_1M=1 (make bench-scale-1m)")
			}
			for _, act := range scaleActivities {
				b.Run(fmt.Sprintf("active%d", act), func(b *testing.B) {
					st := scaleStackFor(b, size.hosts, size.interval, emit)
					st.replay.activity.Store(int64(act))
					st.measure(b, b.N+1)
				})
			}
		})
	}
}

// scaleStack is one running cluster, replay agents and collector; the
// testing package calls a benchmark function twice (N=1, then N), so it is
// kept per size and stopped when the package's tests end.
type scaleStack struct {
	hosts     int
	processes int
	telemetry string // the collector's own metrics, Prometheus text
	collector *Process
	api       yagpcc.GetGPInfoClient
	replay    *replayAgents
}

var (
	scaleStacks   = map[string]*scaleStack{}
	scaleCleanups []func()
)

func stopScaleStacks() {
	for i := len(scaleCleanups) - 1; i >= 0; i-- {
		scaleCleanups[i]()
	}
}

func scaleStackFor(b *testing.B, hosts int, interval time.Duration, emit bool) *scaleStack {
	key := fmt.Sprintf("%d/%v", hosts, emit)
	if st := scaleStacks[key]; st != nil {
		return st
	}
	stopScaleStacks() // one stack at a time: each wants the whole machine
	scaleCleanups, scaleStacks = nil, map[string]*scaleStack{}
	st, err := startScaleStack(hosts, interval, emit)
	if err != nil {
		stopScaleStacks()
		b.Fatal(err)
	}
	scaleStacks[key] = st
	return st
}

func startScaleStack(hosts int, interval time.Duration, emit bool) (*scaleStack, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := cluster.Up(ctx, cluster.Options{Hosts: 1, SegmentsPerHost: 1, Dialect: dialect.GP6, Ephemeral: true})
	if err != nil {
		return nil, err
	}
	scaleCleanups = append(scaleCleanups, func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.Down(ctx)
	})
	pids := make([]int, scalePerHost)
	for i := range pids {
		pids[i] = 10_000 + i
	}
	coordPID := func(s int) int { return 900_000 + s }
	fixturePids := slices.Clone(pids)
	for s := 0; s < scaleSessions; s++ {
		fixturePids = append(fixturePids, coordPID(s))
	}
	root, err := os.MkdirTemp("", "gpotel-scale-proc-")
	if err != nil {
		return nil, err
	}
	scaleCleanups = append(scaleCleanups, func() { _ = os.RemoveAll(root) })
	if err := procfixture.Write(root, fixturePids, os.Getuid()); err != nil {
		return nil, err
	}
	if err := installScaleCatalog(ctx, c, hosts, pids, coordPID); err != nil {
		return nil, err
	}
	replay, err := startReplayAgents(root, pids, hosts)
	if err != nil {
		return nil, err
	}
	scaleCleanups = append(scaleCleanups, replay.Stop)

	dir, err := os.MkdirTemp("", "gpotel-scale-")
	if err != nil {
		return nil, err
	}
	scaleCleanups = append(scaleCleanups, func() { _ = os.RemoveAll(dir) })
	sink, err := StartOTLPSink("127.0.0.1:0", "", 0)
	if err != nil {
		return nil, err
	}
	scaleCleanups = append(scaleCleanups, func() { _ = sink.Stop() })
	apiPort, _ := freePort("127.0.0.1")
	healthPort, _ := freePort("127.0.0.1")
	telemetryPort, _ := freePort("127.0.0.1")
	api := net.JoinHostPort("127.0.0.1", strconv.Itoa(apiPort))
	// The collector pins its search_path unless the dsn names one: this one
	// puts the synthetic catalog first, as the scale role's own does.
	dsn := strings.Replace(c.CoordinatorDSN, cluster.AdminRole+"@", scaleRole+"@", 1) + "&search_path=" + scaleRole + ",pg_catalog"
	env := []string{
		"GPOTEL_COORDINATOR_DSN=" + dsn,
		"GPOTEL_AGENTS=" + agentsYAML(replay.endpoints),
		"GPOTEL_PG_OS_USER=" + strconv.Itoa(os.Getuid()),
		"GPOTEL_API_ENDPOINT=" + api,
		"GPOTEL_OTLP_ENDPOINT=" + sink.Addr(),
		"GPOTEL_HEALTH_ENDPOINT=127.0.0.1:" + strconv.Itoa(healthPort),
		"GPOTEL_TELEMETRY_PORT=" + strconv.Itoa(telemetryPort),
	}
	args := []string{
		"--config", configPath("testbed.yaml"),
		"--set=receivers::gpsession::local::proc_root=" + root,
		"--set=receivers::gpsession::collection_interval=" + interval.String(),
		// Deadlines beyond the interval: a slow tick shows in s/tick instead
		// of failing hosts (scrapes queue, never overlap).
		"--set=receivers::gpsession::timeout=" + (4 * interval).String(),
		"--set=receivers::gpsession::host_timeout=" + (3 * interval).String(),
		"--set=receivers::gpsession::topology_ttl=1h",
		"--set=processors::snapshotdiff::max_stored_points=30",
		"--set=processors::snapshotdiff::windows=[" + (10 * interval).String() + "," + (29 * interval).String() + "]",
		"--set=processors::snapshotdiff::emit_process_metrics=" + strconv.FormatBool(emit),
		// GPOTEL_SCALE_UNCHANGED=leave_out measures unchanged_processes: leave_out.
		"--set=processors::snapshotdiff::unchanged_processes=" + cmp.Or(os.Getenv("GPOTEL_SCALE_UNCHANGED"), "carry"),
		"--set=exporters::sessionstate::last_metrics_window=" + (10 * interval).String(),
		"--set=exporters::debug::verbosity=basic",
		"--set=service::telemetry::logs::level=warn",
	}
	// For profiling a run, e.g. the pprof extension:
	// GPOTEL_SCALE_COLLECTOR_ARGS='--set=extensions::pprof::endpoint=127.0.0.1:1777 --set=service::extensions=[health_check,pprof]'
	args = append(args, strings.Fields(os.Getenv("GPOTEL_SCALE_COLLECTOR_ARGS"))...)
	// GPOTEL_SCALE_LOG keeps the collector's log (with GODEBUG=gctrace=1, its GC trace).
	logPath := filepath.Join(dir, "collector.log")
	if p := os.Getenv("GPOTEL_SCALE_LOG"); p != "" {
		logPath = p
	}
	collector, err := StartProcess("collector", logPath, env, bins.Collector, args...)
	if err != nil {
		return nil, err
	}
	scaleCleanups = append(scaleCleanups, func() { _ = collector.Stop(30 * time.Second) })
	client, closeAPI, err := DialAPI(api)
	if err != nil {
		return nil, err
	}
	scaleCleanups = append(scaleCleanups, closeAPI)
	return &scaleStack{hosts: hosts, processes: hosts * scalePerHost, collector: collector, api: client, replay: replay,
		telemetry: "http://127.0.0.1:" + strconv.Itoa(telemetryPort) + "/metrics"}, nil
}

// newestSnapshot is the time of the newest complete snapshot the API serves.
func (st *scaleStack) newestSnapshot(ctx context.Context) (time.Time, error) {
	states, err := allSessions(ctx, st.api)
	if err != nil {
		return time.Time{}, err
	}
	var newest time.Time
	for _, s := range states {
		if t := s.GetTime().AsTime(); t.After(newest) && !s.GetLastMetrics().GetSystemStat().GetPartial() {
			newest = t
		}
	}
	if newest.IsZero() {
		return newest, errors.New("no session served yet")
	}
	return newest, nil
}

// measure waits for a first snapshot, then for ticks more, and reports what
// the collector cost per tick and GetGPSessions p99 while they ran.
func (st *scaleStack) measure(b *testing.B, ticks int) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	waitTick := func(after time.Time) time.Time {
		for {
			if exited, err := st.collector.Exited(); exited {
				b.Fatalf("collector exited (%v): %s", err, st.collector.LogTail(3000))
			}
			if ctx.Err() != nil {
				b.Fatalf("no snapshot after %v in time; collector log:\n%s", after, st.collector.LogTail(3000))
			}
			if t, err := st.newestSnapshot(ctx); err == nil && t.After(after) {
				return t
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// A tick more: the one under way may have begun before the activity changed.
	first := waitTick(waitTick(time.Time{}))
	var latencies []time.Duration
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // GetGPSessions while ticks run, as a client polling once a second would
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			began := time.Now()
			if _, err := st.api.GetGPSessions(ctx, &yagpcc.GetGPSessionsReq{}); err == nil {
				latencies = append(latencies, time.Since(began))
			}
		}
	}()
	// The peak is this activity's: the stack served the sizes' earlier
	// activities (and its first, full tick) before; that peak is reported
	// apart.
	sinceStart, err := peakRSS(st.collector.PID())
	if err != nil {
		b.Fatal(err)
	}
	if err := resetPeakRSS(st.collector.PID()); err != nil {
		b.Fatal(err)
	}
	before := UsageOf(st.collector.PID())
	pointsBefore := st.processorPoints(b)
	wireBefore, fullBefore := st.replay.wireBytes.Load(), st.replay.fullBytes.Load()
	b.ResetTimer()
	last := first
	for range ticks {
		last = waitTick(last)
	}
	b.StopTimer()
	after := UsageOf(st.collector.PID())
	pointsAfter := st.processorPoints(b)
	wire, full := st.replay.wireBytes.Load()-wireBefore, st.replay.fullBytes.Load()-fullBefore
	close(stop)
	<-done
	span := last.Sub(first)
	if span <= 0 {
		b.Fatal("no tick measured")
	}
	peak, err := peakRSS(st.collector.PID())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric((after.CPUSeconds-before.CPUSeconds)/float64(ticks), "collector-cpu-s/tick")
	b.ReportMetric(float64(peak)/float64(st.processes), "rss-bytes/process")
	// What the receiver keeps per process to tell which figures changed:
	// a bound on its share of rss-bytes/process.
	b.ReportMetric(float64(sparse.KeptBytesPerProcess), "sender-kept-bytes/process")
	b.ReportMetric(float64(ticks), "ticks")
	b.ReportMetric(span.Seconds()/float64(ticks), "s/tick")
	b.ReportMetric(float64(st.processes), "processes")
	b.ReportMetric(float64(peak)/(1<<20), "peak-rss-MiB")
	b.ReportMetric(float64(max(peak, sinceStart))/(1<<20), "peak-rss-since-start-MiB")
	if len(latencies) > 0 {
		slices.Sort(latencies)
		b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "GetGPSessions-p99-ms")
	}
	b.ReportMetric(st.replay.cpuShare(), "replay-agent-cpu-s")
	b.ReportMetric((pointsAfter-pointsBefore)/float64(ticks), "points/tick")
	// Bytes on the wire, agents to collector: what the answers took, and
	// their share of what full answers to the same requests would have.
	b.ReportMetric(float64(wire)/float64(ticks), "wire-bytes/tick")
	if full > 0 {
		b.ReportMetric(100*float64(wire)/float64(full), "wire-%-of-full")
	}
	b.ReportMetric(decodeSeconds(b, st.replay.lastAnswer())*float64(st.processes), "decode-s/tick")
	if st.replay.ranOut() {
		b.Fatal("a replay process ran out of recorded generations: raise replayGenerations")
	}
}

// processorPoints is the data points snapshotdiff has taken in so far.
func (st *scaleStack) processorPoints(b *testing.B) float64 {
	resp, err := http.Get(st.telemetry) // #nosec G107 -- the collector this benchmark started
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(line, "otelcol_processor_incoming_items") && strings.Contains(line, `processor="snapshotdiff"`) {
			if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
				sum += v
			}
		}
	}
	if sum == 0 {
		b.Fatalf("no otelcol_processor_incoming_items for snapshotdiff at %s", st.telemetry)
	}
	return sum
}

// decodeSeconds is what decoding an answer takes per process with the
// collector's decoder: the median of several rounds over one served answer.
func decodeSeconds(b *testing.B, answer []byte) float64 {
	if len(answer) == 0 {
		b.Fatal("no answer recorded")
	}
	var runs []time.Duration
	processes := 0
	for range 15 {
		began := time.Now()
		var resp yagpcc.GetPidProcInfoResponse
		if err := agentconn.Codec.Unmarshal(answer, &resp); err != nil {
			b.Fatal(err)
		}
		runs = append(runs, time.Since(began))
		processes = len(resp.GetPidProcData())
	}
	if processes == 0 {
		b.Fatal("the recorded answer holds no process")
	}
	slices.Sort(runs)
	return runs[len(runs)/2].Seconds() / float64(processes)
}

// peakRSS is a process's high-water resident memory (VmHWM).
func peakRSS(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc/<pid>/status")
}

// resetPeakRSS starts a process's VmHWM afresh (clear_refs 5, Linux 4.0).
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// root0 is the repository root for benchmarks (TestMain sets root).
func root0(b *testing.B) string {
	b.Helper()
	if root == "" {
		b.Fatal("repository root unknown")
	}
	return root
}
