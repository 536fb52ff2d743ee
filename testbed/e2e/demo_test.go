// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gpotel/gpotel/internal/await"
)

// TestDemoCommand runs `gpotel-testbed demo --duration` as a user would: it
// must announce the API and the OTLP file, serve sessions while it runs, and
// stop by itself leaving no process of its testbed behind.
func TestDemoCommand(t *testing.T) {
	needBinaries(t)
	ctx := await.Context(t)
	launcher := filepath.Join(t.TempDir(), "gpotel-testbed")
	if err := run(ctx, root, "go", "build", "-o", launcher, "./cmd/gpotel-testbed"); err != nil {
		t.Fatal(err)
	}
	port, err := freePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.CommandContext(ctx, launcher, "demo", "--duration", "45s", "--out", out,
		"--api", "127.0.0.1:"+itoa(port), "--collector", bins.Collector, "--agent", bins.Agent,
		"--config", configPath("testbed.yaml"))
	cmd.Dir = root
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The demo's JSON events, read as they come; the channel closes when the
	// demo closes its stdout, that is, when it has ended.
	lines := make(chan []byte)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	events := map[string]map[string]any{}
	var sessionsSeen int
	ended := false
	record := func(line []byte) string {
		var ev map[string]any
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Errorf("not a JSON line: %q", line)
			return ""
		}
		name, _ := ev["event"].(string)
		events[name] = ev
		return name
	}
	for line := range lines {
		if record(line) != "running" {
			continue
		}
		// While it runs, the announced API serves the workload's sessions.
		api, _ := events["api"]["endpoint"].(string)
		waitFor(t, "the demo's API serves sessions", func() (bool, string) {
			if ended {
				t.Fatalf("the demo ended before its API served 3 sessions (last saw %d)", sessionsSeen)
			}
			select {
			case line, ok := <-lines:
				if !ok {
					ended = true
				} else {
					record(line)
				}
			default:
			}
			client, closeFn, err := DialAPI(api)
			if err != nil {
				return false, err.Error()
			}
			defer closeFn()
			states, err := allSessions(ctx, client)
			sessionsSeen = len(states)
			return err == nil && len(states) >= 3, itoa(len(states)) + " sessions"
		})
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("demo: %v\n%s", err, stderr.String())
	}
	for _, name := range []string{"testbed", "agent", "collector", "api", "otlp", "running", "stopped"} {
		if events[name] == nil {
			t.Errorf("no %q event", name)
		}
	}
	t.Logf("%d sessions served while running", sessionsSeen)
	file, _ := events["otlp"]["file"].(string)
	if st, err := os.Stat(file); err != nil || st.Size() == 0 {
		t.Errorf("OTLP output %s is missing or empty: %v", file, err)
	}
	dir, _ := events["testbed"]["dir"].(string)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("testbed dir %s still exists after the demo: %v", dir, err)
	}
	id, _ := events["testbed"]["id"].(string)
	if left := processesTagged("gpotel-" + id + "-seg"); len(left) > 0 {
		t.Errorf("processes of the demo's testbed left running: %v", left)
	}
	for _, key := range []string{"collector"} {
		if pid, ok := events[key]["pid"].(float64); ok && processAlive(int(pid)) {
			t.Errorf("%s (pid %d) still running after the demo", key, int(pid))
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// processesTagged lists pids whose command line contains tag (the testbed's
// cluster_name shows in every PostgreSQL process title).
func processesTagged(tag string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), tag) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func processAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }
