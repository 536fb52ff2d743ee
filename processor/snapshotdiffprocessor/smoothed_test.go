package snapshotdiffprocessor

import (
	"math"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	sc "github.com/gpotel/gpotel/internal/gpsemconv"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor/internal/snapshottest"
)

const smoothTau = 10 * time.Second

func smoothingConfig() *Config {
	return &Config{Windows: []time.Duration{time.Minute}, TimeConstants: []time.Duration{smoothTau, time.Minute}}
}

// burner is one process on sdw1 of session 7 that burns one core, reads
// 1 MB/s and holds 100 MB, from its birth at 0.
func burner(sec float64) snapshottest.Process {
	p := proc("sdw1", 0, 7, 4242, 0, sec, int64(sec*1e6))
	p.RSS = 100e6
	return p
}

// smoothedAt feeds a burner snapshot at each of the times and returns the
// last output.
func smoothedAt(t *testing.T, times []float64) pmetric.Metrics {
	t.Helper()
	p, sink := newTestProcessor(t, smoothingConfig())
	var snaps []snapshottest.Snapshot
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
	got := figure(t, md, 7, sc.MetricSessionCPUUsageSmoothed, sc.AttrTimeConstant, "10s")
	if math.Abs(got-1) > 0.05 {
		t.Errorf("session smoothed CPU after 5 time constants = %.4f cores, want 1.0 ± 5 %%", got)
	}
	// Starting from 0, each second moves it 1 - e^(-1/10) of the way.
	if want := 1 - math.Exp(-5); math.Abs(got-want) > 1e-9 {
		t.Errorf("session smoothed CPU = %.12f, want 1 - e^-5 = %.12f", got, want)
	}
	if got := figure(t, md, 7, sc.MetricSessionDiskIORateSmoothed, sc.AttrTimeConstant, "10s", sc.AttrDirection, sc.DirectionRead); math.Abs(got-1e6) > 0.05e6 {
		t.Errorf("session smoothed read rate = %.0f B/s, want 1e6 ± 5 %%", got)
	}
	if got := figure(t, md, 7, sc.MetricSessionMemoryUsageSmoothed, sc.AttrTimeConstant, "10s"); math.Abs(got-100e6) > 5e6 {
		t.Errorf("session smoothed memory = %.0f B, want 100e6 ± 5 %%", got)
	}
	host := smoothedPoint(t, md, sc.MetricHostCPUUsageSmoothed, "sdw1", "10s")
	cluster := smoothedPoint(t, md, sc.MetricClusterCPUUsageSmoothed, "", "10s")
	if math.Abs(host-got) > 1e-9 || cluster != host {
		t.Errorf("host sdw1 = %.6f, cluster = %.6f cores; want both %.6f like the session (the only process)", host, cluster, got)
	}
	if slow := figure(t, md, 7, sc.MetricSessionCPUUsageSmoothed, sc.AttrTimeConstant, "1m"); math.Abs(slow-(1-math.Exp(-50.0/60))) > 1e-9 {
		t.Errorf("1m smoothed CPU after 50 s = %.6f, want 1 - e^(-50/60)", slow)
	}
}

func TestMissedAndLateTicksDoNotBiasSmoothed(t *testing.T) {
	every := smoothedAt(t, seconds(0, 30, 1))
	irregular := smoothedAt(t, []float64{0, 1, 2, 5, 5.5, 9, 10, 17.25, 18, 30})
	for _, tc := range []string{"10s", "1m"} {
		a := figure(t, every, 7, sc.MetricSessionCPUUsageSmoothed, sc.AttrTimeConstant, tc)
		b := figure(t, irregular, 7, sc.MetricSessionCPUUsageSmoothed, sc.AttrTimeConstant, tc)
		if math.Abs(a-b) > 1e-9 {
			t.Errorf("%s: smoothed CPU with every tick = %.12f, with missed and late ticks = %.12f; a steady rate must give the same", tc, a, b)
		}
		a = smoothedPoint(t, every, sc.MetricHostCPUUsageSmoothed, "sdw1", tc)
		b = smoothedPoint(t, irregular, sc.MetricHostCPUUsageSmoothed, "sdw1", tc)
		if math.Abs(a-b) > 1e-9 {
			t.Errorf("%s: host smoothed CPU %.12f vs %.12f", tc, a, b)
		}
	}
}

