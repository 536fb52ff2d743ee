// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"runtime"
	"testing"
)

// BenchmarkSegmentFigures200kProcesses times the per-segment gathering (skew
// and, with emit_session_host_figures, the per-host breakdown) of one
// snapshot of the synthetic 200k-process cluster and reports it as a ratio
// of the window figures computed for the same snapshot (reference).
func BenchmarkSegmentFigures200kProcesses(b *testing.B) {
	segments, figures := timeBesideWindowFigures(b, beside{run: func(s *store) {
		runtime.KeepAlive(s.computeSegmentFigures(true))
	}})
	b.ReportMetric(segments, "cpu-ns/segment-figures")
	b.ReportMetric(figures, "cpu-ns/window-figures")
	b.ReportMetric(segments/figures, "segments/figures")
}
