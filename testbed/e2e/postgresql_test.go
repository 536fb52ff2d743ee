// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/workload"
)

// TestPostgreSQLConfig runs config/postgresql.yaml against a plain PostgreSQL
// testbed: no agents, the collector reads /proc itself, and a session is a
// backend plus the parallel workers it starts.
func TestPostgreSQLConfig(t *testing.T) {
	needBinaries(t)
	ctx := await.Context(t)
	c := cluster.Start(t, cluster.Options{Dialect: dialect.PostgreSQL})
	pgUser, err := instanceOwner(c.Coordinator.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]int{}
	for _, name := range []string{"api", "health", "prometheus"} {
		if ports[name], err = freePort("127.0.0.1"); err != nil {
			t.Fatal(err)
		}
	}
	api := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports["api"]))
	const hostName = "pg1"
	startHealthyCollector(t, filepath.Join(t.TempDir(), "collector.log"),
		[]string{"GPOTEL_DSN=" + c.CoordinatorDSN, "GPOTEL_HOST_NAME=" + hostName}, ports["health"],
		"--config", configPath("postgresql.yaml"),
		"--set=receivers::gpsession::collection_interval=1s",
		"--set=receivers::gpsession::timeout=6s",
		"--set=receivers::gpsession::host_timeout=800ms",
		"--set=receivers::gpsession::local::allowed_users=["+pgUser+"]",
		"--set=exporters::sessionstate::endpoint="+api,
		"--set=exporters::prometheus::endpoint=127.0.0.1:"+strconv.Itoa(ports["prometheus"]),
		"--set=extensions::health_check::endpoint=127.0.0.1:"+strconv.Itoa(ports["health"]),
		"--set=service::telemetry::metrics::level=none")
	w, err := workload.Start(ctx, c, workload.Spec{Name: "e2e-parallel", Kind: workload.ParallelCPU, Duration: untilStopped(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	client := dialAPI(t, api)
	waitFor(t, "the session counts its parallel workers and their CPU", func() (bool, string) {
		st, err := stateOf(ctx, client, w.SessID())
		if err != nil || st == nil {
			return false, fmt.Sprint(err)
		}
		sys := st.GetLastMetrics().GetSystemStat()
		ok := sys.GetProcesses() >= 2 && sys.GetHosts() == 1 && st.GetHostname() == hostName &&
			sys.GetUserTimeSeconds()+sys.GetKernelTimeSeconds() > 0
		return ok, fmt.Sprintf("processes %d, hosts %d, hostname %q, cpu %.3f s",
			sys.GetProcesses(), sys.GetHosts(), st.GetHostname(), sys.GetUserTimeSeconds()+sys.GetKernelTimeSeconds())
	})
}
