// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/groundtruth"
	"github.com/gpotel/gpotel/testbed/workload"
)

// churnWindow is the config/testbed.yaml window the churn is measured over.
const churnWindow = 30 * time.Second

const (
	// churnDuration is how long the churn workloads run.
	churnDuration = 12 * time.Second
	// recordsTail is how long after the churn a snapshot must be (two
	// scrapes of config/testbed.yaml) for the last exits' records to be in.
	recordsTail = 5 * time.Second
)

// TestExitedBackendsAreCounted runs connection churn (every backend lives
// far less than a collection interval) across the coordinator and the
// segments, and compares gpotel's session-independent CPU total for a window
// (gpotel.cluster.cpu.time: exited plus live) with the postmasters' own
// account: each postmaster's cutime+cstime grows by exactly the CPU of the
// children it reaped, plus what its live children used. Without exit records
// the same churn is undercounted.
func TestExitedBackendsAreCounted(t *testing.T) {
	needBinaries(t)
	c := cluster.Start(t, cluster.Options{Hosts: 2, SegmentsPerHost: 2, Dialect: dialect.GP6})

	with := measureChurn(t, c, true)
	t.Logf("with exit records:    gpotel %.3f s (of which unrecorded %.3f s), postmasters %.3f s (reaped %.3f s + live children %.3f s) over %.1f s, ratio %.3f; "+
		"the kernel's exit records of the reaped children, read from the agents: %.3f s (%.3f of reaped); smoothed cluster CPU %.4f cores, postmasters' %.4f, ratio %.3f",
		with.gpotel, with.unrecorded, with.truth(), with.reaped, with.live, with.span, with.gpotel/with.truth(), with.records, with.records/with.reaped,
		with.smoothed, with.smoothedTruth, with.smoothed/with.smoothedTruth)
	without := measureChurn(t, c, false)
	t.Logf("without exit records: gpotel %.3f s, postmasters %.3f s (reaped %.3f s + live children %.3f s) over %.1f s, ratio %.3f",
		without.gpotel, without.truth(), without.reaped, without.live, without.span, without.gpotel/without.truth())

	// The whole: within 5 % of the postmasters' own account.
	if math.Abs(with.gpotel-with.truth()) > tolerance*with.truth() {
		t.Errorf("with exit records gpotel's window total %.3f s is not within %.0f %% of the postmasters' %.3f s", with.gpotel, tolerance*100, with.truth())
	}
	// The unrecorded share comes from those same cutime/cstime, so the
	// records are checked on their own: the pipeline loses and duplicates
	// none (gpotel less its unrecorded share is the live children plus the
	// kernel's exit records), and they carry most of the churn.
	if got, want := with.gpotel-with.unrecorded, with.live+with.records; math.Abs(got-want) > tolerance*want {
		t.Errorf("with exit records gpotel's window total less unrecorded %.3f s is not within %.0f %% of live %.3f s + exit records %.3f s", got, tolerance*100, with.live, with.records)
	}
	if with.records < (1-maxUnrecordedShare)*with.reaped {
		t.Errorf("the kernel's exit records hold %.3f s, less than %.0f %% of the reaped children's %.3f s: they should carry most of it", with.records, (1-maxUnrecordedShare)*100, with.reaped)
	}
	// The teardown after do_exit is never free: a receiver that reports no
	// unrecorded CPU has lost the postmasters' accounts.
	if with.unrecorded <= 0 || with.unrecorded > maxUnrecordedShare*with.reaped {
		t.Errorf("unrecorded %.3f s, want more than 0 and at most %.0f %% of the reaped children's %.3f s", with.unrecorded, maxUnrecordedShare*100, with.reaped)
	}
	// The smoothed cluster line (gpotel-top's header, GetClusterTop's
	// cluster) counts the same CPU: gpotel's average against the same
	// average of the postmasters' account at the same snapshot times.
	if math.Abs(with.smoothed-with.smoothedTruth) > tolerance*with.smoothedTruth {
		t.Errorf("with exit records gpotel's smoothed cluster CPU %.4f cores is not within %.0f %% of the postmasters' %.4f cores averaged the same way",
			with.smoothed, tolerance*100, with.smoothedTruth)
	}
	if without.gpotel > 0.7*without.truth() {
		t.Errorf("without exit records gpotel counted %.3f s of %.3f s: the churn should be undercounted, so the test would not show what exit records add",
			without.gpotel, without.truth())
	}
}

