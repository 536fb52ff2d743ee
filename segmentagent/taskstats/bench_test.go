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

// BenchmarkTaskstatsVsProcfs reads the same 1000 real processes three ways:
// one taskstats round trip each (Client.Task), taskstats in batches
// (Client.Tasks, maxInFlight requests a write), and the agent's procfs
// Reader (status, stat, io, schedstat, cmdline). They take turns in
// stretches of maxInFlight pids, the first of each stretch rotating, so all
// meet the same machine load. Reports µs per pid for each, each taskstats
// way's ratio to procfs (of the totals) and the batch's median stretch ratio.
func BenchmarkTaskstatsVsProcfs(b *testing.B) {
	c := dialOrSkip(b)
	pids := proctest.SpawnSleepers(b, 1000)
	reader := procfs.NewReader("/proc")
	uid := int64(os.Getuid())
	allow := func(_, u, _ int64) bool { return u == uid }
	ints := make([]int, len(pids))
	for i, p := range pids {
		ints[i] = int(p)
	}
	ways := []struct {
		name string
		read func(from, to int)
		took time.Duration
	}{
		{name: "round-trip", read: func(from, to int) {
			for _, pid := range ints[from:to] {
				if _, err := c.Task(pid); err != nil {
					b.Fatalf("taskstats, pid %d: %v", pid, err)
				}
			}
		}},
		{name: "batch", read: func(from, to int) {
			c.Tasks(ints[from:to], func(_ int, _ *Stats, err error) {
				if err != nil {
					b.Fatal(err)
				}
			})
		}},
		{name: "procfs", read: func(from, to int) {
			for _, pid := range pids[from:to] {
				if _, outcome, err := reader.Read(pid, allow); outcome != procfs.Answered {
					b.Fatalf("procfs, pid %d: %v %v", pid, outcome, err)
				}
			}
		}},
	}
	const rounds = 5
	var ratios []float64
	b.ResetTimer()
	for i := range b.N {
		for round := range rounds {
			for from := 0; from < len(pids); from += maxInFlight {
				to := min(from+maxInFlight, len(pids))
				var took [3]time.Duration
				for k := range ways {
					w := (i + round + from/maxInFlight + k) % len(ways)
					start := time.Now()
					ways[w].read(from, to)
					took[w] = time.Since(start)
					ways[w].took += took[w]
				}
				ratios = append(ratios, float64(took[1])/float64(took[2]))
			}
		}
	}
	b.StopTimer()
	reads := float64(b.N * rounds * len(pids))
	usPerPid := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / reads / 1e3 }
	procfsUs := usPerPid(ways[2].took)
	for _, w := range ways {
		b.ReportMetric(usPerPid(w.took), w.name+"-us/pid")
	}
	b.ReportMetric(usPerPid(ways[0].took)/procfsUs, "round-trip/procfs")
	b.ReportMetric(usPerPid(ways[1].took)/procfsUs, "batch/procfs")
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "batch/procfs-median")
	b.Logf("%d real pids × %d rounds: taskstats round trip %.1f µs/pid, batch %.1f µs/pid, procfs Reader %.1f µs/pid "+
		"(batch/procfs median of %d stretches %.3f)",
		len(pids), rounds, usPerPid(ways[0].took), usPerPid(ways[1].took), procfsUs, len(ratios), ratios[len(ratios)/2])
}
