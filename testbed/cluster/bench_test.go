// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cluster_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/groundtruth"
)

// BenchmarkUp measures how long Up takes and what the idle cluster's
// processes use: RSS summed (counts shared buffers once per process that
// touched them) and PSS summed (shares them out, so it adds up honestly).
func BenchmarkUp(b *testing.B) {
	for _, shape := range []struct{ hosts, perHost int }{{2, 2}, {4, 2}} {
		b.Run(fmt.Sprintf("1+%d", shape.hosts*shape.perHost), func(b *testing.B) {
			var upTotal, downTotal time.Duration
			var rss, pss, procs float64
			for i := 0; i < b.N; i++ {
				begin := time.Now()
				c, err := cluster.Up(context.Background(), cluster.Options{Hosts: shape.hosts, SegmentsPerHost: shape.perHost, Dialect: dialect.GP6})
				if err != nil {
					b.Fatal(err)
				}
				upTotal += time.Since(begin)
				pids := c.Processes()
				total, err := groundtruth.Sum(pids)
				if err != nil {
					b.Fatal(err)
				}
				rss += float64(total.RSSBytes)
				pss += float64(sumPSS(pids))
				procs += float64(total.Processes)
				begin = time.Now()
				if err := c.Down(context.Background()); err != nil {
					b.Fatal(err)
				}
				downTotal += time.Since(begin)
			}
			n := float64(b.N)
			b.ReportMetric(float64(upTotal.Milliseconds())/n, "ms/up")
			b.ReportMetric(float64(downTotal.Milliseconds())/n, "ms/down")
			b.ReportMetric(rss/n/(1<<20), "MiB-rss")
			b.ReportMetric(pss/n/(1<<20), "MiB-pss")
			b.ReportMetric(procs/n, "processes")
		})
	}
}

// BenchmarkAllSessionsQuery is the receiver's per-scrape query on 1+8 instances.
func BenchmarkAllSessionsQuery(b *testing.B) {
	c := cluster.Start(b, cluster.Options{Hosts: 4, SegmentsPerHost: 2, Dialect: dialect.GP7})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rows, err := conn.Query(ctx, gp7AllSessions)
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
		}
		if err := rows.Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// sumPSS adds Pss from /proc/<pid>/smaps_rollup (kB) for every pid still alive.
func sumPSS(pids []int) uint64 {
	var total uint64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
				f := strings.Fields(rest)
				if len(f) > 0 {
					kb, _ := strconv.ParseUint(f[0], 10, 64)
					total += kb * 1024
				}
			}
		}
	}
	return total
}