// maxUnrecordedShare bounds the postmasters' unrecorded CPU, and so from
// below what the exit records carry of the reaped children's CPU. A
// taskstats exit record is taken inside do_exit before the kernel tears the
// process down (exit_mm, closing its files); the parent's cutime+cstime get
// that teardown at reap time. For backends that live a few milliseconds the
// teardown's share depends on the kernel and the virtualisation (page-table
// teardown under a hypervisor costs more); docs/performance.md lists it per
// machine.
const maxUnrecordedShare = 0.5

// churnResult is one window's CPU seconds by gpotel, by the postmasters, and
// by the kernel's exit records of the postmasters' children; and the
// smoothed cluster CPU (cores) by gpotel and by the postmasters.
type churnResult struct {
	gpotel, unrecorded, reaped, live, span, records float64
	smoothed, smoothedTruth                         float64
}

func (r churnResult) truth() float64 { return r.reaped + r.live }

// measureChurn starts a stack (exit records on or off), runs the churn once
// gpotel keeps an account of every postmaster, and reads the first
// snapshot after it whose window covers it all.
func measureChurn(t *testing.T, c *cluster.Cluster, exitRecords bool) churnResult {
	t.Helper()
	ctx := await.Context(t)
	s, err := Launch(ctx, c, StackOptions{Binaries: bins, Config: configPath("testbed.yaml"), Dir: t.TempDir(), OTLPKeep: 400,
		CollectorArgs: []string{fmt.Sprintf("--set=receivers::gpsession::exit_records=%t", exitRecords)}})
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	defer func() {
		// Always: the comparisons come after this stack is gone, so a
		// failure could not ask the agents any more.
		logExitAccounting(t, s)
		if t.Failed() {
			t.Logf("collector log tail:\n%s", s.Collector.LogTail(6000))
		}
		if err := s.Close(); err != nil {
			t.Errorf("stack close: %v", err)
		}
	}()

	sampler := startPostmasterSampler(t, c)
	defer sampler.stop()
	// The churn starts when every postmaster's reaped children count (with
	// exit records: gpotel reports each one's unrecorded CPU, so it holds
	// its account and takes its children's records), and when a window
	// ending after the churn and its records would begin after the
	// sampler's first sample.
	lead := churnWindow - churnDuration - recordsTail
	waitFor(t, "an account of every postmaster, and samples for the window", func() (bool, string) {
		if exitRecords {
			if got, want := accountedSegments(s.Sink.Received()), c.Instances(); len(got) != len(want) {
				return false, fmt.Sprintf("gpotel holds the accounts of the postmasters of segments %v, not yet of all %d instances", got, len(want))
			}
		}
		if since := time.Since(sampler.first()); since < lead {
			return false, fmt.Sprintf("the sampler has run %v, a window ending after the churn would begin %v before it", since.Round(time.Second), (lead - since).Round(time.Second))
		}
		return true, ""
	})
	churnStart := time.Now()
	var churns []*workload.Session
	for i := range 3 {
		w, err := workload.Start(context.Background(), c, workload.Spec{Name: fmt.Sprintf("e2e-churn-%d", i), Kind: workload.Churn,
			Duration: churnDuration, Interval: 20 * time.Millisecond})
		if err != nil {
			t.Fatalf("churn workload: %v", err)
		}
		churns = append(churns, w)
	}
	for _, w := range churns {
		if err := w.Wait(); err != nil {
			t.Fatalf("churn workload: %v", err)
		}
	}
	churnEnd := time.Now()

	var res churnResult
	waitFor(t, fmt.Sprintf("a snapshot %v after the churn", recordsTail), func() (bool, string) {
		at, span, cpu, unrecorded, ok := clusterCPUFrom(s.Sink.Received(), churnWindow, churnEnd.Add(recordsTail))
		if !ok {
			return false, "no snapshot with cluster figures yet after the churn ended + " + recordsTail.String()
		}
		from := at.Add(-time.Duration(span * float64(time.Second)))
		if !from.Before(churnStart) {
			t.Fatalf("the first snapshot %s after the churn's records has a window from %s, after the churn began at %s: the churn ran longer than the window allows",
				at.Format(time.TimeOnly), from.Format(time.TimeOnly), churnStart.Format(time.TimeOnly))
		}
		reaped, live, err := sampler.between(from, at)
		if err != nil {
			t.Fatalf("postmaster samples for the window: %v", err)
		}
		res = churnResult{gpotel: cpu, unrecorded: unrecorded, reaped: reaped, live: live, span: span}
		if res.records, err = exitRecordsCPU(s, sampler.postmasters, from, at); err != nil {
			return false, err.Error()
		}
		if res.smoothed, res.smoothedTruth, err = smoothedAgainstTruth(s.Sink.Received(), sampler, at); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	return res
}

// exitRecordsCPU sums, straight from the agents (each keeps the exits of
// its own host's postmasters' children), the CPU of the exit records of the
// postmasters' children received in (from, to].
func exitRecordsCPU(s *Stack, postmasters []int, from, to time.Time) (float64, error) {
	parents := map[int64]bool{}
	for _, pm := range postmasters {
		parents[int64(pm)] = true
	}
	// Every host's agent, each for its own host's postmasters' children.
	var total float64
	for _, addr := range s.AgentEndpoints {
		cpu, err := agentExitRecordsCPU(addr, parents, from, to)
		if err != nil {
			return 0, err
		}
		total += cpu
	}
	return total, nil
}

// agentExitRecordsCPU sums the CPU of the exit records one agent holds of
// the children of parents that exited between from and to.
func agentExitRecordsCPU(addr string, parents map[int64]bool, from, to time.Time) (float64, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close() }()
	client := gpotelv1.NewTaskStatsClient(conn)
	var total float64
	req := &gpotelv1.GetExitRecordsRequest{}
	for {
		resp, err := client.GetExitRecords(context.Background(), req)
		if err != nil {
			return 0, err
		}
		for _, r := range resp.GetRecords() {
			at := time.Unix(0, r.GetExitTimeUnixNano())
			if parents[r.GetStats().GetPpid()] && at.After(from) && !at.After(to) {
				total += float64(r.GetStats().GetCpuRunVirtualNs()) / 1e9
			}
		}
		if !resp.GetMore() {
			return total, nil
		}
		req = &gpotelv1.GetExitRecordsRequest{Epoch: resp.GetEpoch(), Cursor: resp.GetNextCursor()}
	}
}

// logExitAccounting logs what each agent lost of the exit records (buffer
// full or too old; lost by the kernel when its listener fell behind), so a
// failed comparison says which side lost them.
func logExitAccounting(t *testing.T, s *Stack) {
	for host, addr := range s.AgentEndpoints {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Logf("agent %s: %v", host, err)
			continue
		}
		resp, err := gpotelv1.NewTaskStatsClient(conn).GetExitRecords(context.Background(), &gpotelv1.GetExitRecordsRequest{})
		_ = conn.Close()
		if err != nil {
			t.Logf("agent %s: GetExitRecords: %v", host, err)
			continue
		}
		a := resp.GetAccounting()
		t.Logf("agent %s: exit records dropped %d, exit messages skipped or lost by the kernel %d", host, a.GetExitRecordsDropped(), a.GetExitMessagesSkipped())
	}
}

