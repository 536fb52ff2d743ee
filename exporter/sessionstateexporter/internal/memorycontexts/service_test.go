// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memorycontexts

import (
	"fmt"
	"testing"
	"time"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

func backendWith(host string, seg int32, pid int64, grand int64, ctxs ...*gpotelv1.MemoryContext) *gpotelv1.BackendMemoryContexts {
	return &gpotelv1.BackendMemoryContexts{Hostname: host, SegmentId: seg, Pid: pid, Contexts: ctxs,
		GrandTotal: &gpotelv1.MemoryContext{TotalBytes: grand}}
}

func mc(name string, total, used int64, agg int32) *gpotelv1.MemoryContext {
	return &gpotelv1.MemoryContext{Name: name, TotalBytes: total, UsedBytes: used, AggregatedContexts: agg}
}

func TestRollUpSumsByNameLargestFirstWithTopBackends(t *testing.T) {
	backends := []*gpotelv1.BackendMemoryContexts{
		backendWith("mdw", -1, 10, 1000, mc("TopMemoryContext", 100, 50, 0), mc("ExecutorState", 300, 200, 0), mc("ExecutorState", 100, 100, 0)),
		backendWith("sdw1", 0, 20, 5000, mc("TopMemoryContext", 100, 60, 0), mc("ExecutorState", 4000, 3900, 0), mc("more child contexts", 50, 40, 7)),
		backendWith("sdw1", 1, 30, 2000, mc("TopMemoryContext", 100, 70, 0), mc("ExecutorState", 1000, 900, 0)),
		{Hostname: "sdw2", SegmentId: 2, Pid: 40, Error: "Unavailable: connection refused"},
	}
	rows, grand, partial := rollUp(backends, 2)
	if !partial {
		t.Error("a backend without an answer must make the roll-up partial")
	}
	if grand != 8000 {
		t.Errorf("grand total %d, want the answering backends' 8000", grand)
	}
	if len(rows) != 3 || rows[0].GetName() != "ExecutorState" || rows[1].GetName() != "TopMemoryContext" || rows[2].GetName() != "more child contexts" {
		t.Fatalf("rows %v", rows)
	}
	ex := rows[0]
	if ex.GetTotalBytes() != 5400 || ex.GetUsedBytes() != 5100 || ex.GetContexts() != 4 || ex.GetBackends() != 3 {
		t.Errorf("ExecutorState %+v", ex)
	}
	if len(ex.GetTopBackends()) != 2 || ex.GetTopBackends()[0].GetPid() != 20 || ex.GetTopBackends()[0].GetTotalBytes() != 4000 ||
		ex.GetTopBackends()[1].GetPid() != 30 {
		t.Errorf("top backends %v, want pid 20 (4000 B) then pid 30", ex.GetTopBackends())
	}
	if rows[2].GetContexts() != 7 {
		t.Errorf("an aggregate row counts the contexts it holds: %d", rows[2].GetContexts())
	}
}

// Each caller has its own bucket, refilled at the rate; the callers
// remembered are bounded, the ones beyond share a bucket. (The exporter's
// TestMemoryContextRequestsAreRateLimited asks through the server.)
func TestMemoryContextRequestsAreRateLimitedPerCaller(t *testing.T) {
	b := newCallerBuckets(0.5, 2)
	now := time.Now()
	for _, caller := range []string{"a", "a", "b", "b"} {
		if _, ok := b.take(caller, now); !ok {
			t.Fatalf("caller %s within its burst refused", caller)
		}
	}
	if wait, ok := b.take("a", now); ok || wait != 2*time.Second {
		t.Errorf("caller a past its burst: %v %s, want refused for 2s", ok, wait)
	}
	if _, ok := b.take("a", now.Add(2*time.Second)); !ok {
		t.Error("caller a 2 s later: refused, want one token back")
	}
	for i := range 3 * maxTrackedCallers {
		b.take(fmt.Sprintf("spray-%d", i), now)
	}
	if n := len(b.byCaller); n > maxTrackedCallers {
		t.Errorf("%d callers remembered, more than %d", n, maxTrackedCallers)
	}
}
