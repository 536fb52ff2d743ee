// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"testing"
	"time"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor/internal/querylife"
)

// BenchmarkQueryAttribution200kProcesses times the per-query update of one
// snapshot of the synthetic 200k-process cluster (every session running a
// query that is replaced every third snapshot, the ended ones kept for the
// 5m window) and reports it as a ratio of the window figures computed for
// the same snapshot (reference).
func BenchmarkQueryAttribution200kProcesses(b *testing.B) {
	qt := querylife.New(querylife.Config{Keep: 5 * time.Minute, MaxFinished: 1000})
	var acts map[pipeline.SessionKey]querylife.Activity
	var start int64
	var written int
	queries, figures := timeBesideWindowFigures(b, beside{
		begin: func(n int, now int64) {
			acts = map[pipeline.SessionKey]querylife.Activity{}
			// A new query every third snapshot, started half an interval ago.
			start = now - int64(n%3)*int64(benchInterval) - int64(benchInterval)/2
		},
		process: func(p *snapshot.ProcessSample) {
			key := pipeline.SessionKey{TmID: p.TmID, ID: p.Session}
			if _, ok := acts[key]; !ok {
				acts[key] = querylife.Activity{PID: p.Session, Running: true, QueryStart: start}
			}
		},
		run: func(s *store) { written = len(qt.Update(querySnapshot(s, acts, nil)).Queries) },
	})
	b.ReportMetric(queries, "cpu-ns/query-update")
	b.ReportMetric(figures, "cpu-ns/window-figures")
	b.ReportMetric(queries/figures, "queries/figures")
	b.ReportMetric(float64(written), "queries-written")
}
