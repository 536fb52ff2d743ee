package snapshotdiffprocessor

import (
	"runtime"
	"testing"
	"time"
)

// BenchmarkQueryAttribution200kProcesses times the per-query update of one
// snapshot of the synthetic 200k-process cluster (every session running a
// query that is replaced every third snapshot, the ended ones kept for the
// 5m window) and reports it as a ratio of the window figures computed for
// the same snapshot (reference).
func BenchmarkQueryAttribution200kProcesses(b *testing.B) {
	const processes, snapshots = 200_000, 10
	load := newClusterLoad(processes)
	hosts := make([]hostAnswer, len(load.hosts))
	for i, h := range load.hosts {
		hosts[i] = hostAnswer{Host: h, Up: true}
	}
	s := newStore([]time.Duration{time.Minute, 5 * time.Minute}, 0)
	qt := newQueryTracker(5*time.Minute, 1000)
	var queryCPU, figuresCPU time.Duration
	var written int
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	for range b.N {
		for n := range snapshots {
			load.advance()
			if err := s.begin(load.now); err != nil {
				b.Fatal(err)
			}
			acts := map[sessionKey]sessionActivity{}
			for i := range load.procs {
				p := &load.procs[i]
				if err := s.add(p); err != nil {
					b.Fatal(err)
				}
				key := sessionKey{tmID: p.TmID, id: p.Session}
				if _, ok := acts[key]; !ok {
					// A new query every third snapshot, started half an interval ago.
					start := load.now - int64(n%3)*int64(benchInterval) - int64(benchInterval)/2
					acts[key] = sessionActivity{pid: p.Session, running: true, queryStart: start}
				}
			}
			if err := s.commit(hosts); err != nil {
				b.Fatal(err)
			}
			start := threadCPU()
			f := s.computeFigures()
			mid := threadCPU()
			qf := qt.update(s, acts)
			end := threadCPU()
			runtime.KeepAlive(f)
			written = len(qf)
			figuresCPU += mid - start
			queryCPU += end - mid
		}
	}
	n := float64(b.N * snapshots)
	b.ReportMetric(float64(queryCPU.Nanoseconds())/n, "cpu-ns/query-update")
	b.ReportMetric(float64(figuresCPU.Nanoseconds())/n, "cpu-ns/window-figures")
	b.ReportMetric(float64(queryCPU)/float64(figuresCPU), "queries/figures")
	b.ReportMetric(float64(written), "queries-written")
}
