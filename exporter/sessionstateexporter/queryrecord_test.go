// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"math"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/internal/statustest"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

func closeTo(got, want float64) bool { return math.Abs(got-want) < 1e-6 }

// The real processor in front: a query that ended between two snapshots
// and the one that followed it, on the coordinator and one segment.
func TestQueriesBehindTheSnapshotdiffProcessor(t *testing.T) {
	srv := startDefault(t)
	proc := processorInFront(t, srv)

	born := t0.Add(-time.Hour)
	first, second := t0.Add(-30*time.Second), t0.Add(30*time.Second)
	snaps := []pmetric.Metrics{
		withQueryStart(receiverScrape(t0, []int64{7}, []receiverProcess{
			{host: testCoordinator, segment: -1, pid: 7007, created: born, cpuUser: 10, cpuSys: 1},
			{host: "sdw1", segment: 0, pid: 300, created: born, cpuUser: 20, cpuSys: 2},
		}), first),
		// The first query ended at t0+30s, when the second started: the minute is half each's.
		withQueryStart(receiverScrape(t0.Add(time.Minute), []int64{7}, []receiverProcess{
			{host: testCoordinator, segment: -1, pid: 7007, created: born, cpuUser: 13, cpuSys: 1.5},
			{host: "sdw1", segment: 0, pid: 300, created: born, cpuUser: 26, cpuSys: 2.5},
		}), second),
	}
	for _, md := range snaps {
		if err := proc.ConsumeMetrics(context.Background(), md); err != nil {
			t.Fatal(err)
		}
	}
	ctx := ctxTimeout(t)

	sess, err := srv.client.GetGPSession(ctx, &yagpcc.GetGPSessionReq{SessionKey: &yagpcc.SessionKey{SessId: 7, TmId: testTmID}})
	if err != nil {
		t.Fatal(err)
	}
	st := sess.GetSessionsState()
	wantKey := &yagpcc.QueryKey{Tmid: testTmID, Ssid: 7, QueryStart: timestamppb.New(second)}
	assertProtoEqual(t, st.GetRunningQuery(), wantKey)
	if qs := st.GetQueryMetrics().GetSystemStat(); !closeTo(qs.GetUserTimeSeconds(), 4.5) || !closeTo(qs.GetKernelTimeSeconds(), 0.5) {
		t.Errorf("query_metrics user %v system %v, want 4.5 and 0.5 (half of the minute)", qs.GetUserTimeSeconds(), qs.GetKernelTimeSeconds())
	}

	// The running query, asked for by session only and by its full key.
	for _, k := range []*yagpcc.QueryKey{{Tmid: testTmID, Ssid: 7}, wantKey} {
		resp, err := srv.client.GetGPQuery(ctx, &yagpcc.GetGPQueryReq{QueryKey: k})
		if err != nil {
			t.Fatal(err)
		}
		qs := resp.GetQueriesData().GetQueryStat()
		if qs.GetCompleted() || qs.GetQueryStatus() != yagpcc.QueryStatus_QUERY_STATUS_START || !closeTo(qs.GetTotalQueryMetrics().GetSystemStat().GetRunningTimeSeconds(), 5) {
			t.Errorf("running query %v: completed %v status %v running time %v, want running, 5 s", k, qs.GetCompleted(),
				qs.GetQueryStatus(), qs.GetTotalQueryMetrics().GetSystemStat().GetRunningTimeSeconds())
		}
		if qs.GetQueryInfo().GetQueryText() != "select 7" {
			t.Errorf("query text %q, want the session's", qs.GetQueryInfo().GetQueryText())
		}
	}

	// The ended one, by its query_start: final figures and per segment.
	resp, err := srv.client.GetGPQuery(ctx, &yagpcc.GetGPQueryReq{QueryKey: &yagpcc.QueryKey{Tmid: testTmID, Ssid: 7, QueryStart: timestamppb.New(first)}})
	if err != nil {
		t.Fatal(err)
	}
	qs := resp.GetQueriesData().GetQueryStat()
	if !qs.GetCompleted() || qs.GetQueryStatus() != yagpcc.QueryStatus_QUERY_STATUS_DONE || !qs.GetEndTime().AsTime().Equal(second) {
		t.Errorf("ended query: completed %v status %v end %v, want done at %v", qs.GetCompleted(), qs.GetQueryStatus(), qs.GetEndTime().AsTime(), second)
	}
	if !qs.GetTotalQueryMetrics().GetSystemStat().GetPartial() {
		t.Error("ended query not partial although it started before the first snapshot")
	}
	segs := resp.GetQueriesData().GetSegmentQueryMetrics()
	if len(segs) != 2 || segs[0].GetSegmentKey().GetSegindex() != -1 || segs[1].GetSegmentKey().GetSegindex() != 0 ||
		!closeTo(segs[0].GetSegmentMetrics().GetSystemStat().GetRunningTimeSeconds(), 1.75) ||
		!closeTo(segs[1].GetSegmentMetrics().GetSystemStat().GetRunningTimeSeconds(), 3.25) || segs[1].GetHostname() != "sdw1" {
		t.Errorf("segment metrics %v, want coordinator 1.75 s and segment 0 on sdw1 3.25 s", segs)
	}

	_, err = srv.client.GetGPQuery(ctx, &yagpcc.GetGPQueryReq{QueryKey: &yagpcc.QueryKey{Tmid: testTmID, Ssid: 7, Ccnt: 9}})
	statustest.AssertCode(t, err, codes.NotFound, "ccnt 9")
}