// clusterCPUFrom finds the earliest snapshot resource at or after notBefore
// in the OTLP output and returns its time, the window's span,
// gpotel.cluster.cpu.time and gpotel.unrecorded.cpu.time (user+system,
// every segment).
func clusterCPUFrom(batches []pmetric.Metrics, window time.Duration, notBefore time.Time) (time.Time, float64, float64, float64, bool) {
	var best time.Time
	var span, cpu, unrecorded float64
	found := false
	for _, md := range batches {
		rms := md.ResourceMetrics()
		for i := range rms.Len() {
			if k, _ := rms.At(i).Resource().Attributes().Get(pipeline.AttrResourceKind); k.Str() != pipeline.KindSnapshot.String() {
				continue
			}
			var at time.Time
			var sp, total, unrec float64
			var hasSpan, hasCPU bool
			sms := rms.At(i).ScopeMetrics()
			for j := range sms.Len() {
				ms := sms.At(j).Metrics()
				for k := range ms.Len() {
					m := ms.At(k)
					if m.Type() != pmetric.MetricTypeGauge {
						continue
					}
					dps := m.Gauge().DataPoints()
					for d := range dps.Len() {
						dp := dps.At(d)
						if w, _ := dp.Attributes().Get(pipeline.AttrWindow); w.Str() != window.String() {
							continue
						}
						switch m.Name() {
						case pipeline.ClusterMetric(pipeline.MetricSessionWindowSpan):
							sp, hasSpan, at = dp.DoubleValue(), true, dp.Timestamp().AsTime()
						case pipeline.ClusterMetric(pipeline.MetricSessionCPUTime):
							total += dp.DoubleValue()
							hasCPU = true
						case pipeline.MetricUnrecordedCPUTime:
							unrec += dp.DoubleValue()
						}
					}
				}
			}
			if hasSpan && hasCPU && !at.Before(notBefore) && (!found || at.Before(best)) {
				best, span, cpu, unrecorded, found = at, sp, total, unrec, true
			}
		}
	}
	return best, span, cpu, unrecorded, found
}

