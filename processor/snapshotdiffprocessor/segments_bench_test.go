package snapshotdiffprocessor

import (
	"runtime"
	"testing"
	"time"
)

// BenchmarkSegmentFigures200kProcesses times the per-segment gathering (skew
// and, with emit_session_host_figures, the per-host breakdown) of one
// snapshot of the synthetic 200k-process cluster and reports it as a ratio
// of the window figures computed for the same snapshot (reference).
func BenchmarkSegmentFigures200kProcesses(b *testing.B) {
	const processes, snapshots = 200_000, 10
	load := newClusterLoad(processes)
	hosts := make([]hostAnswer, len(load.hosts))
	for i, h := range load.hosts {
		hosts[i] = hostAnswer{Host: h, Up: true}
	}
	s := newStore([]time.Duration{time.Minute, 5 * time.Minute}, 0)
	var segmentsCPU, figuresCPU time.Duration
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	for range b.N {
		for range snapshots {
			load.advance()
			if err := s.begin(load.now); err != nil {
				b.Fatal(err)
			}
			for i := range load.procs {
				if err := s.add(&load.procs[i]); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.commit(hosts); err != nil {
				b.Fatal(err)
			}
			start := threadCPU()
			f := s.computeFigures()
			mid := threadCPU()
			sf := s.computeSegmentFigures(true)
			end := threadCPU()
			runtime.KeepAlive(f)
			runtime.KeepAlive(sf)
			figuresCPU += mid - start
			segmentsCPU += end - mid
		}
	}
	n := float64(b.N * snapshots)
	b.ReportMetric(float64(segmentsCPU.Nanoseconds())/n, "cpu-ns/segment-figures")
	b.ReportMetric(float64(figuresCPU.Nanoseconds())/n, "cpu-ns/window-figures")
	b.ReportMetric(float64(segmentsCPU)/float64(figuresCPU), "segments/figures")
}
