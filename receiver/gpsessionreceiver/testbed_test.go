// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadata"
	"github.com/gpotel/gpotel/segmentagent"
	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/groundtruth"
	"github.com/gpotel/gpotel/testbed/workload"
)

// countingAgent serves the real agent service on one emulated host's
// loopback address and counts what it is asked.
type countingAgent struct {
	host    string
	service *segmentagent.Service
	server  *grpc.Server
	lis     net.Listener
	delay   time.Duration // added to every call so overlaps between hosts show

	calls    atomic.Int32
	maxBatch atomic.Int32
	inFlight *atomic.Int32 // shared by all agents of a test: hosts at once
	peak     *atomic.Int32
}

type countingService struct {
	yagpcc.UnimplementedGetQueryInfoServer
	a *countingAgent
}

func (s countingService) GetPidProcStat(ctx context.Context, req *yagpcc.GetPidProcInfoReq) (*yagpcc.GetPidProcInfoResponse, error) {
	a := s.a
	a.calls.Add(1)
	if n := int32(len(req.GetSegmentProcess())); n > a.maxBatch.Load() {
		a.maxBatch.Store(n)
	}
	n := a.inFlight.Add(1)
	defer a.inFlight.Add(-1)
	for p := a.peak.Load(); n > p; p = a.peak.Load() {
		if a.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if a.delay > 0 {
		time.Sleep(a.delay) // the agent's simulated latency, so that calls overlap; not a wait
	}
	return a.service.GetPidProcStat(ctx, req)
}

// startAgents runs one counting agent per emulated host, on its 127.0.0.x
// address. Each answers only for its own host's postmasters and their
// children (postmaster_pid_files): the emulated hosts share one kernel, and
// an agent answering for another host's backends would hide a receiver
// that asks the wrong host.
func startAgents(t *testing.T, c *cluster.Cluster) map[string]*countingAgent {
	t.Helper()
	var inFlight, peak atomic.Int32
	agents := map[string]*countingAgent{}
	for _, h := range c.Hosts {
		scfg := segmentagent.NewDefaultServiceConfig()
		for _, dir := range c.DataDirsOf(h.Name) {
			scfg.PostmasterPidFiles = append(scfg.PostmasterPidFiles, filepath.Join(dir, "postmaster.pid"))
		}
		svc, err := segmentagent.NewService(scfg, zap.NewNop(), nil)
		if err != nil {
			t.Fatalf("agent service of %s: %v", h.Name, err)
		}
		lis, err := net.Listen("tcp", net.JoinHostPort(h.AgentAddress, "0"))
		if err != nil {
			t.Fatalf("listen for %s: %v", h.Name, err)
		}
		a := &countingAgent{host: h.Name, service: svc, lis: lis, server: grpc.NewServer(), inFlight: &inFlight, peak: &peak}
		yagpcc.RegisterGetQueryInfoServer(a.server, countingService{a: a})
		go func() { _ = a.server.Serve(lis) }()
		t.Cleanup(a.server.Stop)
		agents[h.Name] = a
	}
	return agents
}

func agentEndpoints(agents map[string]*countingAgent) map[string]string {
	m := map[string]string{}
	for h, a := range agents {
		m[h] = a.lis.Addr().String()
	}
	return m
}

func testbedConfig(c *cluster.Cluster) *Config {
	cfg := createDefaultConfig()
	cfg.DSN = configopaque.String(c.CoordinatorDSN)
	cfg.HostTimeout = 3 * time.Second
	cfg.ReconnectBackoff = 10 * time.Millisecond
	cfg.ReconnectBackoffMax = 50 * time.Millisecond
	return cfg
}

func startScraper(t *testing.T, cfg *Config) *sessionScraper {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	set := receivertest.NewNopSettings(metadata.Type)
	s, err := newSessionScraper(cfg, set, newPGSource(cfg), new(consumertest.MetricsSink))
	if err != nil {
		t.Fatal(err)
	}
	s.newLocal = localReaderFactory(cfg, set)
	if err := s.start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.shutdown(context.Background()) })
	return s
}

