// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"runtime"
	"testing"
	"time"
)

// BenchmarkSmoothing200kProcesses times the smoothed-average update of one
// snapshot of the synthetic 200k-process cluster and reports it as a ratio
// of the window figures computed for the same snapshot (reference).
func BenchmarkSmoothing200kProcesses(b *testing.B) {
	sm := newSmoother([]time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute})
	smooth, figures := timeBesideWindowFigures(b, beside{run: func(s *store) {
		runtime.KeepAlive(sm.update(s))
	}})
	b.ReportMetric(smooth, "cpu-ns/smoothing-update")
	b.ReportMetric(figures, "cpu-ns/window-figures")
	b.ReportMetric(smooth/figures, "smoothing/figures")
	b.ReportMetric(float64(len(sm.sessions)), "sessions")
}
