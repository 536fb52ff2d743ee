package e2e

import (
	"context"
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
	fmt.Fprintf(&b, `
CREATE SCHEMA %[1]s;
CREATE TABLE %[1]s.pg_stat_activity AS SELECT * FROM %[2]s.pg_stat_activity WHERE false;
CREATE TABLE %[1]s.gp_segment_configuration (LIKE %[2]s.gp_segment_configuration);
CREATE TABLE %[1]s.dist_activity (gp_segment_id integer, pid integer, sess_id integer);
CREATE FUNCTION %[1]s.gp_dist_random(relation text) RETURNS SETOF %[1]s.dist_activity
  LANGUAGE sql STABLE AS $$ SELECT * FROM %[1]s.dist_activity $$;
CREATE ROLE %[1]s LOGIN SUPERUSER;
ALTER ROLE %[1]s SET search_path = %[1]s, %[2]s, pg_catalog, public;
INSERT INTO %[1]s.gp_segment_configuration (dbid, content, role, preferred_role, mode, status, port, hostname, address, datadir)
  SELECT h + 2, h, 'p', 'p', 'n', 'u', 6000 + h, 'sdw' || (h + 1), 'sdw' || (h + 1), '/data/gpseg' || h FROM generate_series(0, %[3]d - 1) h
  UNION ALL SELECT 1, -1, 'p', 'p', 'n', 'u', 5432, '%[4]s', '%[4]s', '/data/gpseg-1';
INSERT INTO %[1]s.dist_activity SELECT h, p, 1000 + (i %% %[5]d)
  FROM generate_series(0, %[3]d - 1) h, unnest($1::integer[]) WITH ORDINALITY AS u(p, i);
`, scaleRole, cluster.CompatSchema, hosts, cluster.CoordinatorHost, scaleSessions)
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

// BenchmarkTick is the end-to-end tick of the ocb-built collector over a
// synthetic cluster of N hosts x P backends: coordinator discovery over pgx,
// fan-out to N real gpotel-agent processes reading a fixture procfs, the
// one snapshotdiff processor feeding the sessionstate exporter and (through
// the forward connector) the batch/OTLP export pipeline, back to back
// (collection_interval shorter than a tick). Reported: the mean and worst gap
// between consecutive snapshots the API serves, and the collector's and the
// agents' CPU and memory while it runs.
func BenchmarkTick(b *testing.B) {
	if testing.Short() {
		b.Skip("end-to-end")
	}
	for _, size := range []struct{ hosts, pids int }{{10, 2000}, {100, 2000}} {
		b.Run(fmt.Sprintf("hosts=%d/pids=%d", size.hosts, size.pids), func(b *testing.B) {
			benchTick(b, size.hosts, size.pids)
		})
	}
}

func benchTick(b *testing.B, hosts, perHost int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := cluster.Start(b, cluster.Options{Hosts: 1, SegmentsPerHost: 1, Dialect: cluster.DialectGP6})
	pids := make([]int, perHost)
	for i := range pids {
		pids[i] = 10_000 + i
	}
	coordPID := func(s int) int { return 900_000 + s }
	fixturePids := slices.Clone(pids)
	for s := 0; s < scaleSessions; s++ {
		fixturePids = append(fixturePids, coordPID(s))
	}
	root := procfixture.TempRoot(b)
	if err := procfixture.Write(root, fixturePids, os.Getuid()); err != nil {
		b.Fatal(err)
	}
	if err := installScaleCatalog(ctx, c, hosts, pids, coordPID); err != nil {
		b.Fatal(err)
	}

	dir := b.TempDir()
	uid := strconv.Itoa(os.Getuid())
	agents := map[string]*Process{}
	endpoints := map[string]string{}
	b.Cleanup(func() {
		for _, p := range agents {
			_ = p.Stop(10 * time.Second)
		}
	})
	for h := 1; h <= hosts; h++ {
		host := fmt.Sprintf("sdw%d", h)
		p, endpoint, err := startAgent(host, "", "127.0.0.1", filepath.Join(dir, "agent-"+host+".log"), bins.Agent,
			"--hostname", host, "--proc-root", root, "--allowed-users", uid, "--log-level", "warn")
		if err != nil {
			b.Fatal(err)
		}
		agents[host], endpoints[host] = p, endpoint
	}

	sink, err := StartOTLPSink("127.0.0.1:0", "", 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sink.Stop() })
	apiPort, _ := freePort("127.0.0.1")
	healthPort, _ := freePort("127.0.0.1")
	telemetryPort, _ := freePort("127.0.0.1")
	api := net.JoinHostPort("127.0.0.1", strconv.Itoa(apiPort))
	dsn := strings.Replace(c.CoordinatorDSN, cluster.AdminRole+"@", scaleRole+"@", 1)
	env := []string{
		"GPOTEL_COORDINATOR_DSN=" + dsn,
		"GPOTEL_AGENTS=" + agentsYAML(endpoints),
		"GPOTEL_PG_OS_USER=" + uid,
		"GPOTEL_API_ENDPOINT=" + api,
		"GPOTEL_OTLP_ENDPOINT=" + sink.Addr(),
		"GPOTEL_HEALTH_ENDPOINT=127.0.0.1:" + strconv.Itoa(healthPort),
		"GPOTEL_TELEMETRY_PORT=" + strconv.Itoa(telemetryPort),
	}
	collector, err := StartProcess("collector", filepath.Join(dir, "collector.log"), env, bins.Collector,
		"--config", filepath.Join(root0(b), "config", "testbed.yaml"),
		"--set=receivers::gpsession::local::proc_root="+root,
		// Shorter than a tick: scrapes run back to back, so the snapshot gap is the tick.
		"--set=receivers::gpsession::collection_interval=500ms",
		"--set=receivers::gpsession::timeout=60s",
		"--set=receivers::gpsession::host_timeout=50s",
		"--set=receivers::gpsession::topology_ttl=10m",
		"--set=exporters::debug::verbosity=basic")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = collector.Stop(30 * time.Second) })

	client := dialAPIB(b, api)
	// Wait for the first complete snapshot, then time the next ones.
	var times []time.Time
	var delays []time.Duration // snapshot time to first served by the API
	var last *yagpcc.SessionState
	const ticks = 6
	deadline := time.Now().Add(5 * time.Minute)
	procBefore := map[string]Usage{}
	for len(times) < ticks+1 {
		if time.Now().After(deadline) {
			b.Fatalf("only %d snapshots in 5 minutes; collector log:\n%s", len(times), collector.LogTail(3000))
		}
		if exited, err := collector.Exited(); exited {
			b.Fatalf("collector exited (%v): %s", err, collector.LogTail(3000))
		}
		states, err := allSessions(ctx, client)
		if err == nil && len(states) > 0 {
			st := states[0]
			for _, s := range states {
				if s.GetTime().AsTime().After(st.GetTime().AsTime()) {
					st = s
				}
			}
			at := st.GetTime().AsTime()
			if n := len(times); (n == 0 || at.After(times[n-1])) && !st.GetLastMetrics().GetSystemStat().GetPartial() {
				if n == 0 {
					procBefore = Usages(collector, agents)
				}
				times, last = append(times, at), st
				delays = append(delays, time.Since(at))
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	procAfter := Usages(collector, agents)

	wantProcs := uint32(hosts*perHost/scaleSessions + 1)
	if sys := last.GetTotalMetrics().GetSystemStat(); sys.GetProcesses() != wantProcs || sys.GetHosts() != uint32(hosts+1) {
		b.Fatalf("a session spans %d processes on %d hosts, want %d on %d", sys.GetProcesses(), sys.GetHosts(), wantProcs, hosts+1)
	}
	var gaps []time.Duration
	for i := 1; i < len(times); i++ {
		gaps = append(gaps, times[i].Sub(times[i-1]))
	}
	mean := meanDuration(gaps)
	span := times[len(times)-1].Sub(times[0]).Seconds()
	b.ReportMetric(mean.Seconds(), "s/tick")
	b.ReportMetric(slices.Max(gaps).Seconds(), "s/tick-max")
	b.ReportMetric(float64(hosts*perHost), "processes/tick")
	b.ReportMetric(meanDuration(delays[1:]).Seconds(), "s/snapshot-to-api")
	if scrape, err := scrapeSeconds("http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(telemetryPort)) + "/metrics"); err == nil {
		b.ReportMetric(scrape, "s/scrape")
	} else {
		b.Logf("receiver scrape duration: %v", err)
	}
	col := procAfter["collector"].Minus(procBefore["collector"])
	b.ReportMetric(col.CPUSeconds/span*100, "collector-cpu-%")
	b.ReportMetric(float64(col.RSSBytes)/(1<<20), "collector-rss-MiB")
	var agentCPU float64
	var agentRSS uint64
	for name, u := range procAfter {
		if strings.HasPrefix(name, "agent") {
			agentCPU += u.Minus(procBefore[name]).CPUSeconds
			agentRSS = max(agentRSS, u.RSSBytes)
		}
	}
	b.ReportMetric(agentCPU/float64(hosts)/float64(len(gaps)), "agent-cpu-s/tick")
	b.ReportMetric(float64(agentRSS)/(1<<20), "agent-rss-max-MiB")
}

func dialAPIB(b *testing.B, addr string) yagpcc.GetGPInfoClient {
	b.Helper()
	client, closeFn, err := DialAPI(addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(closeFn)
	return client
}

// root0 is the repository root for benchmarks (TestMain sets root).
func root0(b *testing.B) string {
	b.Helper()
	if root == "" {
		b.Fatal("repository root unknown")
	}
	return root
}

func meanDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// scrapeSeconds is the receiver's mean scrape wall time (discovery to emitted
// snapshot) from the collector's own Prometheus metrics.
func scrapeSeconds(url string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var sum, count float64
	found := 0
	for _, line := range strings.Split(string(body), "\n") {
		name, rest, ok := strings.Cut(line, " ")
		if !ok || !strings.Contains(name, "gpsession_scrape_duration") {
			continue
		}
		fields := strings.Fields(rest)
		if strings.Contains(line, "}") {
			_, after, _ := strings.Cut(line, "} ")
			fields = strings.Fields(after)
			name, _, _ = strings.Cut(line, "{")
		}
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasSuffix(name, "_sum"):
			sum += v
			found++
		case strings.HasSuffix(name, "_count"):
			count += v
			found++
		}
	}
	if found < 2 || count == 0 {
		return 0, fmt.Errorf("no gpsession_scrape_duration histogram at %s", url)
	}
	return sum / count, nil
}