// scrapeOnce runs one scrape bounded by the receiver's own timeout.
func scrapeOnce(t *testing.T, s *sessionScraper) (pmetric.Metrics, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	return scrapeJoined(ctx, s)
}

// scrapeBeforeDeadline runs one scrape under a context that outlives every
// timeout of the receiver; whether that context ran out tells a scrape that
// host_timeout bounded from one that hung.
func scrapeBeforeDeadline(t *testing.T, s *sessionScraper) (md pmetric.Metrics, hung bool, err error) {
	t.Helper()
	ctx := await.Context(t)
	md, err = scrapeJoined(ctx, s)
	return md, ctx.Err() != nil, err
}

// processKey is what the tests compare a backend by.
type processKey struct {
	host    string
	segment int64
	session int64
	pid     int64
}

// processesIn lists the processes of the process resources by their
// gpotel.process.info points.
func processesIn(md pmetric.Metrics) map[int64]processKey {
	out := map[int64]processKey{}
	for _, rm := range resourcesOfKind(md, pipeline.KindProcess) {
		a := rm.Resource().Attributes()
		host, _ := a.Get(pipeline.AttrHostName)
		session, _ := a.Get(pipeline.AttrSessionID)
		info, ok := metricNamed(rm, pipeline.MetricProcessInfo)
		if !ok {
			continue
		}
		for i := 0; i < info.Gauge().DataPoints().Len(); i++ {
			pa := info.Gauge().DataPoints().At(i).Attributes()
			pid, _ := pa.Get(pipeline.AttrProcessPID)
			seg, _ := pa.Get(pipeline.AttrSegmentID)
			out[pid.Int()] = processKey{host.Str(), seg.Int(), session.Int(), pid.Int()}
		}
	}
	return out
}

func hostUp(md pmetric.Metrics) map[string]int64 { return hostGauge(md, pipeline.MetricHostUp) }

// hostGauge reads a per-host gauge of the snapshot resource.
func hostGauge(md pmetric.Metrics, name string) map[string]int64 {
	out := map[string]int64{}
	for _, rm := range resourcesOfKind(md, pipeline.KindSnapshot) {
		m, ok := metricNamed(rm, name)
		if !ok {
			continue
		}
		for i := 0; i < m.Gauge().DataPoints().Len(); i++ {
			dp := m.Gauge().DataPoints().At(i)
			h, _ := dp.Attributes().Get(pipeline.AttrHostName)
			out[h.Str()] = dp.IntValue()
		}
	}
	return out
}

// checkHostCPUs: every host asked reports this machine's online CPUs
// (the testbed's hosts share it), counted apart from the agent's path.
func checkHostCPUs(t *testing.T, md pmetric.Metrics, hosts map[string]int64) {
	t.Helper()
	online, err := groundtruth.OnlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	cpus := hostGauge(md, pipeline.MetricHostCPUs)
	for h := range hosts {
		if cpus[h] != int64(online) {
			t.Errorf("host %s: gpotel.host.cpus %d, want %d (/proc/stat's cpuN lines)", h, cpus[h], online)
		}
	}
	t.Logf("gpotel.host.cpus %v; this machine has %d online", cpus, online)
}

func tmIDOf(t *testing.T, md pmetric.Metrics) int64 {
	t.Helper()
	snaps := resourcesOfKind(md, pipeline.KindSnapshot)
	if len(snaps) != 1 {
		t.Fatalf("%d snapshot resources", len(snaps))
	}
	v, _ := snaps[0].Resource().Attributes().Get(pipeline.AttrTmID)
	return v.Int()
}

