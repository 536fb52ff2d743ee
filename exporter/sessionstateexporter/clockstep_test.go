package sessionstateexporter

import (
	"context"
	"math"
	"testing"
	"time"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

func TestServingResumesAfterTheWallClockStepsBack(t *testing.T) {
	srv := startDefault(t)
	proc := processorInFront(t, srv)
	top := gpotelv1.NewClusterTopClient(srv.conn)
	// Session 7 runs one process; one scrape every 15 s of real time. After
	// the second the wall clock is stepped back by 10 min 15 s; session 8 was
	// seen only before the step.
	born := t0.Add(-time.Hour)
	steps := []struct {
		at       time.Duration
		cpu      float64
		sessions []int64
		wantLast float64 // user CPU seconds over last_metrics (the 5m window)
	}{
		{0, 1, []int64{7, 8}, 0},
		{15 * time.Second, 2.5, []int64{7, 8}, 1.5},
		{-10 * time.Minute, 4, []int64{7}, 0}, // a new timeline: no interval yet
		{-10*time.Minute + 15*time.Second, 6, []int64{7}, 2},
		{-10*time.Minute + 30*time.Second, 9, []int64{7}, 5},
	}
	for _, s := range steps {
		at := t0.Add(s.at)
		md := receiverSnapshotOf(at, s.sessions, []receiverProcess{{session: 7, host: "sdw1", segment: 0, pid: 700, created: born, cpuUser: s.cpu}})
		if err := proc.ConsumeMetrics(context.Background(), md); err != nil {
			t.Fatal(err)
		}
		resp, err := srv.client.GetGPSessions(ctxTimeout(t), &yagpcc.GetGPSessionsReq{})
		if err != nil {
			t.Fatal(err)
		}
		if got := sessIDs(resp); !equalInts(got, s.sessions) {
			t.Fatalf("snapshot at %v: sessions %v, want %v", s.at, got, s.sessions)
		}
		st := resp.SessionsState[0]
		if !st.GetTime().AsTime().Equal(at) {
			t.Fatalf("snapshot at %v: served the snapshot of %v", s.at, st.GetTime().AsTime().Sub(t0))
		}
		if got := st.GetLastMetrics().GetSystemStat().GetUserTimeSeconds(); math.Abs(got-s.wantLast) > 1e-9 {
			t.Fatalf("snapshot at %v: last_metrics user time %v, want %v", s.at, got, s.wantLast)
		}
		if got := st.GetTotalMetrics().GetSystemStat().GetUserTimeSeconds(); got != s.cpu {
			t.Fatalf("snapshot at %v: total_metrics user time %v, want %v", s.at, got, s.cpu)
		}
		tr, err := top.GetClusterTop(ctxTimeout(t), &gpotelv1.GetClusterTopRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Unix(0, tr.GetSnapshotTimeUnixNano()); !got.Equal(at) {
			t.Fatalf("snapshot at %v: GetClusterTop serves the snapshot of %v", s.at, got.Sub(t0))
		}
	}
}
