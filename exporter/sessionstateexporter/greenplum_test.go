// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// Greenplum's own figures of a session reach yagpcc's fields and
// GetClusterTop through the real processor: session 12 spills (its query
// keeps the most it held), 13 waits for a lock 11 holds, 11 has vmem.
func TestGreenplumFiguresReachTheAPI(t *testing.T) {
	srv := startDefault(t)
	factory := snapshotdiffprocessor.NewFactory()
	proc, err := factory.CreateMetrics(context.Background(), processortest.NewNopSettings(factory.Type()), factory.CreateDefaultConfig(), srv.exp)
	if err != nil {
		t.Fatal(err)
	}
	spills := []int64{300 << 20, 100 << 20} // held at the first and the second snapshot
	for i, held := range spills {
		s := receiverScrape(t0.Add(time.Duration(i)*time.Minute), []int64{11, 12, 13}, threeSessions(float64(i)))
		for j := range s.Sessions {
			switch s.Sessions[j].ID {
			case 11:
				s.Sessions[j].Greenplum = &snapshot.GreenplumSession{Memory: []snapshot.SegmentMemory{{Segment: 0, Bytes: 64 << 20}, {Segment: 1, Bytes: 32 << 20, Runaway: true}}}
			case 12:
				s.Sessions[j].QueryStart = t0.Add(-time.Minute)
				s.Sessions[j].Greenplum = &snapshot.GreenplumSession{Spill: []snapshot.Spill{{Segment: 0, CommandCount: 3, Bytes: held / 2, Files: 2}, {Segment: 1, CommandCount: 3, Bytes: held / 2, Files: 2}}}
			case 13:
				s.Sessions[j].Greenplum = &snapshot.GreenplumSession{Wait: &snapshot.LockWait{Segment: -1, Mode: "AccessShareLock", Object: "public.t", Blocker: 11, BlockerMode: "AccessExclusiveLock"}}
			}
		}
		if err := proc.ConsumeMetrics(context.Background(), s.Metrics()); err != nil {
			t.Fatal(err)
		}
	}

	resp, err := srv.client.GetGPSessions(ctxTimeout(t), &yagpcc.GetGPSessionsReq{})
	if err != nil {
		t.Fatal(err)
	}
	states := map[int64]*yagpcc.SessionState{}
	for _, st := range resp.GetSessionsState() {
		states[st.GetSessionKey().GetSessId()] = st
	}
	if sp := states[12].GetLastMetrics().GetSpill(); sp.GetTotalBytes() != 100<<20 || sp.GetFileCount() != 4 {
		t.Errorf("session 12 last_metrics.spill %v, want the 100 MiB in 4 files held now", sp)
	}
	if sp := states[12].GetQueryMetrics().GetSpill(); sp.GetTotalBytes() != 300<<20 {
		t.Errorf("session 12 query_metrics.spill %v, want the most its query held, 300 MiB", sp)
	}
	if states[11].GetLastMetrics().GetSpill() != nil {
		t.Errorf("session 11 holds no workfiles, yet spill %v", states[11].GetLastMetrics().GetSpill())
	}
	info := states[13].GetSessionInfo()
	if info.GetBlockedBySessId() != 11 || info.GetWaitMode() != "AccessShareLock" || info.GetLockedItem() != "public.t" || info.GetLockedMode() != "AccessExclusiveLock" {
		t.Errorf("session 13 lock fields: blocked by %d, %q on %q held %q", info.GetBlockedBySessId(), info.GetWaitMode(), info.GetLockedItem(), info.GetLockedMode())
	}

	top, err := gpotelv1.NewClusterTopClient(srv.conn).GetClusterTop(ctxTimeout(t), &gpotelv1.GetClusterTopRequest{Key: gpotelv1.TopKey_TOP_KEY_SPILL})
	if err != nil {
		t.Fatal(err)
	}
	if ids := sessionIDs(top); len(ids) == 0 || ids[0] != 12 {
		t.Errorf("ranked by spill: %v, want 12 first", ids)
	}
	lines := map[int64]*gpotelv1.SessionTop{}
	for _, s := range top.GetSessions() {
		lines[s.GetSessId()] = s
	}
	if l := lines[11]; l.VmemBytes == nil || l.GetVmemBytes() != 96<<20 || !l.GetRunaway() {
		t.Errorf("session 11 vmem %v runaway %v, want 96 MiB and runaway", l.VmemBytes, l.GetRunaway())
	}
	if l := lines[13]; l.GetBlockedBySessId() != 11 || l.GetLockedItem() != "public.t" {
		t.Errorf("session 13 line: blocked by %d on %q", l.GetBlockedBySessId(), l.GetLockedItem())
	}
	if l := lines[12]; l.VmemBytes != nil {
		t.Errorf("session 12 has no vmem figure, yet %d", l.GetVmemBytes())
	}
	var spilled bool
	for _, q := range top.GetQueries() {
		if q.GetSessId() == 12 && !q.GetCompleted() {
			spilled = q.GetSpillBytes() == 100<<20 && q.GetSpillBytesMax() == 300<<20
		}
	}
	if !spilled {
		t.Errorf("session 12's running query does not hold 100 MiB with 300 MiB its most: %v", top.GetQueries())
	}
}