// instanceBackends lists each instance's own pg_stat_activity (the testbed's
// compat view with sess_id), keyed by pid, as the database itself sees it.
func instanceBackends(t *testing.T, c *cluster.Cluster) map[int64]processKey {
	t.Helper()
	ctx := await.Context(t)
	out := map[int64]processKey{}
	for _, in := range c.Instances() {
		conn, err := pgx.Connect(ctx, in.DSN)
		if err != nil {
			t.Fatalf("connect gpseg%d: %v", in.Content, err)
		}
		sessExpr := "sess_id"
		if c.Dialect == dialect.PostgreSQL {
			sessExpr = "coalesce(leader_pid, pid)"
		}
		rows, err := conn.Query(ctx, fmt.Sprintf("SELECT pid::bigint, coalesce(%s, 0)::bigint FROM pg_stat_activity WHERE pid <> pg_backend_pid()", sessExpr))
		if err != nil {
			t.Fatalf("gpseg%d pg_stat_activity: %v", in.Content, err)
		}
		var pid, sess int64
		_, err = pgx.ForEachRow(rows, []any{&pid, &sess}, func() error {
			out[pid] = processKey{c.HostOf(in.Content), int64(in.Content), sess, pid}
			return nil
		})
		_ = conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func startSession(t *testing.T, c *cluster.Cluster) *workload.Session {
	t.Helper()
	s, err := workload.Start(context.Background(), c, workload.Spec{Name: "idle", Kind: workload.IdleInTransaction, Duration: 2 * time.Minute})
	if err != nil {
		t.Fatalf("workload: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// checkEveryBackendFound is the core rule: every backend the instances
// report both before and after the scrape is in the snapshot, on its
// segment's host, with its session; nothing routes to a mirror or down row.
func checkEveryBackendFound(t *testing.T, c *cluster.Cluster, s *sessionScraper, w *workload.Session) pmetric.Metrics {
	t.Helper()
	before := instanceBackends(t, c)
	md, err := scrapeOnce(t, s)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	after := instanceBackends(t, c)
	got := processesIn(md)
	stable := 0
	for pid, want := range before {
		if _, still := after[pid]; !still {
			continue // a connection that came and went around the scrape
		}
		stable++
		if g, ok := got[pid]; !ok {
			t.Errorf("backend %+v missing from the snapshot", want)
		} else if g != want {
			t.Errorf("backend pid %d: snapshot says %+v, the database %+v", pid, g, want)
		}
	}
	if stable == 0 {
		t.Fatal("no stable backend to compare with")
	}
	for content, pids := range w.Pids() {
		for _, pid := range pids {
			g, ok := got[int64(pid)]
			if !ok || g.segment != int64(content) || g.session != int64(w.SessID()) || g.host != c.HostOf(content) {
				t.Errorf("workload backend pid %d of content %d: got %+v (ok=%v), want session %d on %s", pid, content, g, ok, w.SessID(), c.HostOf(content))
			}
		}
	}
	for _, g := range got {
		if want := c.HostOf(int(g.segment)); g.host != want {
			t.Errorf("process %+v routed to %s, its segment lives on %s", g, g.host, want)
		}
	}
	for _, row := range c.CatalogOnly {
		if _, asked := hostUp(md)[row.Hostname]; asked {
			t.Errorf("the %s row's host %s was asked", row.Role, row.Hostname)
		}
		if _, connected := s.dir.readers[row.Hostname]; connected {
			t.Errorf("a connection to %s exists", row.Hostname)
		}
	}
	sessions := map[int64]bool{}
	for _, rm := range resourcesOfKind(md, pipeline.KindSession) {
		id, _ := rm.Resource().Attributes().Get(pipeline.AttrSessionID)
		sessions[id.Int()] = true
	}
	if !sessions[int64(w.SessID())] {
		t.Errorf("session %d has no session resource", w.SessID())
	}
	t.Logf("%d stable backends compared, %d processes, %d sessions in the snapshot", stable, len(got), len(sessions))
	return md
}

func TestGreenplum6EveryBackendFound(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testbed")
	}
	c := cluster.Start(t, cluster.Options{Hosts: 2, SegmentsPerHost: 1, Dialect: dialect.GP6})
	agents := startAgents(t, c)
	w := startSession(t, c)
	cfg := testbedConfig(c)
	cfg.Agents = agentEndpoints(agents)
	s := startScraper(t, cfg)
	md := checkEveryBackendFound(t, c, s, w)
	if d, _ := resourcesOfKind(md, pipeline.KindSnapshot)[0].Resource().Attributes().Get(pipeline.AttrDialect); d.Str() != string(dialect.GP6) {
		t.Errorf("dialect %q", d.Str())
	}
	checkHostCPUs(t, md, hostUp(md))
	// The pool keeps its connection: the server sees it as gpotel's.
	conn, err := pgx.Connect(context.Background(), c.CoordinatorDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var n int
	if err := conn.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE application_name = 'gpotel'").Scan(&n); err != nil || n == 0 {
		t.Errorf("no coordinator connection with application_name gpotel (%d, %v)", n, err)
	}
}

// TestCloudberryEveryBackendFound: Cloudberry is told apart by version() alone
// and read with the GP7 column set.
func TestCloudberryEveryBackendFound(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testbed")
	}
	c := cluster.Start(t, cluster.Options{Hosts: 1, SegmentsPerHost: 2, Dialect: dialect.Cloudberry})
	agents := startAgents(t, c)
	w := startSession(t, c)
	cfg := testbedConfig(c)
	cfg.Agents = agentEndpoints(agents)
	md := checkEveryBackendFound(t, c, startScraper(t, cfg), w)
	if d, _ := resourcesOfKind(md, pipeline.KindSnapshot)[0].Resource().Attributes().Get(pipeline.AttrDialect); d.Str() != string(dialect.Cloudberry) {
		t.Errorf("dialect %q, want %q", d.Str(), dialect.Cloudberry)
	}
}

func TestPostgreSQLLocalReadEveryBackendFound(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testbed")
	}
	c := cluster.Start(t, cluster.Options{Dialect: dialect.PostgreSQL})
	w := startSession(t, c)
	cfg := testbedConfig(c)
	cfg.CoordinatorHostName = cluster.CoordinatorHost
	cfg.LocalHosts = []string{cluster.CoordinatorHost}
	s := startScraper(t, cfg)
	md := checkEveryBackendFound(t, c, s, w)
	if n := s.dir.agents.Len(); n != 0 {
		t.Errorf("a single-node PostgreSQL opened %d gRPC connections", n)
	}
	if up := hostUp(md); len(up) != 1 || up[cluster.CoordinatorHost] != 1 {
		t.Errorf("host.up %v", up)
	}
	checkHostCPUs(t, md, hostUp(md))

	t.Run("the receiver delivers each snapshot as process batches and one closing batch", func(t *testing.T) {
		rcfg := *cfg
		// Timeouts beyond the interval: scrapes queue behind each other, never overlap.
		rcfg.CollectionInterval = 100 * time.Millisecond
		rcfg.Timeout = 10 * time.Second
		rcfg.HostTimeout = 5 * time.Second
		rcfg.InitialDelay = 0
		sink := new(consumertest.MetricsSink)
		rcv, err := NewFactory().CreateMetrics(context.Background(), receivertest.NewNopSettings(metadata.Type), &rcfg, sink)
		if err != nil {
			t.Fatal(err)
		}
		if err := rcv.Start(context.Background(), componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
		await.Until(t, "six batches from the running receiver", func() bool { return len(sink.AllMetrics()) >= 6 })
		if err := rcv.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		all := sink.AllMetrics()
		// Rule 1: each snapshot is process batches, then one closing batch
		// with the snapshot resource; one timestamp per snapshot (an endings
		// resource's points carry each record's or exit's own time, by its
		// contract); snapshots never interleave.
		var open pcommon.Timestamp
		closed := 0
		for i, md := range all {
			var ts pcommon.Timestamp
			mixed := false
			forEachPoint(withoutEndings(md), func(dp pmetric.NumberDataPoint) {
				if ts == 0 {
					ts = dp.Timestamp()
				}
				mixed = mixed || dp.Timestamp() != ts
			})
			if ts == 0 || mixed {
				t.Fatalf("batch %d has no single timestamp", i)
			}
			if open != 0 && ts != open {
				t.Errorf("batch %d at %v while the snapshot at %v is open", i, ts, open)
			}
			snaps, procs := len(resourcesOfKind(md, pipeline.KindSnapshot)), len(resourcesOfKind(md, pipeline.KindProcess))
			headers := len(resourcesOfKind(md, pipeline.KindBatch))
			switch {
			case snaps == 1:
				open = 0
				closed++
			case snaps == 0 && headers == 1 && procs+headers == md.ResourceMetrics().Len():
				open = ts
			default:
				t.Errorf("batch %d: %d snapshot and %d process resources of %d", i, snaps, procs, md.ResourceMetrics().Len())
			}
		}
		if closed < 2 {
			t.Errorf("%d snapshots closed in %d batches", closed, len(all))
		}
	})
}

// withoutEndings is md without its endings resources.
func withoutEndings(md pmetric.Metrics) pmetric.Metrics {
	out := pmetric.NewMetrics()
	md.CopyTo(out)
	out.ResourceMetrics().RemoveIf(func(rm pmetric.ResourceMetrics) bool {
		kind, _ := rm.Resource().Attributes().Get(pipeline.AttrResourceKind)
		return kind.Str() == pipeline.KindEndings.String()
	})
	return out
}

func forEachPoint(md pmetric.Metrics, f func(pmetric.NumberDataPoint)) {
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		sms := md.ResourceMetrics().At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				var dps pmetric.NumberDataPointSlice
				if ms.At(k).Type() == pmetric.MetricTypeSum {
					dps = ms.At(k).Sum().DataPoints()
				} else {
					dps = ms.At(k).Gauge().DataPoints()
				}
				for l := 0; l < dps.Len(); l++ {
					f(dps.At(l))
				}
			}
		}
	}
}

