// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshot

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
)

func greenplumRoundTrip(t *testing.T, g *GreenplumSession) *GreenplumSession {
	t.Helper()
	at := time.Unix(1_700_000_000, 0)
	md := NewClosingEncoder(Scope{Name: "test"}, at, Switches{}).Encode(&Closing{Time: at, TmID: 1, Dialect: "gp6",
		Sessions: []Session{{ID: 7, PID: 700, Greenplum: g}}})
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		if pipeline.KindOf(rms.At(i).Resource().Attributes()) == pipeline.KindSession {
			return DecodeGreenplum(rms.At(i))
		}
	}
	t.Fatal("no session resource written")
	return nil
}

// The Greenplum figures of a session come back as written: spill per
// segment and command, the lock wait with its blocker, vmem per segment.
func TestGreenplumSessionFiguresRoundTrip(t *testing.T) {
	in := &GreenplumSession{
		Spill: []Spill{{Segment: -1, CommandCount: 3, Bytes: 1 << 20, Files: 2}, {Segment: 0, CommandCount: 3, Bytes: 5 << 30, Files: 9},
			{Segment: 1, CommandCount: 4, Bytes: 7, Files: 1}},
		Wait:   &LockWait{Segment: -1, Mode: "AccessShareLock", Object: "public.t", Blocker: 42, BlockerMode: "AccessExclusiveLock"},
		Memory: []SegmentMemory{{Segment: 0, Bytes: 64 << 20}, {Segment: 1, Bytes: 1 << 30, Runaway: true}},
	}
	if diff := cmp.Diff(in, greenplumRoundTrip(t, in)); diff != "" {
		t.Errorf("round trip (-written +read):\n%s", diff)
	}
	if b, runaway, ok := in.VmemTotal(); b != 64<<20+1<<30 || !runaway || !ok {
		t.Errorf("vmem total = %d, runaway %v, ok %v", b, runaway, ok)
	}
	if got := greenplumRoundTrip(t, nil); got != nil {
		t.Errorf("a session without Greenplum figures reads back %+v, want none", got)
	}
}

// Every session resource is decoded for Greenplum figures and most have
// none: reading one without them allocates nothing.
func TestDecodingASessionWithoutGreenplumFiguresAllocatesNothing(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	md := NewClosingEncoder(Scope{Name: "test"}, at, Switches{}).Encode(&Closing{Time: at, TmID: 1, Sessions: []Session{{ID: 7, PID: 700}}})
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		if pipeline.KindOf(rms.At(i).Resource().Attributes()) != pipeline.KindSession {
			continue
		}
		if n := testing.AllocsPerRun(100, func() { _ = DecodeGreenplum(rms.At(i)) }); n != 0 {
			t.Errorf("%v allocations per session without Greenplum figures, want 0", n)
		}
	}
}

// The locked object (a relation name a user chose, a transaction id) and
// the blocking session name one wait: as data-point attributes each
// row-lock wait would be a series of its own in Prometheus. They travel in
// the metric's metadata; the point's attributes are the segment and the modes.
func TestLockWaitObjectAndBlockerStayOutOfSeriesIdentity(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	wait := &LockWait{Segment: 0, Mode: "ShareLock", Object: "transaction 74211", Blocker: 42, BlockerMode: "ExclusiveLock"}
	md := NewClosingEncoder(Scope{Name: "test"}, at, Switches{}).Encode(&Closing{Time: at, TmID: 1, Dialect: "gp6",
		Sessions: []Session{{ID: 7, PID: 700, Greenplum: &GreenplumSession{Wait: wait}}}})
	found := false
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		pipeline.EachPoint(rms.At(i), func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
			if m.Name() != pipeline.MetricSessionLockWait {
				return
			}
			found = true
			var keys []string
			for k := range dp.Attributes().All() {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if want := []string{pipeline.AttrLockBlockerMode, pipeline.AttrLockMode, pipeline.AttrSegmentID}; !slices.Equal(keys, want) {
				t.Errorf("lock wait point attributes %v, want only %v", keys, want)
			}
			if got := m.Metadata().AsRaw(); got[pipeline.MetaLockObject] != wait.Object || got[pipeline.MetaLockBlockerSessionID] != wait.Blocker {
				t.Errorf("lock wait metadata %v, want %s %q and %s %d", got, pipeline.MetaLockObject, wait.Object, pipeline.MetaLockBlockerSessionID, wait.Blocker)
			}
		})
	}
	if !found {
		t.Fatal("no gpotel.session.lock.wait point written")
	}
}
