// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"math"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
)

const smoothTau = 10 * time.Second

func smoothingConfig() *Config {
	return &Config{Windows: []time.Duration{time.Minute}, TimeConstants: []time.Duration{smoothTau, time.Minute}}
}

// burner is one process on sdw1 of session 7 that burns one core, reads
// 1 MB/s and holds 100 MB, from its birth at 0.
func burner(sec float64) pipelinetest.Process {
	p := proc("sdw1", 0, 7, 4242, 0, sec, int64(sec*1e6))
	p.RSS = 100e6
	return p
}

// smoothedAt feeds a burner snapshot at each of the times and returns the
// last output.
func smoothedAt(t *testing.T, times []float64) pmetric.Metrics {
	t.Helper()
	p, sink := newTestProcessor(t, smoothingConfig())
	var snaps []pipelinetest.Snapshot
	for _, sec := range times {
		snaps = append(snaps, snap(sec, nil, []int64{7}, burner(sec)))
	}
	return feed(t, p, sink, snaps...)
}

func seconds(from, to, step float64) []float64 {
	var ts []float64
	for s := from; s <= to+1e-9; s += step {
		ts = append(ts, s)
	}
	return ts
}

func TestSmoothedCPUOfOneCoreBurnConvergesAfterFiveTimeConstants(t *testing.T) {
	md := smoothedAt(t, seconds(0, 50, 1))
	got := figure(t, md, 7, pipeline.MetricSessionCPUUsageSmoothed, pipeline.AttrTimeConstant, "10s")
	if math.Abs(got-1) > 0.05 {
		t.Errorf("session smoothed CPU after 5 time constants = %.4f cores, want 1.0 ± 5 %%", got)
	}
	// Starting from 0, each second moves it 1 - e^(-1/10) of the way.
	if want := 1 - math.Exp(-5); math.Abs(got-want) > 1e-9 {
		t.Errorf("session smoothed CPU = %.12f, want 1 - e^-5 = %.12f", got, want)
	}
	if got := figure(t, md, 7, pipeline.MetricSessionDiskIORateSmoothed, pipeline.AttrTimeConstant, "10s", pipeline.AttrDirection, pipeline.DirectionRead); math.Abs(got-1e6) > 0.05e6 {
		t.Errorf("session smoothed read rate = %.0f B/s, want 1e6 ± 5 %%", got)
	}
	if got := figure(t, md, 7, pipeline.MetricSessionMemoryUsageSmoothed, pipeline.AttrTimeConstant, "10s"); math.Abs(got-100e6) > 5e6 {
		t.Errorf("session smoothed memory = %.0f B, want 100e6 ± 5 %%", got)
	}
	host := smoothedPoint(t, md, pipeline.MetricHostCPUUsageSmoothed, "sdw1", "10s")
	cluster := smoothedPoint(t, md, pipeline.MetricClusterCPUUsageSmoothed, "", "10s")
	if math.Abs(host-got) > 1e-9 || cluster != host {
		t.Errorf("host sdw1 = %.6f, cluster = %.6f cores; want both %.6f like the session (the only process)", host, cluster, got)
	}
	if slow := figure(t, md, 7, pipeline.MetricSessionCPUUsageSmoothed, pipeline.AttrTimeConstant, "1m"); math.Abs(slow-(1-math.Exp(-50.0/60))) > 1e-9 {
		t.Errorf("1m smoothed CPU after 50 s = %.6f, want 1 - e^(-50/60)", slow)
	}
}

func TestMissedAndLateTicksDoNotBiasSmoothed(t *testing.T) {
	every := smoothedAt(t, seconds(0, 30, 1))
	irregular := smoothedAt(t, []float64{0, 1, 2, 5, 5.5, 9, 10, 17.25, 18, 30})
	for _, tc := range []string{"10s", "1m"} {
		a := figure(t, every, 7, pipeline.MetricSessionCPUUsageSmoothed, pipeline.AttrTimeConstant, tc)
		b := figure(t, irregular, 7, pipeline.MetricSessionCPUUsageSmoothed, pipeline.AttrTimeConstant, tc)
		if math.Abs(a-b) > 1e-9 {
			t.Errorf("%s: smoothed CPU with every tick = %.12f, with missed and late ticks = %.12f; a steady rate must give the same", tc, a, b)
		}
		a = smoothedPoint(t, every, pipeline.MetricHostCPUUsageSmoothed, "sdw1", tc)
		b = smoothedPoint(t, irregular, pipeline.MetricHostCPUUsageSmoothed, "sdw1", tc)
		if math.Abs(a-b) > 1e-9 {
			t.Errorf("%s: host smoothed CPU %.12f vs %.12f", tc, a, b)
		}
	}
}

