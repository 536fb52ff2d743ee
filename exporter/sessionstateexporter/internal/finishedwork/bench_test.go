// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package finishedwork

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/viewtest"
	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/benchmeter"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// benchFinishedQuery is query n as a busy cluster ends them: one of 50
// users, 10 databases and 20 applications, a distinct 200-byte text,
// every counter measured, its CPU and I/O on every segment instance
// (the coordinator, then 4 per host).
func benchFinishedQuery(n, segments int, end time.Time) events.FinishedQuery {
	text := fmt.Sprintf("select %d, ", n) + strings.Repeat("x", 190)
	q := events.FinishedQuery{
		Session: pipeline.SessionKey{TmID: viewtest.TmID, ID: int64(1000 + n%500)},
		Who: events.SessionWho{Database: fmt.Sprintf("db%d", n%10), User: fmt.Sprintf("user%d", n%50),
			Application:   pipeline.Null[string]{V: fmt.Sprintf("app%d", n%20), Valid: true},
			ClientAddress: pipeline.Null[string]{V: "10.0.3.17", Valid: true}, ClientPort: pipeline.Null[int64]{V: int64(40000 + n%20000), Valid: true},
			ResourceGroup: pipeline.Null[string]{V: "default_group", Valid: true}},
		CommandCount: int64(n + 1), Start: end.Add(-time.Duration(n%600) * time.Second).UnixNano(), End: end.UnixNano(),
		Status: events.QueryCompleted, Text: &text, LockWait: int64(n%7) * int64(time.Millisecond),
		Skew: pipeline.SkewPair{CPU: pipeline.Skew{Ratio: 0.2, MaxOverAvg: 1.25, Hottest: 3, Segments: segments - 1, OK: true},
			IO: pipeline.Skew{Ratio: 0.5, MaxOverAvg: 2, Hottest: 1, Segments: segments - 1, OK: true}},
	}
	for c := range pipeline.NumCounters {
		q.Totals[c] = int64(n*(c+1)) % 1_000_000_007
		q.Known |= 1 << c
	}
	if n%5 == 0 {
		q.Spill = &pipeline.QuerySpill{MaxBytes: int64(n) << 10, MaxFiles: 3}
	}
	for s := range segments {
		host := viewtest.Coordinator
		if s > 0 {
			host = fmt.Sprintf("sdw%d", (s-1)/4+1)
		}
		q.Segments = append(q.Segments, pipeline.SegmentUse{Host: host, Segment: int32(s - 1), CPU: int64(n+s) * 1e6, Read: int64(s) << 20, Written: int64(n) << 10})
	}
	return q
}

// BenchmarkFinishedStore feeds finished queries into the exporter's store
// as the processor's closing batches carry them (1000 a batch), for a
// small cluster (the coordinator and 4 segments) and a 64-segment one,
// and reports: the store's ingest rate (events/s) and CPU per 1000 events
// (the consuming thread's; decoding included), the reference in the same
// run, pipelinetest.DecodeQueryEvent of the same resources alone, and their
// ratio; the heap a retained query holds (live heap after a full
// collection, before and after, the input gone), the bytes the store
// counts against max_bytes for it, what 1 h at 10 queries/s holds and,
// at 10k, the heap of a copy of its attribute map instead; the median CPU
// of 11 ListFinishedQueries pages of 100 by cpu_time, walked with their
// tokens over the whole store, without gRPC. It fails when the heap
// exceeds what the store counts, or 1 h at 10 queries/s what the default
// max_bytes holds.
func BenchmarkFinishedStore(b *testing.B) {
	for _, evs := range []int{10_000, 100_000} {
		for _, segments := range []int{5, 65} {
			b.Run(fmt.Sprintf("events=%d/segments=%d", evs, segments), func(b *testing.B) {
				benchFinishedStore(b, evs, segments)
			})
		}
	}
}

