// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/segmentagent/taskstats"
)

func exitAt(pid int64, at time.Time) *gpotelv1.ExitRecord {
	return &gpotelv1.ExitRecord{Stats: &gpotelv1.TaskStatsRecord{Pid: pid}, ExitTimeUnixNano: at.UnixNano()}
}

func pids(rs []*gpotelv1.ExitRecord) []int64 {
	out := make([]int64, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.GetStats().GetPid())
	}
	return out
}

func equalPids(a []int64, b ...int64) bool { return slices.Equal(a, b) }

func TestRetriedExitReadReturnsTheSameRecords(t *testing.T) {
	now := time.Now()
	b := newExitBuffer(8, time.Hour, 7)
	for pid := int64(1); pid <= 3; pid++ {
		b.add(exitAt(pid, now))
	}
	first := b.since(0, 0, 100, now) // first call: another epoch
	again := b.since(0, 0, 100, now)
	if !equalPids(pids(first.records), 1, 2, 3) || !equalPids(pids(again.records), 1, 2, 3) || first.nextCursor != 4 {
		t.Fatalf("first %v again %v next %d", pids(first.records), pids(again.records), first.nextCursor)
	}
	b.add(exitAt(4, now))
	next := b.since(7, first.nextCursor, 100, now)
	if !equalPids(pids(next.records), 4) || next.missed != 0 || next.nextCursor != 5 {
		t.Fatalf("after cursor: %v missed %d next %d", pids(next.records), next.missed, next.nextCursor)
	}
	if empty := b.since(7, next.nextCursor, 100, now); len(empty.records) != 0 || empty.nextCursor != 5 {
		t.Fatalf("nothing new: %v next %d", pids(empty.records), empty.nextCursor)
	}
}

func TestFullExitBufferDropsTheOldestAndTheReaderSeesTheGap(t *testing.T) {
	now := time.Now()
	b := newExitBuffer(3, time.Hour, 7)
	for pid := int64(1); pid <= 5; pid++ {
		b.add(exitAt(pid, now))
	}
	p := b.since(7, 1, 100, now)
	if !equalPids(pids(p.records), 3, 4, 5) || p.missed != 2 {
		t.Fatalf("records %v missed %d, want 3 4 5 and 2 missed", pids(p.records), p.missed)
	}
	if dropped, _ := b.losses(); dropped != 2 {
		t.Fatalf("dropped %d, want 2", dropped)
	}
}

func TestExitRecordsOlderThanMaxAgeAreDropped(t *testing.T) {
	now := time.Now()
	b := newExitBuffer(8, time.Minute, 7)
	b.add(exitAt(1, now.Add(-2*time.Minute)))
	b.add(exitAt(2, now))
	p := b.since(7, 1, 100, now)
	if _, expired := b.losses(); !equalPids(pids(p.records), 2) || p.missed != 1 || expired != 1 {
		t.Fatalf("records %v missed %d expired %d", pids(p.records), p.missed, expired)
	}
	b.add(exitAt(3, now))
	if p = b.since(7, p.nextCursor, 100, now.Add(2*time.Minute)); len(p.records) != 0 || p.expired != 2 {
		t.Fatalf("read after max age: %v expired %d", pids(p.records), p.expired)
	}
}

func TestExitReadIsCutAtMaxRecords(t *testing.T) {
	now := time.Now()
	b := newExitBuffer(8, time.Hour, 7)
	for pid := int64(1); pid <= 5; pid++ {
		b.add(exitAt(pid, now))
	}
	p := b.since(7, 1, 2, now)
	if !equalPids(pids(p.records), 1, 2) || !p.more || p.nextCursor != 3 {
		t.Fatalf("records %v more %v next %d", pids(p.records), p.more, p.nextCursor)
	}
	p = b.since(7, p.nextCursor, 10, now)
	if !equalPids(pids(p.records), 3, 4, 5) || p.more {
		t.Fatalf("rest %v more %v", pids(p.records), p.more)
	}
}

func TestExitCursorFromTheFutureReturnsNothing(t *testing.T) {
	now := time.Now()
	b := newExitBuffer(8, time.Hour, 7)
	b.add(exitAt(1, now))
	if p := b.since(7, 99, 10, now); len(p.records) != 0 || p.nextCursor != 2 {
		t.Fatalf("records %v next %d", pids(p.records), p.nextCursor)
	}
}

// TestKernelOverrunsAreSaidToTheCollector: each time the kernel said it
// dropped exit notifications (ENOBUFS) is counted in the answer, for the
// buffer's epoch; other skipped messages are not overruns.
func TestKernelOverrunsAreSaidToTheCollector(t *testing.T) {
	ts := fixtureService(t).TaskStats()
	ctx := context.Background()
	first, err := ts.GetExitRecords(ctx, &gpotelv1.GetExitRecordsRequest{})
	require.NoError(t, err)
	assert.Zero(t, first.GetKernelOverruns())

	ts.skip(taskstats.ErrOverrun)
	ts.skip(fmt.Errorf("%w: short", taskstats.ErrTruncated))
	ts.skip(taskstats.ErrOverrun)
	next, err := ts.GetExitRecords(ctx, &gpotelv1.GetExitRecordsRequest{Epoch: first.GetEpoch(), Cursor: first.GetNextCursor()})
	require.NoError(t, err)
	assert.Equal(t, first.GetEpoch(), next.GetEpoch())
	assert.Equal(t, uint64(2), next.GetKernelOverruns(), "two overruns in this epoch")
	assert.Zero(t, next.GetMissed(), "the kernel's losses are not the buffer's")
}
