// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// clusterFigure reads one point of a cluster figure on the snapshot resource.
func clusterFigure(t *testing.T, md pmetric.Metrics, metric string, attrs ...string) float64 {
	t.Helper()
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
	t.Fatalf("no %s point with %v", metric, attrs)
	return 0
}

func TestExitedProcessCountsItsFinalTotalsInTheWindowItExitedIn(t *testing.T) {
	p, sink := newTestProcessor(t, createDefaultConfig().(*Config))
	live := proc("sdw1", 0, 7, 100, 0, 1, 0)
	exited := proc("sdw1", 0, 7, 100, 0, 3, 0) // same identity, final totals
	exited.Exited = true
	out := feed(t, p, sink,
		snap(10, nil, []int64{7}, live),
		snap(20, nil, []int64{7}, exited))
	if got := figure(t, out, 7, pipeline.MetricSessionCPUTime, pipeline.AttrWindow, "5m", pipeline.AttrCPUMode, pipeline.CPUModeUser); got != 2 {
		t.Errorf("session cpu over the window: %v, want 3 (final) - 1 (at the old snapshot) = 2", got)
	}
	if got := figure(t, out, 7, pipeline.MetricSessionProcesses); got != 0 {
		t.Errorf("an exited process is not live: processes %v", got)
	}
	if got := figure(t, out, 7, pipeline.MetricSessionCPUTime, pipeline.AttrWindow, pipeline.WindowLifetime, pipeline.AttrCPUMode, pipeline.CPUModeUser); got != 0 {
		t.Errorf("lifetime counts live processes only: %v", got)
	}
}

func TestProcessNoScrapeSawIsCountedToItsSegmentAndTheCluster(t *testing.T) {
	p, sink := newTestProcessor(t, createDefaultConfig().(*Config))
	live := proc("sdw1", 0, 7, 100, 0, 1, 0)
	live2 := proc("sdw1", 0, 7, 100, 0, 1.5, 0)
	ghost := proc("sdw1", 1, 0, 200, 12, 2, 0) // born and gone between two scrapes
	ghost.Exited, ghost.Unattributed = true, true
	out := feed(t, p, sink,
		snap(10, nil, []int64{7}, live),
		snap(20, nil, []int64{7}, live2, ghost))
	if got := clusterFigure(t, out, pipeline.ClusterMetric(pipeline.MetricSessionCPUTime), pipeline.AttrWindow, "5m", pipeline.AttrCPUMode, pipeline.CPUModeUser); got != 2.5 {
		t.Errorf("cluster cpu %v, want 0.5 (live) + 2 (unattributed exit)", got)
	}
	if got := clusterFigure(t, out, pipeline.UnattributedMetric(pipeline.MetricSessionCPUTime), pipeline.AttrWindow, "5m", pipeline.AttrHostName, "sdw1",
		pipeline.AttrSegmentID, "1", pipeline.AttrCPUMode, pipeline.CPUModeUser); got != 2 {
		t.Errorf("unattributed cpu of sdw1 segment 1: %v, want 2", got)
	}
	if got := figure(t, out, 7, pipeline.MetricSessionCPUTime, pipeline.AttrWindow, "5m", pipeline.AttrCPUMode, pipeline.CPUModeUser); got != 0.5 {
		t.Errorf("the session keeps only its own: %v", got)
	}
	if countKind(out, pipeline.KindExited) != 0 {
		t.Error("exited resources are forwarded only with emit_process_metrics")
	}
}

func TestPostmastersUnrecordedCPUIsCountedToItsSegmentAndTheCluster(t *testing.T) {
	p, sink := newTestProcessor(t, createDefaultConfig().(*Config))
	live := proc("sdw1", 0, 7, 100, 0, 1, 0)
	live2 := proc("sdw1", 0, 7, 100, 0, 1.5, 0)
	pm := proc("sdw1", 1, 0, 50, 0, 0.25, 0) // the postmaster's cumulative unrecorded CPU
	pm.Unrecorded = true
	pm2 := proc("sdw1", 1, 0, 50, 0, 0.75, 0)
	pm2.Unrecorded = true
	out := feed(t, p, sink,
		snap(10, nil, []int64{7}, live, pm),
		snap(20, nil, []int64{7}, live2, pm2))
	if got := clusterFigure(t, out, pipeline.ClusterMetric(pipeline.MetricSessionCPUTime), pipeline.AttrWindow, "5m", pipeline.AttrCPUMode, pipeline.CPUModeUser); got != 1 {
		t.Errorf("cluster cpu %v, want 0.5 (live) + 0.5 (unrecorded)", got)
	}
	if got := clusterFigure(t, out, pipeline.MetricUnrecordedCPUTime, pipeline.AttrWindow, "5m", pipeline.AttrHostName, "sdw1",
		pipeline.AttrSegmentID, "1", pipeline.AttrCPUMode, pipeline.CPUModeUser); got != 0.5 {
		t.Errorf("unrecorded cpu of sdw1 segment 1: %v, want 0.75 - 0.25", got)
	}
	if got := figure(t, out, 7, pipeline.MetricSessionCPUTime, pipeline.AttrWindow, "5m", pipeline.AttrCPUMode, pipeline.CPUModeUser); got != 0.5 {
		t.Errorf("the session keeps only its own: %v", got)
	}
	if got := figure(t, out, 7, pipeline.MetricSessionProcesses); got != 1 {
		t.Errorf("the postmaster's point is not a live process of the session: processes %v", got)
	}
	if countKind(out, pipeline.KindUnrecorded) != 0 {
		t.Error("unrecorded resources are forwarded only with emit_process_metrics")
	}
}

// The kernel's exit record rounds I/O counts down to a multiple of 1024;
// the last live reading from /proc/<pid>/io was exact. An exited process's
// total of each such counter is the larger of the two: it never loses what
// was already read (265 read calls, record 0), and takes the record when it
// is larger (1500 read, record 2048).
func TestExitRecordNeverTakesBackAnExactReading(t *testing.T) {
	for _, c := range []struct {
		name             string
		lastExact, final int64
		want             float64
	}{
		{"record rounded to 0", 265, 0, 265},
		{"record above the last reading", 1500, 2048, 2048},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, sink := newTestProcessor(t, createDefaultConfig().(*Config))
			live := proc("sdw1", 0, 7, 100, 5, 1, 0)
			live.SyscR, live.RChar = c.lastExact, c.lastExact*100
			exited := proc("sdw1", 0, 7, 100, 5, 1, 0)
			exited.SyscR, exited.RChar = c.final, c.final*100
			exited.Exited = true
			out := feed(t, p, sink,
				noSession(0),
				snap(10, nil, []int64{7}, live),
				snap(20, nil, []int64{7}, exited))
			if got := figure(t, out, 7, pipeline.MetricSessionIOSyscalls, pipeline.AttrWindow, "5m", pipeline.AttrDirection, pipeline.DirectionRead); got != c.want {
				t.Errorf("read calls over the window: %v, want %v (max of last exact %d, exit record %d)", got, c.want, c.lastExact, c.final)
			}
			if got := figure(t, out, 7, pipeline.MetricSessionIOChars, pipeline.AttrWindow, "5m", pipeline.AttrDirection, pipeline.DirectionRead); got != 100*c.want {
				t.Errorf("read chars over the window: %v, want %v", got, 100*c.want)
			}
		})
	}
}
