// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/groundtruth"
	"github.com/gpotel/gpotel/testbed/workload"
)

// A session burning one core on the coordinator: after five time constants
// its smoothed CPU (ProcAvg) is the core it burns, within 5 %. The truth is
// the same exponentially weighted average, computed from /proc readings
// taken by the test at the snapshot times the API reports, so a loaded
// machine that gives the burn less than a whole core still checks the claim.
func TestSmoothedCPUOfOneCoreBurnConverges(t *testing.T) {
	needBinaries(t)
	const tau = 6 * time.Second // three ticks of config/testbed.yaml
	c := cluster.Start(t, cluster.Options{Hosts: 2, SegmentsPerHost: 2, Dialect: dialect.GP6})
	ctx := await.Context(t)
	s := launch(ctx, t, c, StackOptions{
		Binaries: bins, Config: configPath("testbed.yaml"), Dir: t.TempDir(), OTLPKeep: 10,
		CollectorArgs: []string{"--set=processors::snapshotdiff::time_constants=[6s]"},
	})
	api := dialAPI(t, s.API)

	// No segments: only the coordinator backend runs the statements.
	w, err := workload.Start(context.Background(), c, workload.Spec{Name: "e2e-smoothed-cpu", Kind: workload.CPU, Duration: untilStopped(t), Contents: []int{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop() })
	pid := w.CoordinatorPID()
	truth := sampleTruth([]int{pid}, 50*time.Millisecond)
	defer func() { _ = truth.Stop() }()
	poller := &apiPoller{api: api, states: map[int64][]*yagpcc.SessionState{}}
	pollCtx, stopPolling := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() { poller.poll(pollCtx, 300*time.Millisecond); close(polled) }()

	// Five time constants of snapshots that carry averages, plus a margin.
	var states []*yagpcc.SessionState
	waitFor(t, "five time constants of smoothed figures", func() (bool, string) {
		states = withProcAvg(poller.of(w.SessID()))
		if len(states) < 2 {
			return false, "no smoothed figures yet"
		}
		span := states[len(states)-1].GetTime().AsTime().Sub(states[0].GetTime().AsTime())
		return span >= 5*tau+4*time.Second, "covered " + span.String()
	})
	stopPolling()
	<-polled

	// The truth: the same update, over the /proc counter at each snapshot time.
	cpu := func(p groundtruth.Process) float64 { return p.CPUSeconds() }
	var want float64
	prevT := states[0].GetTime().AsTime()
	prevCPU, err := truth.cumulativeAt(prevT, []int{pid}, cpu)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range states[1:] {
		at := st.GetTime().AsTime()
		now, err := truth.cumulativeAt(at, []int{pid}, cpu)
		if err != nil {
			t.Fatal(err)
		}
		dt := at.Sub(prevT).Seconds()
		keep := math.Exp(-dt / tau.Seconds())
		want = want*keep + (now-prevCPU)/dt*(1-keep)
		prevT, prevCPU = at, now
	}
	last := states[len(states)-1]
	avgs := last.GetProcAvg()
	if len(avgs) != 1 || avgs[0].GetTimeConstantSeconds() != tau.Seconds() {
		t.Fatalf("proc_avg = %v, want one entry for the 10s time constant", avgs)
	}
	got := avgs[0].GetCpuCores()
	span := prevT.Sub(states[0].GetTime().AsTime())
	t.Logf("over %s (%d snapshots): smoothed CPU %.3f cores; the same average from /proc %.3f", span, len(states), got, want)
	if !within(got, want, 0.05) {
		t.Errorf("smoothed CPU = %.3f cores, want %.3f ± 5 %% (from /proc)", got, want)
	}
	// A burn starved below a quarter core would not show convergence to it.
	if want < 0.25 {
		t.Errorf("the burn got only %.3f cores", want)
	}
}

// withProcAvg keeps the states that carry smoothed figures.
func withProcAvg(states []*yagpcc.SessionState) []*yagpcc.SessionState {
	var out []*yagpcc.SessionState
	for _, st := range states {
		if len(st.GetProcAvg()) > 0 {
			out = append(out, st)
		}
	}
	return out
}
