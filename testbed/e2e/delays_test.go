// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpotel/gpotel/testbed/workload"
)

const delayacctSysctl = "/proc/sys/kernel/task_delayacct"

// TestDelayAccounting turns kernel.task_delayacct on for its duration and
// checks that an I/O-heavy session shows block-I/O delay and a CPU-contended
// one shows CPU (run-queue) delay, through the whole pipeline to GetGPSessions.
func TestDelayAccounting(t *testing.T) {
	needBinaries(t)
	if os.Geteuid() != 0 {
		t.Skip("turning kernel.task_delayacct on needs root")
	}
	before, err := os.ReadFile(delayacctSysctl)
	if err != nil {
		t.Skipf("no %s on this kernel: %v", delayacctSysctl, err)
	}
	if err := os.WriteFile(delayacctSysctl, []byte("1\n"), 0o644); err != nil { // #nosec G306 -- a sysctl
		t.Skipf("cannot turn delay accounting on: %v", err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(delayacctSysctl, before, 0o644); err != nil { // #nosec G306 -- a sysctl
			t.Errorf("restoring kernel.task_delayacct to %q: %v", strings.TrimSpace(string(before)), err)
		}
	})

	s := startStack(t)
	api := dialAPI(t, s.API)
	ctx := context.Background()
	start := func(spec workload.Spec) *workload.Session {
		w, err := workload.Start(ctx, s.Cluster, spec)
		if err != nil {
			t.Fatalf("workload %s: %v", spec.Name, err)
		}
		t.Cleanup(func() { _ = w.Stop() })
		return w
	}
	io := start(workload.Spec{Name: "e2e-delay-io", Kind: workload.IO, Duration: 60 * time.Second, Contents: []int{0, 2}, IOBytes: 16 << 20})
	// More CPU burners than cores: their backends wait in the run queue.
	var cpus []*workload.Session
	for i := range 3 {
		cpus = append(cpus, start(workload.Spec{Name: fmt.Sprintf("e2e-delay-cpu-%d", i), Kind: workload.CPU, Duration: 60 * time.Second,
			Contents: []int{1}}))
	}

	waitFor(t, "block-I/O delay on the I/O session and CPU delay on a CPU session", func() (bool, string) {
		st, err := stateOf(ctx, api, io.SessID())
		if err != nil || st == nil {
			return false, fmt.Sprintf("I/O session %d: %v", io.SessID(), err)
		}
		blkio := st.GetLastMetrics().GetSystemStat().GetBlkioDelaySeconds()
		runq := 0.0
		for _, w := range cpus {
			if cs, err := stateOf(ctx, api, w.SessID()); err == nil && cs != nil {
				runq = max(runq, cs.GetLastMetrics().GetSystemStat().GetRunDelaySeconds())
			}
		}
		t.Logf("I/O session blkio delay %.3f s, largest CPU session run delay %.3f s (last window)", blkio, runq)
		return blkio > 0 && runq > 0, fmt.Sprintf("blkio %.3f s, run delay %.3f s", blkio, runq)
	})
}
