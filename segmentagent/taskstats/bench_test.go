// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package taskstats

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/gpotel/gpotel/segmentagent/internal/proctest"
	"github.com/gpotel/gpotel/segmentagent/procfs"
)

// BenchmarkTaskstatsVsProcfs reads the same 1000 real processes through one
// taskstats query each (Client.Task) and through the agent's procfs Reader
// (status, stat, io, schedstat, cmdline), alternating in stretches of 5 pids
// (which goes first alternates too) so both meet the same machine load.
// Reports µs per pid for both, their ratio and the median stretch ratio.
func BenchmarkTaskstatsVsProcfs(b *testing.B) {
	c := dialOrSkip(b)
	pids := proctest.SpawnSleepers(b, 1000)
	reader := procfs.NewReader("/proc")
	uid := int64(os.Getuid())
	allow := func(_, u, _ int64) bool { return u == uid }
	const rounds, stretch = 5, 5
	readTaskstats := func(chunk []int64) time.Duration {
		start := time.Now()
		for _, pid := range chunk {
			if _, err := c.Task(int(pid)); err != nil {
				b.Fatalf("taskstats, pid %d: %v", pid, err)
			}
		}
		return time.Since(start)
	}
	readProcfs := func(chunk []int64) time.Duration {
		start := time.Now()
		for _, pid := range chunk {
			if _, outcome, err := reader.Read(pid, allow); outcome != procfs.Answered {
				b.Fatalf("procfs, pid %d: %v %v", pid, outcome, err)
			}
		}
		return time.Since(start)
	}
	var tsTime, pfTime time.Duration
	var ratios []float64
	b.ResetTimer()
	for range b.N {
		for round := range rounds {
			for i := 0; i < len(pids); i += stretch {
				chunk := pids[i:min(i+stretch, len(pids))]
				var ts, pf time.Duration
				if (round+i/stretch)%2 == 0 {
					ts, pf = readTaskstats(chunk), readProcfs(chunk)
				} else {
					pf, ts = readProcfs(chunk), readTaskstats(chunk)
				}
				tsTime += ts
				pfTime += pf
				ratios = append(ratios, float64(ts)/float64(pf))
			}
		}
	}
	b.StopTimer()
	reads := float64(b.N * rounds * len(pids))
	usPerPid := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / reads / 1e3 }
	slices.Sort(ratios)
	median := ratios[len(ratios)/2]
	b.ReportMetric(usPerPid(tsTime), "taskstats-us/pid")
	b.ReportMetric(usPerPid(pfTime), "procfs-us/pid")
	b.ReportMetric(usPerPid(tsTime)/usPerPid(pfTime), "x-procfs")
	b.ReportMetric(median, "x-procfs-median")
	b.Logf("%d real pids × %d rounds: taskstats %.1f µs/pid, procfs Reader %.1f µs/pid (%.3fx, median of %d stretch pairs %.3fx)",
		len(pids), rounds, usPerPid(tsTime), usPerPid(pfTime), usPerPid(tsTime)/usPerPid(pfTime), len(ratios), median)
}