func TestSilentHostHoldsItsAveragesAndCatchesUp(t *testing.T) {
	p, sink := newTestProcessor(t, smoothingConfig())
	var snaps []pipelinetest.Snapshot
	for sec := 0.0; sec <= 20; sec++ {
		if sec >= 8 && sec <= 11 {
			snaps = append(snaps, snap(sec, []string{"sdw1"}, []int64{7}))
			continue
		}
		snaps = append(snaps, snap(sec, nil, []int64{7}, burner(sec)))
	}
	md := feed(t, p, sink, snaps[:9]...)
	before := smoothedPoint(t, md, pipeline.MetricHostCPUUsageSmoothed, "sdw1", "10s")
	md = feed(t, p, sink, snaps[9:11]...)
	if held := smoothedPoint(t, md, pipeline.MetricHostCPUUsageSmoothed, "sdw1", "10s"); held != before {
		t.Errorf("silent host's smoothed CPU moved from %.6f to %.6f; not answering is not idle", before, held)
	}
	md = feed(t, p, sink, snaps[11:]...)
	got := smoothedPoint(t, md, pipeline.MetricHostCPUUsageSmoothed, "sdw1", "10s")
	if want := 1 - math.Exp(-2); math.Abs(got-want) > 1e-9 {
		t.Errorf("host smoothed CPU after catching up = %.12f, want %.12f as if it had always answered", got, want)
	}
}

func TestProcessFirstSeenLongAfterItsBirthAddsNoSpike(t *testing.T) {
	p, sink := newTestProcessor(t, smoothingConfig())
	old := proc("sdw2", 1, 8, 99, -1000, 900, 0) // 900 s of CPU before we ever saw it
	var snaps []pipelinetest.Snapshot
	for sec := 0.0; sec <= 3; sec++ {
		snaps = append(snaps, snap(sec, nil, []int64{7, 8}, burner(sec)))
	}
	snaps = append(snaps, snap(4, nil, []int64{7, 8}, burner(4), old))
	md := feed(t, p, sink, snaps...)
	if got := figure(t, md, 8, pipeline.MetricSessionCPUUsageSmoothed, pipeline.AttrTimeConstant, "10s"); got != 0 {
		t.Errorf("session 8 smoothed CPU = %.3f cores right after its old process was first seen; want 0 (its past is not this interval)", got)
	}
	old.CPUUser++
	md = feed(t, p, sink, snap(5, nil, []int64{7, 8}, burner(5), old))
	if got, want := figure(t, md, 8, pipeline.MetricSessionCPUUsageSmoothed, pipeline.AttrTimeConstant, "10s"), 1-math.Exp(-0.1); math.Abs(got-want) > 1e-9 {
		t.Errorf("session 8 smoothed CPU after one busy second = %.6f, want %.6f", got, want)
	}
}

func TestSmoothingOffEmitsNoSmoothedMetrics(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	md := feed(t, p, sink, snap(0, nil, []int64{7}, burner(0)), snap(1, nil, []int64{7}, burner(1)))
	if _, err := lookupFigure(md, 7, pipeline.MetricSessionCPUUsageSmoothed, pipeline.AttrTimeConstant, "10s"); err == nil {
		t.Error("smoothed CPU emitted with no time_constants configured")
	}
}

// smoothedPoint reads a host (host != "") or cluster smoothed figure from the
// snapshot resource.
func smoothedPoint(t *testing.T, md pmetric.Metrics, metric, host, constant string) float64 {
	t.Helper()
	attrs := []string{pipeline.AttrTimeConstant, constant}
	if host != "" {
		attrs = append([]string{pipeline.AttrHostName, host}, attrs...)
	}
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		if k, _ := rms.At(i).Resource().Attributes().Get(pipeline.AttrResourceKind); k.Str() != pipeline.KindSnapshot.String() {
			continue
		}
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				if ms.At(k).Name() != metric {
					continue
				}
				dps := ms.At(k).Gauge().DataPoints()
				for d := range dps.Len() {
					if attrsEqual(dps.At(d).Attributes(), attrs) {
						return dps.At(d).DoubleValue()
					}
				}
			}
		}
	}
	t.Fatalf("no %s point with %v on the snapshot resource", metric, attrs)
	return 0
}