func TestSilentHostHoldsItsAveragesAndCatchesUp(t *testing.T) {
	p, sink := newTestProcessor(t, smoothingConfig())
	var snaps []snapshottest.Snapshot
	for sec := 0.0; sec <= 20; sec++ {
		if sec >= 8 && sec <= 11 {
			snaps = append(snaps, snap(sec, []string{"sdw1"}, []int64{7}))
			continue
		}
		snaps = append(snaps, snap(sec, nil, []int64{7}, burner(sec)))
	}
	md := feed(t, p, sink, snaps[:9]...)
	before := smoothedPoint(t, md, sc.MetricHostCPUUsageSmoothed, "sdw1", "10s")
	md = feed(t, p, sink, snaps[9:11]...)
	if held := smoothedPoint(t, md, sc.MetricHostCPUUsageSmoothed, "sdw1", "10s"); held != before {
		t.Errorf("silent host's smoothed CPU moved from %.6f to %.6f; not answering is not idle", before, held)
	}
	md = feed(t, p, sink, snaps[11:]...)
	got := smoothedPoint(t, md, sc.MetricHostCPUUsageSmoothed, "sdw1", "10s")
	if want := 1 - math.Exp(-2); math.Abs(got-want) > 1e-9 {
		t.Errorf("host smoothed CPU after catching up = %.12f, want %.12f as if it had always answered", got, want)
	}
}

func TestProcessFirstSeenLongAfterItsBirthAddsNoSpike(t *testing.T) {
	p, sink := newTestProcessor(t, smoothingConfig())
	old := proc("sdw2", 1, 8, 99, -1000, 900, 0) // 900 s of CPU before we ever saw it
	var snaps []snapshottest.Snapshot
	for sec := 0.0; sec <= 3; sec++ {
		snaps = append(snaps, snap(sec, nil, []int64{7, 8}, burner(sec)))
	}
	snaps = append(snaps, snap(4, nil, []int64{7, 8}, burner(4), old))
	md := feed(t, p, sink, snaps...)
	if got := figure(t, md, 8, sc.MetricSessionCPUUsageSmoothed, sc.AttrTimeConstant, "10s"); got != 0 {
		t.Errorf("session 8 smoothed CPU = %.3f cores right after its old process was first seen; want 0 (its past is not this interval)", got)
	}
	old.CPUUser++
	md = feed(t, p, sink, snap(5, nil, []int64{7, 8}, burner(5), old))
	if got, want := figure(t, md, 8, sc.MetricSessionCPUUsageSmoothed, sc.AttrTimeConstant, "10s"), 1-math.Exp(-0.1); math.Abs(got-want) > 1e-9 {
		t.Errorf("session 8 smoothed CPU after one busy second = %.6f, want %.6f", got, want)
	}
}

func TestSmoothingOffEmitsNoSmoothedMetrics(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	md := feed(t, p, sink, snap(0, nil, []int64{7}, burner(0)), snap(1, nil, []int64{7}, burner(1)))
	if _, err := lookupFigure(md, 7, sc.MetricSessionCPUUsageSmoothed, sc.AttrTimeConstant, "10s"); err == nil {
		t.Error("smoothed CPU emitted with no time_constants configured")
	}
}

// smoothedPoint reads a host (host != "") or cluster smoothed figure from the
// snapshot resource.
func smoothedPoint(t *testing.T, md pmetric.Metrics, metric, host, constant string) float64 {
	t.Helper()
	attrs := []string{sc.AttrTimeConstant, constant}
	if host != "" {
		attrs = append([]string{sc.AttrHostName, host}, attrs...)
	}
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		if k, _ := rms.At(i).Resource().Attributes().Get(sc.AttrResourceKind); k.Str() != sc.KindSnapshot {
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
	var snaps []snapshottest.Snapshot
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
		{sc.MetricHostCPUUsageSmoothed, []string{sc.AttrHostName, "sdw1", sc.AttrTimeConstant, "10s"}},
		{sc.MetricClusterCPUUsageSmoothed, []string{sc.AttrTimeConstant, "10s"}},
	} {
		if got := clusterFigure(t, md, metric.name, metric.attrs...); math.Abs(got-1) > 0.01 {
			t.Errorf("%s = %.4f cores, want 1 (live 0.25 + exit records 0.25 + unrecorded 0.5)", metric.name, got)
		}
	}
	if got := clusterFigure(t, md, sc.ClusterMetric(sc.MetricSessionCPUTime), sc.AttrWindow, "1m", sc.AttrCPUMode, sc.CPUModeUser); math.Abs(got-60) > 1 {
		t.Errorf("windowed cluster CPU %.3f s over 60 s, want 60", got)
	}
}
