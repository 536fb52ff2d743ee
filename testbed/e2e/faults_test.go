// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/testbed/groundtruth"
	"github.com/gpotel/gpotel/testbed/workload"
)

// testbedInterval is config/testbed.yaml's collection_interval.
const testbedInterval = 2 * time.Second

// sinkSnapshot is one snapshot as the OTLP sink received it: its time and
// gpotel.host.up per host.
type sinkSnapshot struct {
	at time.Time
	up map[string]int64
}

// sinkSnapshots lists the distinct snapshots among the requests, oldest first.
func sinkSnapshots(received [][]sinkSnapshot) []sinkSnapshot {
	byTime := map[time.Time]sinkSnapshot{}
	for _, req := range received {
		for _, s := range req {
			byTime[s.at] = s
		}
	}
	out := make([]sinkSnapshot, 0, len(byTime))
	for _, s := range byTime {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b sinkSnapshot) int { return a.at.Compare(b.at) })
	return out
}

// snapshotsOf finds the snapshot resources of every request the sink kept.
func snapshotsOf(sink *OTLPSink) [][]sinkSnapshot {
	var out [][]sinkSnapshot
	for _, md := range sink.Received() {
		var req []sinkSnapshot
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			rm := rms.At(i)
			if str(rm.Resource().Attributes(), pipeline.AttrResourceKind) != pipeline.KindSnapshot.String() {
				continue
			}
			pts, _ := points(rm, pipeline.MetricHostUp)
			snap := sinkSnapshot{up: map[string]int64{}}
			for j := 0; j < pts.Len(); j++ {
				p := pts.At(j)
				snap.at = p.Timestamp().AsTime()
				snap.up[str(p.Attributes(), pipeline.AttrHostName)] = p.IntValue()
			}
			if !snap.at.IsZero() {
				req = append(req, snap)
			}
		}
		out = append(out, req)
	}
	return out
}

// snapshotsBetween counts the snapshots in (from, to].
func snapshotsBetween(snaps []sinkSnapshot, from, to time.Time) int {
	n := 0
	for _, s := range snaps {
		if s.at.After(from) && !s.at.After(to) {
			n++
		}
	}
	return n
}

// largestGap is the longest time between consecutive snapshots in [from, to].
func largestGap(snaps []sinkSnapshot, from, to time.Time) (gap time.Duration, n int) {
	var prev time.Time
	for _, s := range snaps {
		if s.at.Before(from) || s.at.After(to) {
			continue
		}
		n++
		if !prev.IsZero() {
			gap = max(gap, s.at.Sub(prev))
		}
		prev = s.at
	}
	return gap, n
}

// closedSnapshot is a line of the collector's own metrics that counts the
// snapshots the processor closed with their figures (snapshotdiff_snapshots).
var closedSnapshot = regexp.MustCompile(`(?m)^otelcol_snapshotdiff_snapshots(?:_total)?(?:\{[^}]*\})? ([0-9.e+]+)$`)

// snapshotsClosed reads, from the collector's own Prometheus metrics, how
// many snapshots its processor has closed with their figures.
func snapshotsClosed(s *Stack) (int, error) {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + s.Telemetry + "/metrics")
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	total := 0.0
	found := false
	for _, m := range closedSnapshot.FindAllSubmatch(b, -1) {
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			return 0, err
		}
		total += v
		found = true
	}
	if !found {
		return 0, errors.New("no otelcol_snapshotdiff_snapshots in the collector's metrics")
	}
	return int(total), nil
}

// checkNoSnapshotLost: every snapshot the collector's processor closed
// reaches the OTLP sink, as one snapshot. The ticks are counted, not timed:
// on a loaded machine a tick may come late, but none may be lost.
func checkNoSnapshotLost(t *testing.T, s *Stack) {
	t.Helper()
	closed, err := snapshotsClosed(s)
	if err != nil {
		t.Fatalf("the collector's own metrics: %v", err)
	}
	waitFor(t, fmt.Sprintf("the %d snapshots the processor closed at the OTLP sink", closed), func() (bool, string) {
		got := len(sinkSnapshots(snapshotsOf(s.Sink)))
		return got >= closed, fmt.Sprintf("%d snapshots at the sink", got)
	})
}

