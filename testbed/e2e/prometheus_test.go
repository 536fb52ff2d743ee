// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpotel/gpotel/deploy"
	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/workload"
)

// prometheusServer is Debian's Prometheus, scraping on loopback.
type prometheusServer struct {
	addr string
	http http.Client
}

// startPrometheus runs a Prometheus server that scrapes targets every second
// and evaluates the shipped rules every second; it stops with the test.
func startPrometheus(t *testing.T, targets map[string]string) *prometheusServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus not found (apt-get install prometheus; .ci/run installs it): %v", err)
	}
	dir := t.TempDir()
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "global:\n  scrape_interval: 5s\n  scrape_timeout: 5s\n  evaluation_interval: 1s\nrule_files:\n  - %q\nscrape_configs:\n",
		filepath.Join(root, "deploy", deploy.RulesFile))
	jobs := make([]string, 0, len(targets))
	for job := range targets {
		jobs = append(jobs, job)
	}
	slices.Sort(jobs)
	for _, job := range jobs {
		fmt.Fprintf(&cfg, "  - job_name: %s\n    static_configs:\n      - targets: [%q]\n", job, targets[job])
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := freePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	p := &prometheusServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), http: http.Client{Timeout: 10 * time.Second}}
	proc, err := StartProcess("prometheus", filepath.Join(dir, "prometheus.log"), nil, bin,
		"--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+p.addr, "--log.level=warn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("prometheus log:\n%s", proc.LogTail(3000))
		}
		_ = proc.Stop(15 * time.Second)
	})
	waitFor(t, "prometheus ready", func() (bool, string) {
		if exited, err := proc.Exited(); exited {
			t.Fatalf("prometheus exited (%v): %s", err, proc.LogTail(3000))
		}
		resp, err := p.http.Get("http://" + p.addr + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return p
}

// promSeries is one element of an instant vector.
type promSeries struct {
	Metric map[string]string
	Value  float64
}

// query evaluates expr at time at (now when zero) through /api/v1/query.
func (p *prometheusServer) query(ctx context.Context, expr string, at time.Time) ([]promSeries, error) {
	q := url.Values{"query": {expr}}
	if !at.IsZero() {
		q.Set("time", strconv.FormatFloat(float64(at.UnixNano())/1e9, 'f', 3, 64))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/api/v1/query?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("%s: %w", resp.Status, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("%s: %s", resp.Status, body.Error)
	}
	if body.Data.ResultType != "vector" {
		return nil, fmt.Errorf("result type %s, want vector", body.Data.ResultType)
	}
	out := make([]promSeries, 0, len(body.Data.Result))
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("value %v: %w", r.Value[1], err)
		}
		out = append(out, promSeries{Metric: r.Metric, Value: v})
	}
	return out, nil
}

// prometheusStackArgs run config/prometheus.yaml on the testbed: the
// testbed's agents, no TLS, the testbed's short interval, and Launch's ports.
func prometheusStackArgs(pgOSUser string) []string {
	return []string{
		"--set=receivers::gpsession::password_file=",
		"--set=receivers::gpsession::agents=${env:GPOTEL_AGENTS}",
		"--set=receivers::gpsession::agent::tls::insecure=true",
		"--set=receivers::gpsession::agent::tls::ca_file=",
		"--set=receivers::gpsession::agent::tls::cert_file=",
		"--set=receivers::gpsession::agent::tls::key_file=",
		"--set=receivers::gpsession::collection_interval=2s",
		"--set=receivers::gpsession::timeout=6s",
		"--set=receivers::gpsession::host_timeout=1500ms",
		"--set=receivers::gpsession::reconnect_backoff_max=5s", // a loaded machine's failed scrapes must not push retries half a minute apart
		"--set=receivers::gpsession::local::allowed_users=[" + pgOSUser + "]",
		"--set=receivers::gpsession::local::hostname=" + cluster.CoordinatorHost,
		"--set=exporters::sessionstate::endpoint=${env:GPOTEL_API_ENDPOINT}",
		"--set=exporters::sessionstate::tls=null",
		"--set=extensions::health_check::endpoint=${env:GPOTEL_HEALTH_ENDPOINT}",
	}
}

// TestPrometheusAnswersEveryDashboardQuery scrapes config/prometheus.yaml's
// exporter with a real Prometheus while workloads run, and evaluates every
// expression of the shipped dashboard and rules through Prometheus's HTTP API.
func TestPrometheusAnswersEveryDashboardQuery(t *testing.T) {
	needBinaries(t)
	// The block I/O wait panels read a figure the kernel counts only with
	// delay accounting on; off, the figure is absent (never 0) and so are
	// their series.
	delayacctOff := turnDelayAccountingOn(t)
	c := cluster.Start(t, cluster.Options{Hosts: 2, SegmentsPerHost: 2, Dialect: dialect.GP6})
	pgOSUser, err := instanceOwner(c.Coordinator.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	exporterPort, err := freePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	exporter := net.JoinHostPort("127.0.0.1", strconv.Itoa(exporterPort))
	t.Setenv("GPOTEL_PROMETHEUS_ENDPOINT", exporter)
	t.Setenv("GPOTEL_COORDINATOR_HOST", cluster.CoordinatorHost)
	t.Setenv("GPOTEL_TLS_DIR", t.TempDir())
	t.Setenv("GPOTEL_DB_PASSWORD_FILE", "")
	ctx := await.Context(t)
	s := launch(ctx, t, c, StackOptions{
		Binaries:      bins,
		Config:        configPath("prometheus.yaml"),
		Dir:           t.TempDir(),
		CollectorArgs: prometheusStackArgs(pgOSUser),
	})
	prom := startPrometheus(t, map[string]string{"gpotel": exporter, "otelcol": s.Telemetry})

	start := func(spec workload.Spec) *workload.Session {
		w, err := workload.Start(context.Background(), c, spec)
		if err != nil {
			t.Fatalf("workload %s: %v", spec.Name, err)
		}
		t.Cleanup(func() { _ = w.Stop() })
		return w
	}
	duration := untilStopped(t)
	cpu := start(workload.Spec{Name: "prom-cpu", Kind: workload.CPU, Duration: duration})
	io := start(workload.Spec{Name: "prom-io", Kind: workload.IO, Duration: duration, Contents: []int{0, 2}, IOBytes: 16 << 20})
	mem := start(workload.Spec{Name: "prom-memory", Kind: workload.Memory, Duration: duration, Contents: []int{0, 1, 2}, MemoryBytes: 24 << 20})
	sessions := []string{strconv.Itoa(cpu.SessID()), strconv.Itoa(io.SessID()), strconv.Itoa(mem.SessID())}
	// Greenplum's own figures exist only for the sessions that have them:
	// a spilling sort, and a session waiting for another's lock.
	spill := start(workload.Spec{Name: "prom-spill", Kind: workload.Spill, Duration: duration, SpillBytes: 8 << 20})
	holder := start(workload.Spec{Name: "prom-lock-holder", Kind: workload.LockHolder, Table: "prom_locked", Duration: duration})
	<-holder.Held()
	waiter := start(workload.Spec{Name: "prom-lock-waiter", Kind: workload.LockWaiter, Table: "prom_locked", Duration: duration})
	sessionsOf := func(promQL string) []string {
		switch {
		case strings.Contains(promQL, "spill"):
			return []string{strconv.Itoa(spill.SessID())}
		case strings.Contains(promQL, "lock_wait"):
			return []string{strconv.Itoa(waiter.SessID())}
		}
		return sessions
	}
	hosts := []string{cluster.CoordinatorHost}
	for _, h := range segmentHosts(c) {
		hosts = append(hosts, h.Name)
	}

	var exprs []deploy.Expression
	dash, err := deploy.DashboardQueries()
	if err != nil {
		t.Fatal(err)
	}
	rules, err := deploy.RuleExpressions()
	if err != nil {
		t.Fatal(err)
	}
	exprs = append(exprs, dash...)
	for _, r := range rules {
		if strings.HasPrefix(r.Source, "alert: ") {
			// An alert that does not fire returns nothing; with bool it returns every series it watches.
			var ok bool
			if r.PromQL, ok = deploy.WithoutThreshold(r.PromQL); !ok {
				t.Fatalf("%s: no threshold to lift in %q", r.Source, r.PromQL)
			}
		}
		exprs = append(exprs, r)
	}

	// Each expression must answer with series for the workload's sessions
	// (when it keeps session labels) and for every host (when it keeps host labels).
	answered := map[string]string{}
	waitFor(t, "every dashboard and rule expression answers for the workload", func() (bool, string) {
		var missing []string
		for _, e := range exprs {
			if _, ok := answered[e.Source]; ok {
				continue
			}
			if delayacctOff != "" && strings.Contains(e.PromQL, "disk_delay") {
				answered[e.Source] = "not asked: " + delayacctOff
				continue
			}
			if why := answers(ctx, prom, e.PromQL, sessionsOf(e.PromQL), hosts); why != "" {
				missing = append(missing, fmt.Sprintf("%s: %s", e.Source, why))
				continue
			}
			answered[e.Source] = e.PromQL
		}
		return len(missing) == 0, strings.Join(missing, "\n")
	})
	t.Logf("%d expressions (%d dashboard, %d rules) answered for sessions %v and hosts %v", len(exprs), len(dash), len(rules), sessions, hosts)

	// A query is an event, not a series: config/prometheus.yaml keeps the
	// per-query gauges out (with them, the workloads' ended queries made
	// 23 000 series, and a scrape outgrew its timeout under load).
	t.Run("no per-query series", func(t *testing.T) {
		got, err := prom.query(ctx, `count({__name__=~"gpotel_query_.*"})`, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 0 {
			t.Errorf("%v per-query series in Prometheus", got[0].Value)
		}
	})

	t.Run("CPU of the CPU session agrees with the API", func(t *testing.T) {
		api := dialAPI(t, s.API)
		// The API's newest snapshot of the session, with a second of CPU in
		// its window, that Prometheus also scraped: it scrapes every 5 s and
		// the collector ticks every 2 s, so some snapshots it never sees, and
		// then a newer one is taken.
		var (
			st                     *yagpcc.SessionState
			at                     time.Time
			promSeconds, promCores float64
		)
		sel := fmt.Sprintf(`{gpotel_window="5m", gpotel_session_id="%d"}`, cpu.SessID())
		waitFor(t, "a snapshot of the CPU session in both the API and Prometheus", func() (bool, string) {
			var err error
			st, err = stateOf(ctx, api, cpu.SessID())
			sys := st.GetLastMetrics().GetSystemStat()
			if err != nil || st == nil || sys.GetUserTimeSeconds()+sys.GetKernelTimeSeconds() < 1 {
				return false, fmt.Sprintf("API: %v %v", err, sys)
			}
			at = st.GetTime().AsTime()
			got, err := prom.query(ctx, "sum(gpotel_session_cpu_time_seconds"+sel+") and on() (timestamp(gpotel_session_cpu_time_seconds"+sel+") >= "+fmt.Sprintf("%.3f", float64(at.UnixMilli())/1e3)+")", at)
			if err != nil || len(got) != 1 {
				return false, fmt.Sprintf("Prometheus at %s: %v %v", at.Format(time.RFC3339Nano), got, err)
			}
			promSeconds = got[0].Value
			rate, err := prom.query(ctx, "sum(gpotel_session_cpu_time_rate_seconds_per_second"+sel+")", at)
			if err != nil || len(rate) != 1 {
				return false, fmt.Sprintf("Prometheus rate at %s: %v %v", at.Format(time.RFC3339Nano), rate, err)
			}
			promCores = rate[0].Value
			return true, ""
		})
		sys := st.GetLastMetrics().GetSystemStat()
		apiSeconds := sys.GetUserTimeSeconds() + sys.GetKernelTimeSeconds()
		apiCores := apiSeconds / sys.GetWindowSeconds()
		t.Logf("session %d at %s over %.1fs: API %.3f CPU s (%.3f cores), Prometheus %.3f CPU s (%.3f cores)",
			cpu.SessID(), at.Format(time.RFC3339Nano), sys.GetWindowSeconds(), apiSeconds, apiCores, promSeconds, promCores)
		if !within(promSeconds, apiSeconds, tolerance) || !within(promCores, apiCores, tolerance) {
			t.Errorf("Prometheus %.3f s / %.3f cores, API %.3f s / %.3f cores: off by more than %.0f%%",
				promSeconds, promCores, apiSeconds, apiCores, tolerance*100)
		}
		if math.IsNaN(promCores) {
			t.Error("Prometheus CPU rate is NaN")
		}
	})
}

// answers says why expr does not (yet) answer for the workload, or "" when it
// does: series for every workload session when it keeps session labels, else
// for every host when it keeps host labels, else any series.
func answers(ctx context.Context, prom *prometheusServer, expr string, sessions, hosts []string) string {
	got, err := prom.query(ctx, expr, time.Time{})
	if err != nil {
		return err.Error()
	}
	if len(got) == 0 {
		return "no series"
	}
	seen := map[string]map[string]bool{"gpotel_session_id": {}, "host_name": {}}
	for _, s := range got {
		if math.IsNaN(s.Value) {
			return fmt.Sprintf("NaN in %v", s.Metric)
		}
		for label, values := range seen {
			if v, ok := s.Metric[label]; ok {
				values[v] = true
			}
		}
	}
	// A session's own series carry the coordinator's host.name: hosts count only without sessions.
	label, want := "gpotel_session_id", sessions
	if len(seen[label]) == 0 {
		label, want = "host_name", hosts
	}
	if len(seen[label]) == 0 {
		return ""
	}
	for _, w := range want {
		if !seen[label][w] {
			return fmt.Sprintf("no series with %s=%q among %d", label, w, len(got))
		}
	}
	return ""
}
