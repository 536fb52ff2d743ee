// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// bins are built once for the package; empty in -short mode.
var (
	bins Binaries
	root string
)

// untilStopped is the Duration of a workload that the test stops itself once
// it has seen what it checks: tests wait on conditions, never on the clock,
// so the workload lasts as long as the test's waits may (a fixed 10 minutes
// once ran out under make test-stress while the Prometheus drill still
// waited, and nothing could answer it after that).
func untilStopped(t testing.TB) time.Duration { return time.Until(await.Deadline(t)) }

func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() {
		var err error
		if root, err = RepoRoot(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			os.Exit(1)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
		begin := time.Now()
		bins, err = Build(ctx, root)
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: build:", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "e2e: collector and agent built in %v\n", time.Since(begin).Round(time.Second))
	}
	code := m.Run()
	stopScaleStacks()
	os.Exit(code)
}

func needBinaries(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: runs the ocb-built collector on a PostgreSQL testbed")
	}
}

func configPath(name string) string { return filepath.Join(root, "config", name) }

// validate runs `otelcol-gpotel validate` with the environment the config expects.
func validate(t *testing.T, config string, env []string, extra ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.Collector, append([]string{"validate", "--config", config}, extra...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestExampleConfigsValidate(t *testing.T) {
	needBinaries(t)
	tls := t.TempDir()
	for _, f := range []string{"ca.pem", "collector.pem", "collector-key.pem", "api.pem", "api-key.pem", "token", "password"} {
		if err := os.WriteFile(filepath.Join(tls, f), []byte("placeholder\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases := map[string][]string{
		"testbed.yaml": {
			"GPOTEL_COORDINATOR_DSN=postgres://gpadmin@127.0.0.1:5432/postgres?sslmode=disable",
			`GPOTEL_AGENTS={sdw1: "127.0.0.11:1433", sdw2: "127.0.0.12:1433"}`,
		},
		"greenplum.yaml": {
			"GPOTEL_DB_PASSWORD_FILE=" + filepath.Join(tls, "password"),
			"GPOTEL_COORDINATOR_HOST=mdw",
			"GPOTEL_TLS_DIR=" + tls,
			"GPOTEL_API_TOKEN_FILE=" + filepath.Join(tls, "token"),
			"GPOTEL_OTLP_ENDPOINT=otlp.example:4317",
			"GPOTEL_STATE_DIR=" + filepath.Join(tls, "state"),
		},
		"postgresql.yaml": {
			"GPOTEL_DSN=postgres://gpotel@localhost:5432/postgres?sslmode=disable",
			"GPOTEL_HOST_NAME=pg1",
		},
		"prometheus.yaml": {
			"GPOTEL_COORDINATOR_DSN=postgres://gpmon@localhost:5432/postgres",
			"GPOTEL_DB_PASSWORD_FILE=" + filepath.Join(tls, "password"),
			"GPOTEL_COORDINATOR_HOST=mdw",
			"GPOTEL_TLS_DIR=" + tls,
		},
	}
	for name, env := range cases {
		t.Run(name, func(t *testing.T) {
			if out, err := validate(t, configPath(name), env); err != nil {
				t.Fatalf("validate %s: %v\n%s", name, err, out)
			}
		})
	}
	// The overlays: added to testbed.yaml, as make run and the tests add them.
	overlayEnv := append([]string{"GPOTEL_COORDINATOR_PORT=5432"}, cases["testbed.yaml"]...)
	for _, overlays := range [][]string{{"history.yaml"}, {"victorialogs.yaml"}, {"history.yaml", "rules.yaml"}} {
		name := strings.Join(overlays, " and ")
		t.Run("testbed.yaml with "+name, func(t *testing.T) {
			var args []string
			for _, overlay := range overlays {
				args = append(args, "--config", configPath(overlay))
			}
			if out, err := validate(t, configPath("testbed.yaml"), overlayEnv, args...); err != nil {
				t.Fatalf("validate testbed.yaml with %s: %v\n%s", name, err, out)
			}
		})
	}
	// The same command must reject a broken configuration, or the cases above prove nothing.
	t.Run("broken testbed.yaml is rejected", func(t *testing.T) {
		out, err := validate(t, configPath("testbed.yaml"), cases["testbed.yaml"], "--set=processors::snapshotdiff::windows=[]")
		if err == nil {
			t.Fatalf("validate accepted snapshotdiff without windows:\n%s", out)
		}
		if !strings.Contains(out, "windows") {
			t.Errorf("the error does not name the bad setting:\n%s", out)
		}
	})
	t.Run("testbed.yaml without its DSN is rejected", func(t *testing.T) {
		env := []string{cases["testbed.yaml"][1], "GPOTEL_COORDINATOR_DSN="}
		if out, err := validate(t, configPath("testbed.yaml"), env); err == nil {
			t.Fatalf("validate accepted a receiver without a database:\n%s", out)
		}
	})
}

// launch starts a stack on c and stops it when the test ends, with the
// collector's log tail when the test failed.
func launch(ctx context.Context, t *testing.T, c *cluster.Cluster, opts StackOptions) *Stack {
	t.Helper()
	s, err := Launch(ctx, c, opts)
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("collector log tail:\n%s", s.Collector.LogTail(6000))
		}
		_ = s.Close()
	})
	return s
}

// startStack brings up the shared testbed (gp6, 2 hosts x 2 segments) with
// agents, the ocb-built collector on config/testbed.yaml, and the OTLP sink.
func startStack(t *testing.T) *Stack {
	t.Helper()
	return launchStack(t, cluster.Start(t, cluster.Options{Hosts: 2, SegmentsPerHost: 2, Dialect: dialect.GP6}))
}

// launchStack starts the agents, the collector on config/testbed.yaml and
// the OTLP sink on c, and stops them with the test.
func launchStack(t *testing.T, c *cluster.Cluster) *Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	s, err := Launch(ctx, c, StackOptions{
		Binaries: bins,
		Config:   configPath("testbed.yaml"),
		Dir:      dir,
		OTLPKeep: 400,
	})
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("collector log tail:\n%s", s.Collector.LogTail(6000))
		}
		if err := s.Close(); err != nil {
			t.Errorf("stack close: %v", err)
		}
	})
	return s
}
