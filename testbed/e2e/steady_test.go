// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// BenchmarkDemoSteadyState runs what `make run` runs (gp6, 2 hosts x 2
// segments, config/testbed.yaml, the demo workloads) and reports the
// collector's and the agents' CPU and resident memory once it is warm.
func BenchmarkDemoSteadyState(b *testing.B) {
	if testing.Short() {
		b.Skip("end-to-end")
	}
	const warmUp, measure = 40 * time.Second, 60 * time.Second
	c := cluster.Start(b, cluster.Options{Hosts: 2, SegmentsPerHost: 2, Dialect: dialect.GP6})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// For profiling the collector, e.g. the pprof extension:
	// GPOTEL_STEADY_COLLECTOR_ARGS='--set=extensions::pprof::endpoint=127.0.0.1:1777 --set=service::extensions=[health_check,pprof]'
	s, err := Launch(ctx, c, StackOptions{Binaries: bins, Config: root0(b) + "/config/testbed.yaml", Dir: b.TempDir(), OTLPKeep: 10,
		CollectorArgs: strings.Fields(os.Getenv("GPOTEL_STEADY_COLLECTOR_ARGS"))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for _, spec := range DemoWorkloads() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			logRun := func(err error) { b.Logf("workload %s: %v", spec.Name, err) }
			KeepRunning(ctx, c, spec, logRun, logRun)
		}()
	}
	time.Sleep(warmUp)
	before := Usages(s.Collector, s.Agents)
	requests := s.Sink.Requests()
	begin := time.Now()
	time.Sleep(measure)
	after := Usages(s.Collector, s.Agents)
	span := time.Since(begin).Seconds()
	if exited, err := s.Collector.Exited(); exited {
		b.Fatalf("collector exited: %v", err)
	}
	if s.Sink.Requests() == requests {
		b.Fatal("no OTLP output during the measurement: the pipeline is not running")
	}
	col := after["collector"].Minus(before["collector"])
	b.ReportMetric(col.CPUSeconds/span*100, "collector-cpu-%")
	b.ReportMetric(float64(col.RSSBytes)/(1<<20), "collector-rss-MiB")
	var agentCPU, agentRSS float64
	for name, u := range after {
		if name == "collector" {
			continue
		}
		d := u.Minus(before[name])
		agentCPU = max(agentCPU, d.CPUSeconds/span*100)
		agentRSS = max(agentRSS, float64(d.RSSBytes)/(1<<20))
	}
	b.ReportMetric(agentCPU, "agent-cpu-%-max")
	b.ReportMetric(agentRSS, "agent-rss-MiB-max")
}