// accountedSegments lists the segments whose postmasters gpotel holds a
// reaped account of in the newest snapshot: those with a
// gpotel.unrecorded.cpu.time point.
func accountedSegments(batches []pmetric.Metrics) []int64 {
	var newest time.Time
	var segs []int64
	for _, md := range batches {
		pipelinetest.Points(md, pipeline.MetricUnrecordedCPUTime, func(_ pcommon.Map, dp pmetric.NumberDataPoint) {
			at := dp.Timestamp().AsTime()
			if at.After(newest) {
				newest, segs = at, nil
			}
			seg, _ := dp.Attributes().Get(pipeline.AttrSegmentID)
			if at.Equal(newest) && !slices.Contains(segs, seg.Int()) {
				segs = append(segs, seg.Int())
			}
		})
	}
	slices.Sort(segs)
	return segs
}

// smoothedAgainstTruth returns gpotel's smoothed cluster CPU at its shortest
// time constant in the snapshot at `at`, and what the same average of the
// postmasters' account gives. An exponentially weighted average is linear:
// from the first snapshot the sampler covers, gpotel's value there decays
// and every later interval adds its rate weighted by 1 - e^(-dt/tau), so the
// postmasters' steps over the same intervals give the expected value.
func smoothedAgainstTruth(batches []pmetric.Metrics, sampler *postmasterSampler, at time.Time) (got, want float64, err error) {
	series, tau := clusterSmoothedSeries(batches)
	if tau <= 0 {
		return 0, 0, errors.New("no smoothed cluster CPU in the output")
	}
	first := sampler.first()
	start := slices.IndexFunc(series, func(p smoothedPoint) bool { return !p.at.Before(first) })
	end := slices.IndexFunc(series, func(p smoothedPoint) bool { return p.at.Equal(at) })
	if start < 0 || end < 0 || end <= start {
		return 0, 0, fmt.Errorf("snapshot %s or one after the sampler's start %s not in the output", at.Format(time.TimeOnly), first.Format(time.TimeOnly))
	}
	want = series[start].cores
	for i := start + 1; i <= end; i++ {
		dt := series[i].at.Sub(series[i-1].at).Seconds()
		reaped, live, err := sampler.between(series[i-1].at, series[i].at)
		if err != nil {
			return 0, 0, err
		}
		keep := math.Exp(-dt / tau.Seconds())
		want = want*keep + (reaped+live)/dt*(1-keep)
	}
	return series[end].cores, want, nil
}

type smoothedPoint struct {
	at    time.Time
	cores float64
}

