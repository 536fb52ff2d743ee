// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package proctest starts real processes for the agent's tests and benchmarks.
package proctest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// SpawnSleepers starts n `sleep` processes that live until the test ends and
// returns their pids. Each is its own process group so cleanup reaches it.
func SpawnSleepers(tb testing.TB, n int) []int64 {
	tb.Helper()
	cmds := make([]*exec.Cmd, 0, n)
	tb.Cleanup(func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
		}
		for _, c := range cmds {
			_ = c.Wait()
		}
	})
	pids := make([]int64, 0, n)
	for range n {
		c := exec.Command("sleep", "3600")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			tb.Fatalf("starting sleeper %d of %d: %v", len(cmds)+1, n, err)
		}
		cmds = append(cmds, c)
		pids = append(pids, int64(c.Process.Pid))
	}
	return pids
}

// SelfAsPostmaster writes a postmaster.pid naming this test process and
// returns its path, for postmaster_pid_files: the processes the test starts
// are then children of a postmaster, which the agent requires of a database
// process.
func SelfAsPostmaster(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "postmaster.pid")
	if err := os.WriteFile(path, fmt.Appendf(nil, "%d\n", os.Getpid()), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}