// Every cluster figure counts the same CPU: the smoothed host and cluster
// rates take the exited processes no scrape saw and the postmasters'
// unrecorded CPU, as the windowed cluster total does. One core on sdw1: a
// quarter from a live backend, a quarter from short backends seen only by
// their exit records, half from the postmaster's unrecorded share. A
// scrape's snapshot time comes after its catalog read, so a backend born in
// between is not seen by that scrape and may exit before the next: born
// before the previous snapshot, yet in no earlier interval.
func TestSmoothedHostAndClusterCountExitRecordsAndUnrecordedCPU(t *testing.T) {
	p, sink := newTestProcessor(t, smoothingConfig())
	var snaps []pipelinetest.Snapshot
	for i, sec := range seconds(0, 60, 1) {
		live := proc("sdw1", 0, 7, 4242, 0, sec/4, 0)
		ghost := proc("sdw1", 0, 0, int64(10000+i), sec-1.1, 0.25, 0)
		ghost.Exited, ghost.Unattributed = true, true
		// The receiver's account starts at its first reading, a scrape before its first point.
		pm := proc("sdw1", 0, 0, 50, -100, sec/2, 0)
		pm.Unrecorded = true
		snaps = append(snaps, snap(sec, nil, []int64{7}, live, ghost, pm))
	}
	md := feed(t, p, sink, snaps...)
	// After six time constants the average is within e^-6 of the rate.
	for _, metric := range []struct {
		name  string
		attrs []string
	}{
		{pipeline.MetricHostCPUUsageSmoothed, []string{pipeline.AttrHostName, "sdw1", pipeline.AttrTimeConstant, "10s"}},
		{pipeline.MetricClusterCPUUsageSmoothed, []string{pipeline.AttrTimeConstant, "10s"}},
	} {
		if got := clusterFigure(t, md, metric.name, metric.attrs...); math.Abs(got-1) > 0.01 {
			t.Errorf("%s = %.4f cores, want 1 (live 0.25 + exit records 0.25 + unrecorded 0.5)", metric.name, got)
		}
	}
	if got := clusterFigure(t, md, pipeline.ClusterMetric(pipeline.MetricSessionCPUTime), pipeline.AttrWindow, "1m", pipeline.AttrCPUMode, pipeline.CPUModeUser); math.Abs(got-60) > 1 {
		t.Errorf("windowed cluster CPU %.3f s over 60 s, want 60", got)
	}
}

// A counter that goes down between two snapshots (the same process, so not
// pid reuse) adds nothing to a smoothed rate: the averages only decay, on
// the session, its host and the cluster, for CPU and each I/O direction;
// none turns negative.
func TestACounterThatGoesDownAddsNothingToTheSmoothedRates(t *testing.T) {
	p, sink := newTestProcessor(t, smoothingConfig())
	worker := func(cpuUser, cpuSys float64, read, written int64) pipelinetest.Process {
		w := proc("sdw1", 0, 7, 4242, 0, cpuUser, read)
		w.CPUSystem, w.WriteBytes, w.RSS = cpuSys, written, 100e6
		return w
	}
	var snaps []pipelinetest.Snapshot
	for _, sec := range seconds(0, 10, 1) {
		snaps = append(snaps, snap(sec, nil, []int64{7}, worker(sec/2, sec/2, int64(sec*1e6), int64(sec*1e6))))
	}
	before := feed(t, p, sink, snaps...)
	// At 11 s every counter reads half of what it read at 10 s.
	after := feed(t, p, sink, snap(11, nil, []int64{7}, worker(2.5, 2.5, 5e6, 5e6)))
	keep := math.Exp(-1 / smoothTau.Seconds())
	type point struct {
		metric, host string
		attrs        []string
	}
	for _, pt := range []point{
		{pipeline.MetricHostCPUUsageSmoothed, "sdw1", nil},
		{pipeline.MetricClusterCPUUsageSmoothed, "", nil},
	} {
		was, is := smoothedPoint(t, before, pt.metric, pt.host, "10s"), smoothedPoint(t, after, pt.metric, pt.host, "10s")
		if math.Abs(is-was*keep) > 1e-9 {
			t.Errorf("%s %s: %.6f after the counters went down, want %.6f (only decayed from %.6f)", pt.metric, pt.host, is, was*keep, was)
		}
	}
	for _, pt := range []point{
		{pipeline.MetricSessionCPUUsageSmoothed, "", nil},
		{pipeline.MetricSessionDiskIORateSmoothed, "", []string{pipeline.AttrDirection, pipeline.DirectionRead}},
		{pipeline.MetricSessionDiskIORateSmoothed, "", []string{pipeline.AttrDirection, pipeline.DirectionWrite}},
	} {
		attrs := append([]string{pipeline.AttrTimeConstant, "10s"}, pt.attrs...)
		was, is := figure(t, before, 7, pt.metric, attrs...), figure(t, after, 7, pt.metric, attrs...)
		if was <= 0 || math.Abs(is-was*keep) > 1e-9 {
			t.Errorf("session %s %v: %.6f after the counters went down, want %.6f (only decayed from %.6f)", pt.metric, pt.attrs, is, was*keep, was)
		}
	}
}