// TestAgentFrozenForThreeIntervals stops one agent with SIGSTOP for three
// collection intervals and resumes it: the collector keeps its ticks, marks
// that host down and its sessions partial, and is exact again afterwards.
func TestAgentFrozenForThreeIntervals(t *testing.T) {
	needBinaries(t)
	s := startStack(t)
	api := dialAPI(t, s.API)
	ctx := context.Background()
	w, err := workload.Start(ctx, s.Cluster, workload.Spec{Name: "freeze-cpu", Kind: workload.CPU, Duration: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop() })
	truth := sampleTruth(w.AllPids(), 50*time.Millisecond)
	stopTruth := sync.OnceValue(truth.Stop)
	t.Cleanup(func() { _ = stopTruth() })
	waitFor(t, "the session shows complete", func() (bool, string) {
		st, err := stateOf(ctx, api, w.SessID())
		sys := st.GetLastMetrics().GetSystemStat()
		return err == nil && st != nil && sys.GetHosts() == 3 && !sys.GetPartial(), fmt.Sprintf("%v %v", err, sys)
	})

	const victim = "sdw2"
	const frozen = 3 * testbedInterval
	pid := s.Agents[victim].PID()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozeAt := time.Now()
	var partialSeen bool
	for time.Since(frozeAt) < frozen {
		if st, err := stateOf(ctx, api, w.SessID()); err == nil && st != nil && st.GetTime().AsTime().After(frozeAt) {
			partialSeen = partialSeen || st.GetLastMetrics().GetSystemStat().GetPartial()
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now()
	t.Logf("injected: SIGSTOP to %s's agent (pid %d) for %s, then SIGCONT", victim, pid, resumedAt.Sub(frozeAt).Round(time.Millisecond))

	// The resumed agent first works off the calls that timed out while it
	// was stopped; figures are compared from the third interval after SIGCONT.
	var firstComplete time.Time
	var exact *yagpcc.SessionState
	waitFor(t, "complete snapshots after the resume", func() (bool, string) {
		st, err := stateOf(ctx, api, w.SessID())
		if err != nil || st == nil {
			return false, fmt.Sprint(err)
		}
		sys := st.GetLastMetrics().GetSystemStat()
		at := st.GetTime().AsTime()
		if at.After(resumedAt) && !sys.GetPartial() && sys.GetHosts() == 3 {
			if firstComplete.IsZero() {
				firstComplete = at
			}
			if at.After(resumedAt.Add(3 * testbedInterval)) {
				exact = st
				return true, ""
			}
		}
		return false, fmt.Sprint(sys)
	})
	afterResume := firstComplete
	waitFor(t, "the OTLP sink holds the snapshots up to the resume", func() (bool, string) {
		snaps := sinkSnapshots(snapshotsOf(s.Sink))
		return len(snaps) > 0 && !snaps[len(snaps)-1].at.Before(afterResume), fmt.Sprintf("%d snapshots", len(snaps))
	})
	// The truth record must reach past the snapshot compared below; on a
	// loaded machine the sampler can lag it.
	waitFor(t, "ground truth past the compared snapshot", func() (bool, string) {
		_, last := truth.span()
		return last.After(exact.GetTime().AsTime()), fmt.Sprintf("last truth sample %s", last.Format("15:04:05.000"))
	})
	if err := stopTruth(); err != nil {
		t.Fatalf("ground truth: %v", err)
	}

	snaps := sinkSnapshots(snapshotsOf(s.Sink))
	gap, ticks := largestGap(snaps, frozeAt.Add(-testbedInterval), afterResume)
	down := 0
	for _, sn := range snaps {
		if !sn.at.Before(frozeAt.Add(testbedInterval)) && sn.at.Before(resumedAt) && sn.up[victim] == 0 {
			down++
		}
	}
	t.Logf("counts: %d snapshots from one interval before the freeze to the first complete one after it, largest gap %s; "+
		"%d during the freeze with %s down; partial seen in the API: %v", ticks, gap.Round(time.Millisecond), down, victim, partialSeen)
	checkNoSnapshotLost(t, s)
	if down < int(frozen/testbedInterval)-1 {
		t.Errorf("%d snapshots marked %s down during a %s freeze; want at least %d", down, victim, frozen, int(frozen/testbedInterval)-1)
	}
	if !partialSeen {
		t.Error("the API never reported the session partial while the agent was frozen")
	}

	cpu := func(p groundtruth.Process) float64 { return p.CPUSeconds() }
	got := exact.GetTotalMetrics().GetSystemStat()
	gotCPU := got.GetUserTimeSeconds() + got.GetKernelTimeSeconds()
	want := pointTruth(t, truth, exact, w.AllPids(), cpu)
	t.Logf("first complete snapshot %s after SIGCONT; at %s: lifetime CPU %.3f s, /proc %.3f s",
		firstComplete.Sub(resumedAt).Round(time.Millisecond), exact.GetTime().AsTime().Format("15:04:05.000"), gotCPU, want)
	if !within(gotCPU, want, tolerance) {
		t.Errorf("lifetime CPU after the resume %.3f s, /proc %.3f s: off by more than %.0f%%", gotCPU, want, tolerance*100)
	}
}

// TestCollectorKilledAndRestarted kills the collector with SIGKILL and
// starts it again on the same API address: the API serves the workload's
// session from the restarted collector's first or second snapshot, the
// windows fill again, and the lifetime figures continue (they come from /proc).
// What is lost is the in-memory snapshot ring: windows restart from a zero span.
func TestCollectorKilledAndRestarted(t *testing.T) {
	needBinaries(t)
	s := startStack(t)
	api := dialAPI(t, s.API)
	ctx := context.Background()
	w, err := workload.Start(ctx, s.Cluster, workload.Spec{Name: "kill-cpu", Kind: workload.CPU, Duration: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop() })
	var before *yagpcc.SessionState
	waitFor(t, "the session's window is full", func() (bool, string) {
		st, err := stateOf(ctx, api, w.SessID())
		sys := st.GetLastMetrics().GetSystemStat()
		before = st
		return err == nil && st != nil && sys.GetWindowSeconds() >= lastWindow.Seconds()-testbedInterval.Seconds(), fmt.Sprintf("%v %v", err, sys)
	})

	if err := s.Collector.Kill(); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	s.opts.APIEndpoint = s.API
	restartCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	startedAt := time.Now()
	if err := s.startCollector(restartCtx); err != nil {
		t.Fatal(err)
	}
	t.Logf("injected: SIGKILL to the collector at %s, restarted on %s", killedAt.Format("15:04:05.000"), s.API)

	var first *yagpcc.SessionState
	// The snapshots of the restarted collector at the sink when the API
	// last answered without the session: the sink gets them after the
	// API does, so this never counts one the API had not yet seen.
	unservedAfter := 0
	waitFor(t, "the restarted API serves the session", func() (bool, string) {
		atSink := snapshotsBetween(sinkSnapshots(snapshotsOf(s.Sink)), killedAt, time.Now())
		st, err := stateOf(ctx, api, w.SessID())
		first = st
		if err == nil && st == nil {
			unservedAfter = atSink
		}
		return err == nil && st != nil, fmt.Sprint(err)
	})
	servedAfter := time.Since(startedAt)
	var firstSnapshot time.Time
	waitFor(t, "the sink has the restarted collector's snapshots", func() (bool, string) {
		for _, sn := range sinkSnapshots(snapshotsOf(s.Sink)) {
			if sn.at.After(killedAt) {
				firstSnapshot = sn.at
				return true, ""
			}
		}
		return false, "none after the kill"
	})
	at := first.GetTime().AsTime()
	t.Logf("the API served the session %s after the restart began, from the snapshot at %s (the restarted collector's first: %s), window %.1fs",
		servedAfter.Round(time.Millisecond), at.Format("15:04:05.000"), firstSnapshot.Format("15:04:05.000"), first.GetLastMetrics().GetSystemStat().GetWindowSeconds())
	// Served from the restarted collector's first or second snapshot: the
	// API never answers without the session once two have gone out.
	if unservedAfter >= 2 {
		t.Errorf("the API answered without the session after the restarted collector had sent %d snapshots: want it served from the first or second", unservedAfter)
	}

	var spans []string
	waitFor(t, "the window fills again", func() (bool, string) {
		st, err := stateOf(ctx, api, w.SessID())
		if err != nil || st == nil {
			return false, fmt.Sprint(err)
		}
		span := st.GetLastMetrics().GetSystemStat().GetWindowSeconds()
		spans = append(spans, fmt.Sprintf("%.0f", span))
		return span >= lastWindow.Seconds()-testbedInterval.Seconds(), fmt.Sprintf("span %.1fs", span)
	})
	t.Logf("window spans seen while refilling: %s", strings.Join(slices.Compact(spans), " "))
	b, a := before.GetTotalMetrics().GetSystemStat(), first.GetTotalMetrics().GetSystemStat()
	t.Logf("lifetime CPU before the kill %.2f s, after the restart %.2f s", b.GetRunningTimeSeconds(), a.GetRunningTimeSeconds())
	if a.GetRunningTimeSeconds() < b.GetRunningTimeSeconds() {
		t.Errorf("lifetime CPU went back across the restart: %.2f then %.2f s", b.GetRunningTimeSeconds(), a.GetRunningTimeSeconds())
	}
}
