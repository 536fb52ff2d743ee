// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package finishedworkconnector

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/gpotel/gpotel/connector/finishedworkconnector/internal/metadata"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor"
)

// sessionsSnapshot is n sessions on 8 hosts, one backend each, at sec:
// running a query that started at 0 (running) or idle after it ended at
// sec - 0.5.
func sessionsSnapshot(n int, sec float64, running bool) pipelinetest.Snapshot {
	s := pipelinetest.Snapshot{Time: at(sec), TmID: 1700000000, Coordinator: "mdw"}
	for h := range 8 {
		s.Hosts = append(s.Hosts, pipelinetest.Host{Name: fmt.Sprintf("sdw%d", h+1), Up: true})
	}
	for i := range n {
		id := int64(i + 1)
		s.Processes = append(s.Processes, pipelinetest.Process{Host: fmt.Sprintf("sdw%d", i%8+1), Segment: int64(i % 16), Session: id,
			PID: 10000 + id, Created: at(-1), CPUUser: sec})
		ses := pipelinetest.Session{ID: id, PID: 10000 + id, DB: "sales", User: "alice", State: "active", QueryStart: at(0.5),
			BackendStart: at(0.2), Query: "select 1"}
		if !running {
			ses.State, ses.StateChange = "idle", at(sec-0.5)
		}
		s.Sessions = append(s.Sessions, ses)
	}
	return s
}

// newProcessor is the real processor, its output kept in a sink.
func newProcessor(b *testing.B) (processor.Metrics, *consumertest.MetricsSink) {
	out := new(consumertest.MetricsSink)
	f := snapshotdiffprocessor.NewFactory()
	cfg := f.CreateDefaultConfig().(*snapshotdiffprocessor.Config)
	cfg.Windows = []time.Duration{time.Minute}
	p, err := f.CreateMetrics(context.Background(), processortest.NewNopSettings(f.Type()), cfg, out)
	if err != nil {
		b.Fatal(err)
	}
	return p, out
}

// consume hands the batches to p and returns the CPU time the process
// (every thread, the garbage collector's included) spent on it: on a
// shared machine, wall time would count the others' work too.
func consume(b *testing.B, p processor.Metrics, batches []pmetric.Metrics) time.Duration {
	start := processCPU(b)
	for _, md := range batches {
		if err := p.ConsumeMetrics(context.Background(), md); err != nil {
			b.Fatal(err)
		}
	}
	return processCPU(b) - start
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkQueryEvents times, for n queries ending at once: the snapshot
// in which they settle (the processor writes n finished_query resources)
// beside the same snapshot of the same sessions with nothing finishing (the
// processor's own cost per snapshot, the reference); and the connector
// turning that output into n events. It prints events/s through the
// connector, the processor's extra CPU per 1000 events, and the events'
// OTLP bytes each. Times are the process's CPU time.
func BenchmarkQueryEvents(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			var withEvents, reference, connector time.Duration
			var otlpBytes int
			for range b.N {
				b.StopTimer()
				ref, _ := newProcessor(b)
				ended, out := newProcessor(b)
				consume(b, ref, sessionsSnapshot(n, 1, true).Batches())
				consume(b, ref, sessionsSnapshot(n, 2, true).Batches())
				consume(b, ended, sessionsSnapshot(n, 1, true).Batches())
				consume(b, ended, sessionsSnapshot(n, 2, false).Batches()) // seen ended
				refBatches, endBatches := sessionsSnapshot(n, 3, true).Batches(), sessionsSnapshot(n, 3, false).Batches()
				b.StartTimer()
				reference += consume(b, ref, refBatches)
				withEvents += consume(b, ended, endBatches) // settled
				b.StopTimer()
				all := out.AllMetrics()
				settled := all[len(all)-1]
				logs := new(consumertest.LogsSink)
				conn, err := NewFactory().CreateMetricsToLogs(context.Background(), connectortest.NewNopSettings(metadata.Type), createDefaultConfig(), logs)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := processCPU(b)
				if err := conn.ConsumeMetrics(context.Background(), settled); err != nil {
					b.Fatal(err)
				}
				connector += processCPU(b) - start
				b.StopTimer()
				if got := logs.LogRecordCount(); got != n {
					b.Fatalf("%d events, want %d", got, n)
				}
				otlpBytes = (&plog.ProtoMarshaler{}).LogsSize(logs.AllLogs()[0])
				b.StartTimer()
			}
			perRun := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
			b.ReportMetric(float64(n)/perRun(connector), "events/s")
			b.ReportMetric(perRun(connector)/float64(n)*1000, "connector-cpu-s/1000-events")
			b.ReportMetric(perRun(reference), "processor-s/snapshot-reference")
			b.ReportMetric(perRun(withEvents), "processor-s/snapshot-settling")
			b.ReportMetric((perRun(withEvents)-perRun(reference))/float64(n)*1000, "processor-cpu-s/1000-events")
			b.ReportMetric(float64(otlpBytes)/float64(n), "otlp-bytes/event")
		})
	}
}