// TestGreenplum7 runs the fault rules on one gp7 testbed, in order: the
// coordinator restart comes last because it ends the workload's sessions.
func TestGreenplum7(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testbed")
	}
	c := cluster.Start(t, cluster.Options{Hosts: 2, SegmentsPerHost: 2, Dialect: dialect.GP7})
	agents := startAgents(t, c)
	w := startSession(t, c)
	cfg := testbedConfig(c)
	cfg.Agents = agentEndpoints(agents)

	t.Run("every backend found", func(t *testing.T) {
		checkEveryBackendFound(t, c, startScraper(t, cfg), w)
	})

	t.Run("hosts called in parallel in batches of max_pids_per_call", func(t *testing.T) {
		bcfg := *cfg
		bcfg.MaxPidsPerCall = 2
		for _, a := range agents {
			a.calls.Store(0)
			a.maxBatch.Store(0)
			a.delay = 30 * time.Millisecond
			a.peak.Store(0)
		}
		defer func() {
			for _, a := range agents {
				a.delay = 0
			}
		}()
		s := startScraper(t, &bcfg)
		md, err := scrapeOnce(t, s)
		if err != nil {
			t.Fatal(err)
		}
		asked := hostGauge(md, pipeline.MetricHostProcesses)
		for name, a := range agents {
			wantCalls := int((asked[name] + 1) / 2)
			if int(a.calls.Load()) != wantCalls || a.maxBatch.Load() > 2 {
				t.Errorf("%s: %d calls (max batch %d) for %d pids, want %d calls of at most 2", name, a.calls.Load(), a.maxBatch.Load(), asked[name], wantCalls)
			}
		}
		if peak := agents["mdw"].peak.Load(); peak < 2 {
			t.Errorf("at most %d host was served at a time; hosts were not asked in parallel", peak)
		}
	})

	t.Run("a killed agent gives a partial snapshot on time", func(t *testing.T) {
		// Every answered process in the second snapshot, changed or not.
		kcfg := *cfg
		kcfg.SendUnchangedProcesses = true
		s := startScraper(t, &kcfg)
		if _, err := scrapeOnce(t, s); err != nil {
			t.Fatalf("first scrape: %v", err)
		}
		agents["sdw2"].server.Stop()
		md, hung, err := scrapeBeforeDeadline(t, s)
		if err == nil {
			t.Fatal("a scrape with a dead host reported no error")
		}
		if hung {
			t.Fatal("a dead host held the scrape until the test's deadline")
		}
		up := hostUp(md)
		if up["sdw2"] != 0 || up["sdw1"] != 1 || up["mdw"] != 1 {
			t.Errorf("host.up %v", up)
		}
		hosts := map[string]int{}
		for _, p := range processesIn(md) {
			hosts[p.host]++
		}
		if hosts["sdw1"] == 0 || hosts["mdw"] == 0 || hosts["sdw2"] != 0 {
			t.Errorf("processes per host %v", hosts)
		}
	})

	t.Run("a hung agent is bounded by host_timeout", func(t *testing.T) {
		hungAgent := hungListener(t, c.Hosts[1].AgentAddress)
		hcfg := *cfg
		hcfg.HostTimeout = 500 * time.Millisecond
		hcfg.Agents = map[string]string{}
		for h, ep := range cfg.Agents {
			hcfg.Agents[h] = ep
		}
		hcfg.Agents["sdw1"] = hungAgent
		s := startScraper(t, &hcfg)
		md, hung, err := scrapeBeforeDeadline(t, s)
		if err == nil {
			t.Fatal("no error for a hung host")
		}
		if hung {
			t.Fatal("a hung host held the scrape until the test's deadline: host_timeout did not bound it")
		}
		if up := hostUp(md); up["sdw1"] != 0 || up["mdw"] != 1 {
			t.Errorf("host.up %v", up)
		}
	})

	t.Run("a restarted coordinator is picked up", func(t *testing.T) {
		s := startScraper(t, cfg)
		md, _ := scrapeOnce(t, s)
		before := tmIDOf(t, md)
		if err := c.RestartCoordinator(await.Context(t)); err != nil {
			t.Fatal(err)
		}
		var after int64
		await.Until(t, "a snapshot from the restarted coordinator", func() bool {
			md, err := scrapeOnce(t, s)
			if err == nil || md.ResourceMetrics().Len() > 0 {
				after = tmIDOf(t, md)
			}
			return after != 0
		})
		if after == before {
			t.Fatalf("tm_id before %d, after restart %d", before, after)
		}
	})
}

