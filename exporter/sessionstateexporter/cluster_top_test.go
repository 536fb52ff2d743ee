// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"math"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/clustertop"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// topPipeline is the real snapshotdiff processor (with per-host session
// figures) in front of an exporter on a loopback port, and a ClusterTop
// client of that server.
func topPipeline(t *testing.T) (processor.Metrics, gpotelv1.ClusterTopClient) {
	t.Helper()
	srv := startDefault(t)
	factory := snapshotdiffprocessor.NewFactory()
	cfg := factory.CreateDefaultConfig().(*snapshotdiffprocessor.Config)
	cfg.EmitSessionHostFigures = true
	proc, err := factory.CreateMetrics(context.Background(), processortest.NewNopSettings(factory.Type()), cfg, srv.exp)
	if err != nil {
		t.Fatal(err)
	}
	return proc, gpotelv1.NewClusterTopClient(srv.conn)
}

// threeSessions, over one minute: session 11 burns a core spread evenly
// over segments 0 (sdw1) and 1 (sdw2); 12 burns 0.6 cores on segment 1 and
// 0.001 on segment 0 and reads 1 MB/s; 13 burns 0.01 cores on segment 0 only
// and writes 2 MB/s.
func threeSessions(minute float64) []receiverProcess {
	born := t0.Add(-time.Hour)
	s := 60 * minute
	p := func(sess int64, host string, seg, pid int64, cpu float64, read, write int64, rss int64) receiverProcess {
		return receiverProcess{session: sess, host: host, segment: seg, pid: pid, created: born, cpuUser: cpu * s, readBytes: read * int64(s), writeBytes: write * int64(s), rss: rss}
	}
	return []receiverProcess{
		p(11, testCoordinator, -1, 1100, 0, 0, 0, 10<<20),
		p(11, "sdw1", 0, 1101, 0.5, 0, 0, 50<<20),
		p(11, "sdw2", 1, 1102, 0.5, 0, 0, 50<<20),
		p(12, testCoordinator, -1, 1200, 0, 0, 0, 10<<20),
		p(12, "sdw1", 0, 1201, 0.001, 0, 0, 20<<20),
		p(12, "sdw2", 1, 1202, 0.6, 1e6, 0, 20<<20),
		p(13, testCoordinator, -1, 1300, 0, 0, 0, 10<<20),
		p(13, "sdw1", 0, 1301, 0.01, 0, 2e6, 150<<20),
		p(13, "sdw2", 1, 1302, 0, 0, 0, 150<<20),
	}
}

func feedThreeSessions(t *testing.T, proc processor.Metrics) {
	t.Helper()
	for i := range 2 {
		s := receiverScrape(t0.Add(time.Duration(i)*time.Minute), []int64{11, 12, 13}, threeSessions(float64(i)))
		if i == 1 {
			s.Readings = append(s.Readings, hostPressure("sdw1", 0.25))
		}
		if err := proc.ConsumeMetrics(context.Background(), s.Metrics()); err != nil {
			t.Fatal(err)
		}
	}
}

// hostPressure is a host whose cpu "some avg10" is share.
func hostPressure(host string, share float64) snapshot.HostReading {
	return snapshot.HostReading{Host: host, Pressure: &gpotelv1.Pressure{
		Cpu: &gpotelv1.ResourcePressure{Some: &gpotelv1.PressureStall{Avg10: share * 100}}}}
}

func sessionIDs(resp *gpotelv1.GetClusterTopResponse) []int64 {
	var ids []int64
	for _, s := range resp.GetSessions() {
		ids = append(ids, s.GetSessId())
	}
	return ids
}

