// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/testbed/groundtruth"
	"github.com/gpotel/gpotel/testbed/workload"
)

const delayacctSysctl = "/proc/sys/kernel/task_delayacct"

// turnDelayAccountingOn turns kernel.task_delayacct on for the test's
// duration and back to what it was at its end; it says why not when it
// cannot (the kernel's default is off, and only root may change it).
func turnDelayAccountingOn(t *testing.T) (whyNot string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return "turning kernel.task_delayacct on needs root"
	}
	before, err := os.ReadFile(delayacctSysctl)
	if err != nil {
		return fmt.Sprintf("no %s on this kernel: %v", delayacctSysctl, err)
	}
	if err := os.WriteFile(delayacctSysctl, []byte("1\n"), 0o644); err != nil { // #nosec G306 -- a sysctl
		return fmt.Sprintf("cannot turn delay accounting on: %v", err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(delayacctSysctl, before, 0o644); err != nil { // #nosec G306 -- a sysctl
			t.Errorf("restoring kernel.task_delayacct to %q: %v", strings.TrimSpace(string(before)), err)
		}
	})
	return ""
}

// TestDelayAccounting turns kernel.task_delayacct on for its duration and
// checks that an I/O-heavy session's block-I/O delay and a CPU-contended
// one's CPU (run-queue) delay, through the whole pipeline to GetGPSessions,
// are what /proc says the sessions' backends waited over the same window.
func TestDelayAccounting(t *testing.T) {
	needBinaries(t)
	if why := turnDelayAccountingOn(t); why != "" {
		t.Skip(why)
	}

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

	var pids []int
	for _, w := range append([]*workload.Session{io}, cpus...) {
		pids = append(pids, w.AllPids()...)
	}
	truth := sampleTruth(pids, 50*time.Millisecond)
	stopTruth := sync.OnceValue(truth.Stop)
	t.Cleanup(func() { _ = stopTruth() })

	// A snapshot of each session whose window lies inside the ground truth
	// and in which it has grown a delay of its kind.
	states := map[*workload.Session]*yagpcc.SessionState{}
	waitFor(t, "block-I/O delay on the I/O session and run-queue delay on every CPU session, over windows /proc covers", func() (bool, string) {
		var missing []string
		for _, w := range append([]*workload.Session{io}, cpus...) {
			if states[w] != nil {
				continue
			}
			st, err := stateOf(ctx, api, w.SessID())
			if err != nil || st == nil {
				missing = append(missing, fmt.Sprintf("%s: %v", w.Name, err))
				continue
			}
			sys := st.GetLastMetrics().GetSystemStat()
			delay := sys.GetRunDelaySeconds()
			if w == io {
				delay = sys.GetBlkioDelaySeconds()
			}
			at := st.GetTime().AsTime()
			from := at.Add(-time.Duration(sys.GetWindowSeconds() * float64(time.Second)))
			first, last := truth.span()
			if delay <= 0 || sys.GetPartial() || int(sys.GetProcesses()) != len(w.AllPids()) || from.Before(first) || !at.Before(last) {
				missing = append(missing, fmt.Sprintf("%s: delay %.3f s over %s..%s", w.Name, delay, from.Format(time.TimeOnly), at.Format(time.TimeOnly)))
				continue
			}
			states[w] = st
		}
		return len(missing) == 0, strings.Join(missing, "; ")
	})
	// The ground truth runs on until both edges of each window were read.
	reads := map[*workload.Session]readBounds{}
	for w, st := range states {
		reads[w] = readBoundsOf(t, s, st)
	}
	if err := stopTruth(); err != nil {
		t.Fatalf("ground truth: %v", err)
	}

	// Each against what /proc says over the same window: the I/O session's
	// block-I/O delay against stat field 42 (delayacct_blkio_ticks), each
	// CPU session's run-queue delay against schedstat's second field.
	check := func(w *workload.Session, what string, got float64, f func(groundtruth.Process) float64, resolution float64) {
		lo, hi := windowTruthRange(t, truth, states[w], reads[w], w.AllPids(), f)
		// Two readings of each process at the window's edges, each to the
		// kernel's resolution of the figure.
		slack := 2 * resolution * float64(len(w.AllPids()))
		t.Logf("%s: %s %.3f s over the last window, /proc %.3f..%.3f s (read up to %v, %v after its edges)", w.Name, what, got, lo, hi, reads[w].from, reads[w].at)
		if !withinRange(got, lo-slack, hi+slack, tolerance) {
			t.Errorf("%s: %s %.3f s, /proc over the same window as read %.3f..%.3f s: off by more than %.0f %% + %.2f s", w.Name, what, got, lo, hi, tolerance*100, slack)
		}
	}
	tick := 1 / float64(groundtruth.ClockTicks())
	check(io, "block-I/O delay", states[io].GetLastMetrics().GetSystemStat().GetBlkioDelaySeconds(),
		func(p groundtruth.Process) float64 { return p.BlkioDelaySeconds }, tick)
	for _, w := range cpus {
		check(w, "run-queue delay", states[w].GetLastMetrics().GetSystemStat().GetRunDelaySeconds(),
			func(p groundtruth.Process) float64 { return p.RunDelaySeconds }, 0)
	}
}