// clusterSmoothedSeries is gpotel.cluster.cpu.usage.smoothed at the shortest
// time constant, one point per snapshot, oldest first.
func clusterSmoothedSeries(batches []pmetric.Metrics) ([]smoothedPoint, time.Duration) {
	byTau := map[time.Duration][]smoothedPoint{}
	for _, md := range batches {
		rms := md.ResourceMetrics()
		for i := range rms.Len() {
			if k, _ := rms.At(i).Resource().Attributes().Get(pipeline.AttrResourceKind); k.Str() != pipeline.KindSnapshot.String() {
				continue
			}
			sms := rms.At(i).ScopeMetrics()
			for j := range sms.Len() {
				ms := sms.At(j).Metrics()
				for k := range ms.Len() {
					if ms.At(k).Name() != pipeline.MetricClusterCPUUsageSmoothed {
						continue
					}
					dps := ms.At(k).Gauge().DataPoints()
					for d := range dps.Len() {
						tc, _ := dps.At(d).Attributes().Get(pipeline.AttrTimeConstant)
						if tau, err := time.ParseDuration(tc.Str()); err == nil {
							byTau[tau] = append(byTau[tau], smoothedPoint{dps.At(d).Timestamp().AsTime(), dps.At(d).DoubleValue()})
						}
					}
				}
			}
		}
	}
	if len(byTau) == 0 {
		return nil, 0
	}
	tau := slices.Min(slices.Collect(maps.Keys(byTau)))
	series := byTau[tau]
	slices.SortFunc(series, func(a, b smoothedPoint) int { return a.at.Compare(b.at) })
	return series, tau
}

// postmasterSampler reads, every 50 ms, every postmaster's cutime+cstime
// (what its reaped children used) and its live children's utime+stime.
type postmasterSampler struct {
	postmasters []int
	clk         float64
	mu          sync.Mutex
	samples     []postmasterSample
	done        chan struct{}
	stopped     chan struct{}
}

type postmasterSample struct {
	at           time.Time
	reaped, live float64
}

func startPostmasterSampler(t *testing.T, c *cluster.Cluster) *postmasterSampler {
	t.Helper()
	s := &postmasterSampler{clk: float64(groundtruth.ClockTicks()), done: make(chan struct{}), stopped: make(chan struct{})}
	for _, in := range c.Instances() {
		s.postmasters = append(s.postmasters, in.PostmasterPID)
	}
	smp, err := s.read()
	if err != nil {
		t.Fatalf("postmaster sampler: %v", err)
	}
	s.samples = append(s.samples, smp)
	go func() {
		defer close(s.stopped)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if smp, err := s.read(); err == nil {
				s.mu.Lock()
				s.samples = append(s.samples, smp)
				s.mu.Unlock()
			}
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *postmasterSampler) stop() { close(s.done); <-s.stopped }

// first is when the sampler took its first sample.
func (s *postmasterSampler) first() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples[0].at
}

func (s *postmasterSampler) read() (postmasterSample, error) {
	smp := postmasterSample{at: time.Now()}
	for _, pm := range s.postmasters {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pm))
		if err != nil {
			return smp, err
		}
		cutime, cstime, err := childTimes(b)
		if err != nil {
			return smp, fmt.Errorf("postmaster %d: %w", pm, err)
		}
		smp.reaped += float64(cutime+cstime) / s.clk
		kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pm, pm))
		if err != nil {
			return smp, err
		}
		for _, f := range strings.Fields(string(kids)) {
			pid, _ := strconv.Atoi(f)
			if p, err := groundtruth.Read(pid); err == nil {
				smp.live += p.CPUSeconds()
			}
		}
	}
	return smp, nil
}

// childTimes returns stat fields 16 and 17 (cutime, cstime), in clock ticks.
func childTimes(stat []byte) (int64, int64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("stat without comm: %q", stat)
	}
	f := strings.Fields(string(stat[i+1:])) // f[0] is field 3 (state)
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("stat with %d fields after comm", len(f))
	}
	cu, err1 := strconv.ParseInt(f[13], 10, 64)
	cs, err2 := strconv.ParseInt(f[14], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("cutime/cstime %q %q", f[13], f[14])
	}
	return cu, cs, nil
}

// between is the growth of the reaped and the live children's CPU from the
// last sample at or before from to the last at or before to.
func (s *postmasterSampler) between(from, to time.Time) (reaped, live float64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := func(t time.Time) (postmasterSample, bool) {
		var best postmasterSample
		ok := false
		for _, smp := range s.samples {
			if smp.at.After(t) {
				break
			}
			best, ok = smp, true
		}
		return best, ok
	}
	a, ok1 := at(from)
	b, ok2 := at(to)
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("no postmaster sample at %s or %s", from.Format(time.TimeOnly), to.Format(time.TimeOnly))
	}
	// A child reaped in between moves its CPU from live to reaped: the sum is
	// what all children used, and each part alone is reported for the log.
	return b.reaped - a.reaped, b.live - a.live, nil
}