func TestClusterTopRanksSessionsByTheChosenKey(t *testing.T) {
	proc, client := topPipeline(t)
	feedThreeSessions(t, proc)
	for key, want := range map[gpotelv1.TopKey][]int64{
		gpotelv1.TopKey_TOP_KEY_UNSPECIFIED:  {11, 12, 13},
		gpotelv1.TopKey_TOP_KEY_CPU:          {11, 12, 13},
		gpotelv1.TopKey_TOP_KEY_CPU_SMOOTHED: {11, 12, 13},
		gpotelv1.TopKey_TOP_KEY_READ:         {12, 11, 13}, // ties in session order
		gpotelv1.TopKey_TOP_KEY_WRITE:        {13, 11, 12},
		gpotelv1.TopKey_TOP_KEY_MEMORY:       {13, 11, 12},
		// 13 is as skewed as 12 but uses next to nothing: it ranks as 0.
		gpotelv1.TopKey_TOP_KEY_SKEW: {12, 11, 13},
	} {
		resp, err := client.GetClusterTop(ctxTimeout(t), &gpotelv1.GetClusterTopRequest{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		if got := sessionIDs(resp); !equalIDs(got, want) {
			t.Errorf("%s: sessions %v, want %v", key, got, want)
		}
	}
}

func equalIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestClusterTopSessionLineCarriesRatesSkewAndHosts(t *testing.T) {
	proc, client := topPipeline(t)
	feedThreeSessions(t, proc)
	resp, err := client.GetClusterTop(ctxTimeout(t), &gpotelv1.GetClusterTopRequest{Key: gpotelv1.TopKey_TOP_KEY_SKEW, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetSessions()) != 1 {
		t.Fatalf("limit 1 gave %d sessions", len(resp.GetSessions()))
	}
	s := resp.GetSessions()[0]
	u := s.GetUsage()
	if s.GetSessId() != 12 || !near(u.GetCpuCores(), 0.601) || !near(u.GetReadBytesPerSecond(), 1e6) || u.GetProcesses() != 3 || u.GetRssBytes() != 50<<20 {
		t.Errorf("session line %v, want session 12 at 0.601 cores, 1 MB/s read, 3 processes, 50 MiB", s)
	}
	if !near(s.GetCpuSkew(), 1-0.601/2/0.6) || s.GetCpuHottestSegment() != 1 || s.CpuHottestSegment == nil || s.GetQuery() != "select 12" || s.GetUser() != "alice" {
		t.Errorf("skew %.3f hottest %v query %q user %q; want 0.499, segment 1, select 12, alice", s.GetCpuSkew(), s.CpuHottestSegment, s.GetQuery(), s.GetUser())
	}
	// The smoothed CPU at 1m after one minute of 0.601 cores: 0.601 (1 - e^-1).
	if want := 0.601 * (1 - math.Exp(-1)); !near(s.GetCpuCoresSmoothed(), want) {
		t.Errorf("smoothed cpu %.4f, want %.4f", s.GetCpuCoresSmoothed(), want)
	}
	want := []struct {
		host  string
		cores float64
		procs uint32
	}{{testCoordinator, 0, 1}, {"sdw1", 0.001, 1}, {"sdw2", 0.6, 1}}
	if len(s.GetHosts()) != len(want) {
		t.Fatalf("hosts %v, want %d lines", s.GetHosts(), len(want))
	}
	for i, w := range want {
		h := s.GetHosts()[i]
		if h.GetHostname() != w.host || !near(h.GetUsage().GetCpuCores(), w.cores) || h.GetUsage().GetProcesses() != w.procs {
			t.Errorf("host line %d: %v, want %s at %.1f cores, %d process", i, h, w.host, w.cores, w.procs)
		}
	}
}

func TestClusterTopTotalsAreTheHostsSum(t *testing.T) {
	proc, client := topPipeline(t)
	feedThreeSessions(t, proc)
	resp, err := client.GetClusterTop(ctxTimeout(t), &gpotelv1.GetClusterTopRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetTimeConstantSeconds() != 60 || resp.GetWindowSeconds() != 300 || resp.GetSnapshotTimeUnixNano() != t0.Add(time.Minute).UnixNano() {
		t.Errorf("time constant %v, window %v, time %v; want 60, 300, %v", resp.GetTimeConstantSeconds(), resp.GetWindowSeconds(), resp.GetSnapshotTimeUnixNano(), t0.Add(time.Minute))
	}
	keep := 1 - math.Exp(-1) // one minute at the 1m time constant
	want := map[string]float64{testCoordinator: 0, "sdw1": 0.511 * keep, "sdw2": 1.1 * keep}
	var sum float64
	for _, h := range resp.GetHosts() {
		if !h.GetUp() || !near(h.GetUsage().GetCpuCores(), want[h.GetHostname()]) || h.GetUsage().GetProcesses() != 3 {
			t.Errorf("host %v: want up, %.4f cores, 3 processes", h, want[h.GetHostname()])
		}
		sum += h.GetUsage().GetCpuCores()
	}
	if len(resp.GetHosts()) != 3 || resp.GetHosts()[0].GetHostname() != testCoordinator || resp.GetHosts()[2].GetHostname() != "sdw2" {
		t.Errorf("hosts %v, want mdw, sdw1, sdw2 in name order", resp.GetHosts())
	}
	c := resp.GetCluster()
	if !near(c.GetUsage().GetCpuCores(), sum) || c.GetHosts() != 3 || c.GetHostsUp() != 3 || c.GetSessions() != 3 || c.GetUsage().GetProcesses() != 9 {
		t.Errorf("cluster %v, want %.4f cores over 3 hosts up, 3 sessions, 9 processes", c, sum)
	}
	if p := resp.GetHosts()[1].GetPressure(); p == nil || p.GetCpu() != 0.25 {
		t.Errorf("sdw1 pressure %v, want cpu 0.25", p)
	}
	if p := resp.GetHosts()[2].GetPressure(); p != nil {
		t.Errorf("sdw2 reports no pressure, got %v", p)
	}
}

// Each host's CPUs, as its agent reported them to the receiver, come out of
// the real processor into HostTop.cpus; the cluster's are their sum, and
// absent (never a partial sum, never 0) once a host does not report its own.
func TestClusterTopReportsEachHostsCPUs(t *testing.T) {
	proc, client := topPipeline(t)
	cpus := map[string]uint32{testCoordinator: 4, "sdw1": 16, "sdw2": 16}
	for i := range 2 {
		s := receiverScrape(t0.Add(time.Duration(i)*time.Minute), []int64{11, 12, 13}, threeSessions(float64(i)))
		for j := range s.Hosts {
			s.Hosts[j].CPUs = cpus[s.Hosts[j].Name]
		}
		if err := proc.ConsumeMetrics(context.Background(), s.Metrics()); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := client.GetClusterTop(ctxTimeout(t), &gpotelv1.GetClusterTopRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range resp.GetHosts() {
		if h.Cpus == nil || h.GetCpus() != cpus[h.GetHostname()] {
			t.Errorf("host %s: cpus %v, want %d", h.GetHostname(), h.Cpus, cpus[h.GetHostname()])
		}
	}
	if c := resp.GetCluster(); c.Cpus == nil || c.GetCpus() != 36 {
		t.Errorf("cluster cpus %v, want 36", c.Cpus)
	}

	delete(cpus, "sdw2") // an agent older than the field
	s := receiverScrape(t0.Add(2*time.Minute), []int64{11, 12, 13}, threeSessions(2))
	for j := range s.Hosts {
		s.Hosts[j].CPUs = cpus[s.Hosts[j].Name]
	}
	if err := proc.ConsumeMetrics(context.Background(), s.Metrics()); err != nil {
		t.Fatal(err)
	}
	if resp, err = client.GetClusterTop(ctxTimeout(t), &gpotelv1.GetClusterTopRequest{}); err != nil {
		t.Fatal(err)
	}
	for _, h := range resp.GetHosts() {
		if h.GetHostname() == "sdw2" && h.Cpus != nil {
			t.Errorf("sdw2 reports no CPUs, yet cpus %d", h.GetCpus())
		}
	}
	if c := resp.GetCluster(); c.Cpus != nil {
		t.Errorf("a host without its CPUs, yet the cluster's are %d", c.GetCpus())
	}
}

func TestClusterTopLimitIsCapped(t *testing.T) {
	proc, client := topPipeline(t)
	ids := make([]int64, 150)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	for i := range 2 {
		if err := proc.ConsumeMetrics(context.Background(), receiverSnapshotOf(t0.Add(time.Duration(i)*time.Minute), ids, nil)); err != nil {
			t.Fatal(err)
		}
	}
	for limit, want := range map[uint32]int{0: clustertop.DefaultSessions, 5: 5, 1000: clustertop.MaxSessions} {
		resp, err := client.GetClusterTop(ctxTimeout(t), &gpotelv1.GetClusterTopRequest{Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetSessions()) != want || resp.GetCluster().GetSessions() != 150 {
			t.Errorf("limit %d: %d of %d sessions, want %d of 150", limit, len(resp.GetSessions()), resp.GetCluster().GetSessions(), want)
		}
		// All idle: the order is the sessions' own.
		if got := resp.GetSessions()[0].GetSessId(); got != 1 {
			t.Errorf("limit %d: first session %d, want 1", limit, got)
		}
	}
}

func TestClusterTopBeforeAnySnapshotIsEmpty(t *testing.T) {
	_, client := topPipeline(t)
	resp, err := client.GetClusterTop(ctxTimeout(t), &gpotelv1.GetClusterTopRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetSessions()) != 0 || len(resp.GetHosts()) != 0 || resp.GetSnapshotTimeUnixNano() != 0 {
		t.Errorf("empty store gave %v", resp)
	}
}

func near(got, want float64) bool { return math.Abs(got-want) <= 1e-6*math.Max(1, math.Abs(want)) }

// withQueryStart gives every session of md a running statement started at start.
// withQueryStart sets every session's query_start.
func withQueryStart(s pipelinetest.Snapshot, start time.Time) pmetric.Metrics {
	for i := range s.Sessions {
		s.Sessions[i].QueryStart = start
	}
	return s.Metrics()
}

func TestClusterTopListsTopQueries(t *testing.T) {
	srv := startDefault(t)
	factory := snapshotdiffprocessor.NewFactory()
	cfg := factory.CreateDefaultConfig().(*snapshotdiffprocessor.Config)
	cfg.Queries.Text = true
	proc, err := factory.CreateMetrics(context.Background(), processortest.NewNopSettings(factory.Type()), cfg, srv.exp)
	if err != nil {
		t.Fatal(err)
	}
	client := gpotelv1.NewClusterTopClient(srv.conn)
	// Each session runs one statement, started 30 s before the first snapshot.
	start := t0.Add(-30 * time.Second)
	for i := range 2 {
		md := withQueryStart(receiverScrape(t0.Add(time.Duration(i)*time.Minute), []int64{11, 12, 13}, threeSessions(float64(i))), start)
		if err := proc.ConsumeMetrics(context.Background(), md); err != nil {
			t.Fatal(err)
		}
	}
	for key, want := range map[gpotelv1.TopKey][]int64{
		gpotelv1.TopKey_TOP_KEY_CPU:   {11, 12, 13},
		gpotelv1.TopKey_TOP_KEY_READ:  {12, 11, 13},
		gpotelv1.TopKey_TOP_KEY_WRITE: {13, 11, 12},
		gpotelv1.TopKey_TOP_KEY_SKEW:  {12, 11, 13},
	} {
		resp, err := client.GetClusterTop(ctxTimeout(t), &gpotelv1.GetClusterTopRequest{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, q := range resp.GetQueries() {
			got = append(got, q.GetSessId())
		}
		if !equalIDs(got, want) || resp.GetCluster().GetQueries() != 3 {
			t.Errorf("%s: queries of sessions %v (of %d), want %v (of 3)", key, got, resp.GetCluster().GetQueries(), want)
		}
	}
	resp, err := client.GetClusterTop(ctxTimeout(t), &gpotelv1.GetClusterTopRequest{Key: gpotelv1.TopKey_TOP_KEY_CPU})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetQueries()) != 3 {
		t.Fatalf("queries %v, want 3", resp.GetQueries())
	}
	q := resp.GetQueries()[1]
	// Seen from the first snapshot on: 36.06 s of CPU in the minute it was
	// watched, over the 90 s since it started.
	if q.GetSessId() != 12 || q.GetStartUnixNano() != start.UnixNano() || q.GetQuery() != "select 12" || q.GetCompleted() || !q.GetPartial() ||
		!near(q.GetCpuSeconds(), 36.06) || q.GetDurationSeconds() != 90 || q.GetReadBytes() != 60e6 {
		t.Errorf("query line %v, want session 12 started at %v, text select 12, running, partial, 36.06 s of CPU in 90 s, 60 MB read", q, start)
	}
	if !near(q.GetUsage().GetCpuCores(), 36.06/90) || !near(q.GetCpuSkew(), 1-0.601/2/0.6) || q.CpuHottestSegment == nil || q.GetCpuHottestSegment() != 1 {
		t.Errorf("query rates and skew %v, want 0.4 cores over its duration, skew 0.499 on segment 1", q)
	}
	// Every host the query's processes run on is listed, the idle
	// coordinator's included.
	if len(q.GetHosts()) != 3 || q.GetHosts()[0].GetHostname() != "mdw" || q.GetHosts()[0].GetUsage().GetCpuCores() != 0 ||
		q.GetHosts()[2].GetHostname() != "sdw2" || !near(q.GetHosts()[2].GetUsage().GetCpuCores(), 36/90.0) {
		t.Errorf("query hosts %v, want mdw idle, sdw1, sdw2 with 0.4 cores on sdw2", q.GetHosts())
	}
}

// A live session the snapshot has no last_metrics for (its window not
// filled yet) is a line without rates, never an Internal error that would
// hide every other session from every caller.
func TestClusterTopServesASessionWithoutLastMetrics(t *testing.T) {
	srv := startDefault(t)
	bare := fullSession()
	bare.last, bare.total = nil, nil
	srv.consume(t, buildSnapshot(t0, []testSession{bare}))
	resp, err := gpotelv1.NewClusterTopClient(srv.conn).GetClusterTop(ctxTimeout(t), &gpotelv1.GetClusterTopRequest{})
	if err != nil {
		t.Fatalf("GetClusterTop with a session without last_metrics: %v", err)
	}
	// No figures rather than zeros: a session in its first window may be
	// burning CPU already.
	if len(resp.GetSessions()) != 1 || resp.GetSessions()[0].GetSessId() != bare.sessID || resp.GetSessions()[0].GetUsage() != nil ||
		resp.GetSessions()[0].CpuHottestSegment != nil {
		t.Errorf("sessions %v, want session %d without usage", resp.GetSessions(), bare.sessID)
	}
}

// The collector's own sessions are marked own, whatever they rank, so a
// client can hide them by what no database user can set; every other
// session is not.
func TestClusterTopMarksTheCollectorsOwnSessions(t *testing.T) {
	proc, client := topPipeline(t)
	const sessions, own1, own2 = 30, 29, 30 // all idle: the own ones rank last
	for i := range 2 {
		s := receiverScrape(t0.Add(time.Duration(i)*time.Minute), nil, nil)
		for id := int64(1); id <= sessions; id++ {
			s.Sessions = append(s.Sessions, pipelinetest.Session{ID: id, PID: 7000 + id, DB: "postgres", User: "gpotel",
				State: "idle", Own: id == own1 || id == own2})
		}
		if err := proc.ConsumeMetrics(context.Background(), s.Metrics()); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := client.GetClusterTop(ctxTimeout(t), &gpotelv1.GetClusterTopRequest{Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	var got, gotOwn []int64
	for _, s := range resp.GetSessions() {
		got = append(got, s.GetSessId())
		if s.GetOwn() {
			gotOwn = append(gotOwn, s.GetSessId())
		}
	}
	if want := []int64{1, 2, 3, 4, 5, own1, own2}; !equalIDs(got, want) {
		t.Errorf("sessions %v, want the top 5 and then the collector's own: %v", got, want)
	}
	if want := []int64{own1, own2}; !equalIDs(gotOwn, want) {
		t.Errorf("own sessions %v, want %v", gotOwn, want)
	}
}
