// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package proctest starts real processes for the agent's tests and benchmarks.
package proctest

import (
	"os/exec"
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
