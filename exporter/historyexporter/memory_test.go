// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
)

// firstThenSmall is first followed by 999 queries of one coordinator
// segment and a short text.
func firstThenSmall(first *events.FinishedQuery) plog.Logs {
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	pipelinetest.AppendQueryEvent(lrs, first, 1)
	for i := 1; i < 1000; i++ {
		q := sampleQuery(i, testNow)
		q.Segments = q.Segments[:1]
		pipelinetest.AppendQueryEvent(lrs, q, 1)
	}
	return ld
}

// held is what the client's values take in memory: their capacity.
func (m *memoryClient) held() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for k, v := range m.kv {
		if k != metaKey {
			n += int64(cap(v))
		}
	}
	return n
}

// The bytes the queue counts against queue::max_bytes are the bytes it
// holds, and queuing an entry allocates in proportion to the entry, not
// to its first event's size times the events that follow (any OTLP
// sender chooses both).
func TestHistoryQueueHoldsWhatItCounts(t *testing.T) {
	bigText := sampleQuery(0, testNow)
	bigText.Text = new(strings.Repeat("x", maxTextBytes))
	manySegments := sampleQuery(0, testNow)
	manySegments.Segments = nil
	for s := range 500 {
		manySegments.Segments = append(manySegments.Segments, pipeline.SegmentUse{Host: "sdw1", Segment: int32(s), CPU: 123_456_789, Read: 1 << 30, Written: 1 << 20})
	}
	for _, tc := range []struct {
		name  string
		first *events.FinishedQuery
	}{
		{"a 1 MiB text then 999 small queries", bigText},
		{"a 500-segment query then 999 coordinator-only ones", manySegments},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newExporterAt(t, validConfig(), nil, func() time.Time { return testNow })
			client := newMemoryClient()
			var err error
			if e.queue, _, err = openQueue(context.Background(), client, 1<<40); err != nil {
				t.Fatal(err)
			}
			ld := firstThenSmall(tc.first)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			if err := e.consumeLogs(context.Background(), ld); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&after)
			events, counted := e.queue.size()
			if events != 1000 {
				t.Fatalf("%d events queued, want 1000", events)
			}
			if held := client.held(); held != counted {
				t.Errorf("the queue counts %d bytes and holds %d", counted, held)
			}
			// Encoding grows its buffer by doubling, and the queue keeps
			// one exact copy; each event's own values come on top.
			allocated := int64(after.TotalAlloc - before.TotalAlloc)
			if limit := 4*counted + 8<<20; allocated > limit {
				t.Errorf("queuing %d bytes allocated %d bytes, more than %d", counted, allocated, limit)
			}
		})
	}
}