func benchFinishedStore(b *testing.B, evs, segments int) {
	const batch, listPages = 1000, 11
	// The attribute maps of 100k queries on 65 segments would not fit here.
	const mapReferenceEvents = 10_000
	cfg := DefaultConfig()
	cfg.MaxEvents, cfg.MaxBytes = evs, 1<<40
	const maxResponseBytes = 4 << 20 // the exporter's default
	var ingest, ingestCPU, decode, decodeCPU time.Duration
	var heapPer, countedPer, listMS, mapPer float64
	for range b.N {
		b.StopTimer()
		at := t0
		base := benchmeter.LiveHeap()
		w := NewStore(cfg, Owner{ClusterID: "test-cluster"}, zap.NewNop(), nil)
		var md pmetric.Metrics
		for from := 0; from < evs; from += batch {
			md = viewtest.Snapshot(at)
			for n := from; n < from+batch; n++ {
				q := benchFinishedQuery(n, segments, at.Add(-time.Second))
				events.AppendFinishedQuery(md.ResourceMetrics(), &q)
			}
			runtime.LockOSThread()
			wall, cpu := time.Now(), benchmeter.ThreadCPU()
			rms := md.ResourceMetrics()
			for i := 1; i < rms.Len(); i++ {
				if _, err := pipelinetest.DecodeQueryEvent(rms.At(i).Resource().Attributes()); err != nil {
					b.Fatal(err)
				}
			}
			decode, decodeCPU = decode+time.Since(wall), decodeCPU+benchmeter.ThreadCPU()-cpu
			b.StartTimer()
			wall, cpu = time.Now(), benchmeter.ThreadCPU()
			w.Consume(decoded(md), at)
			ingest, ingestCPU = ingest+time.Since(wall), ingestCPU+benchmeter.ThreadCPU()-cpu
			b.StopTimer()
			runtime.UnlockOSThread()
			at = at.Add(time.Second)
		}
		md = pmetric.Metrics{}
		if w.count != evs {
			b.Fatalf("%d events held, want %d", w.count, evs)
		}
		heapPer = float64(benchmeter.LiveHeap()-base) / float64(evs)
		countedPer = float64(w.bytes) / float64(evs)

		svc := NewService(w, 100, 10000, maxResponseBytes)
		req := &gpotelv1.ListFinishedWorkRequest{SortBy: cpuTimeColumn, Descending: true}
		pages := make([]time.Duration, 0, listPages)
		runtime.LockOSThread()
		for range listPages {
			cpu := benchmeter.ThreadCPU()
			resp, err := svc.ListFinishedQueries(await.Context(b), req)
			pages = append(pages, benchmeter.ThreadCPU()-cpu)
			if err != nil || len(resp.GetQueries()) != 100 {
				b.Fatalf("list: %d queries, %v", len(resp.GetQueries()), err)
			}
			req.PageToken = resp.GetNextPageToken()
		}
		runtime.UnlockOSThread()
		slices.Sort(pages)
		listMS = float64(pages[len(pages)/2].Microseconds()) / 1000
		runtime.KeepAlive(w)
		if evs <= mapReferenceEvents {
			mapPer = mapCopyBytes(evs, segments)
		}
	}
	total := float64(evs * b.N)
	b.ReportMetric(total/ingest.Seconds(), "events/s")
	b.ReportMetric(float64(ingestCPU.Microseconds())/1000/total*1000, "cpu_ms/1000events")
	b.ReportMetric(float64(decodeCPU.Microseconds())/1000/total*1000, "decode_cpu_ms/1000events")
	b.ReportMetric(ingestCPU.Seconds()/decodeCPU.Seconds(), "ingest/decode")
	b.ReportMetric(total/decode.Seconds(), "decode_events/s")
	b.ReportMetric(heapPer, "heap_B/query")
	b.ReportMetric(countedPer, "counted_B/query")
	b.ReportMetric(heapPer*36000/(1<<20), "1h@10/s_MiB")
	b.ReportMetric(listMS, "list_page_cpu_ms")
	if mapPer > 0 {
		b.ReportMetric(mapPer, "map_copy_B/query")
	}
	if hour := countedPer * 36000; hour > defaultFinishedMaxBytes {
		b.Errorf("1 h at 10 queries/s counts %.0f bytes, more than the default max_bytes %d", hour, defaultFinishedMaxBytes)
	}
	if heapPer > countedPer {
		b.Errorf("a retained query holds %.0f bytes of heap, the store counts %.0f: max_bytes would not bound the heap", heapPer, countedPer)
	}
}

// mapCopyBytes is the heap a query holds kept as a copy of its resource's
// attribute map instead of a row: the reference for heap_B/query.
func mapCopyBytes(evs, segments int) float64 {
	base := benchmeter.LiveHeap()
	kept := make([]pcommon.Map, 0, evs)
	for n := range evs {
		md := pmetric.NewMetrics()
		q := benchFinishedQuery(n, segments, t0)
		events.AppendFinishedQuery(md.ResourceMetrics(), &q)
		m := pcommon.NewMap()
		md.ResourceMetrics().At(0).Resource().Attributes().CopyTo(m)
		kept = append(kept, m)
	}
	per := float64(benchmeter.LiveHeap()-base) / float64(evs)
	runtime.KeepAlive(kept)
	return per
}