// hungListener accepts connections on addr and never answers.
func hungListener(t *testing.T, addr string) string {
	t.Helper()
	lis, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return lis.Addr().String()
}

func TestDatabaseDownAtStartThenUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testbed")
	}
	c := cluster.Start(t, cluster.Options{Dialect: dialect.PostgreSQL})
	// A port where nothing listens yet; later a proxy to the coordinator opens there.
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := probe.Addr().String()
	_ = probe.Close()
	host, port, _ := net.SplitHostPort(addr)

	cfg := testbedConfig(c)
	cfg.DSN = configopaque.String(fmt.Sprintf("host=%s port=%s user=%s dbname=%s", host, port, cluster.AdminRole, cluster.Database))
	cfg.CoordinatorHostName = cluster.CoordinatorHost
	cfg.LocalHosts = []string{cluster.CoordinatorHost}
	s := startScraper(t, cfg) // Start must not need the database

	md, err := scrapeOnce(t, s)
	if err == nil || md.ResourceMetrics().Len() != 0 {
		t.Fatalf("scrape with the database down: err %v, %d resources", err, md.ResourceMetrics().Len())
	}
	t.Logf("database down: %v", err)

	proxyTo(t, addr, fmt.Sprintf("127.0.0.1:%d", c.Coordinator.Port))
	await.NoError(t, "a snapshot once the database came up", func() error {
		md, err := scrapeOnce(t, s)
		if err != nil {
			return err
		}
		if n := len(resourcesOfKind(md, pipeline.KindSnapshot)); n != 1 {
			return fmt.Errorf("%d snapshot resources", n)
		}
		return nil
	})
}

// proxyTo forwards TCP connections from listen to target until the test ends.
func proxyTo(t *testing.T, listen, target string) {
	t.Helper()
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	go func() {
		for {
			in, err := lis.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
			go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
		}
	}()
}
