// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/viewtest"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/statustest"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const testTmID = viewtest.TmID

// fullSession sets every field the contract carries.
func fullSession() testSession {
	return testSession{
		sessID: 42, tmID: testTmID, pid: 4242, db: "sales", user: "alice",
		meta: map[string]any{
			pipeline.MetaApplicationName:  "psql",
			pipeline.MetaClientAddr:       "10.0.0.7",
			pipeline.MetaClientHostname:   "laptop",
			pipeline.MetaClientPort:       int64(51234),
			pipeline.MetaBackendStart:     "2026-03-01T11:00:00.5Z",
			pipeline.MetaXactStart:        "2026-03-01T11:59:00Z",
			pipeline.MetaQueryStart:       "2026-03-01T11:59:30.25Z",
			pipeline.MetaStateChange:      "2026-03-01T11:59:30.25Z",
			pipeline.MetaState:            "active",
			pipeline.MetaWaiting:          true,
			pipeline.MetaWaitingReason:    "lock",
			pipeline.MetaWaitEventType:    "Lock",
			pipeline.MetaWaitEvent:        "relation",
			pipeline.MetaBackendType:      "client backend",
			pipeline.MetaBackendXID:       "1234",
			pipeline.MetaBackendXmin:      "1200",
			pipeline.MetaRsgID:            int64(6438),
			pipeline.MetaRsgName:          "admin_group",
			pipeline.MetaRsgQueueDuration: "00:00:01",
			pipeline.MetaQuery:            "select count(*) from t",
			pipeline.MetaQueryTruncated:   false,
		},
		last: &testFigures{user: 1.5, sys: 0.25, diskDelay: 0.125, runDelay: 0.0625, span: 299.5,
			readBytes: 4096, writeBytes: 8192, rchar: 10000, wchar: 20000, syscr: 11, syscw: 22,
			cancelled: 512, major: 3, minor: 300, vol: 40, invol: 4, partial: true},
		total: &testFigures{user: 100.5, sys: 20.25, diskDelay: 1.5, runDelay: 2.5, span: 0,
			readBytes: 40960, writeBytes: 81920, rchar: 100000, wchar: 200000, syscr: 110, syscw: 220,
			cancelled: 5120, major: 30, minor: 3000, vol: 400, invol: 40},
		other: &testFigures{user: 999, sys: 999, span: 900},
		memory: testMemory{rss: 300 << 20, rssAnon: 100 << 20, rssShared: 200 << 20, virtual: 3 << 30,
			peak: 400 << 20, virtualPeak: 4 << 30, rssMaxHost: 150 << 20, rssAnonMaxHost: 60 << 20},
		processes: 9, host: 3,
	}
}

func ts(s string) *timestamppb.Timestamp {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return timestamppb.New(t)
}

// wantFullState is fullSession as the yagpcc API must show it.
func wantFullState() *yagpcc.SessionState {
	memory := func(st *yagpcc.SystemStat) *yagpcc.SystemStat {
		st.Rss, st.RssAnon, st.RssShared, st.Vsize = 300<<20, 100<<20, 200<<20, 3<<30
		st.VmPeakKb = (4 << 30) / 1024
		st.RssMaxHost, st.RssAnonMaxHost = 150<<20, 60<<20
		st.Processes, st.Hosts = 9, 3
		// The memory waits were reported, as 0: measured, so set.
		zero := proto.Float64(0)
		st.SwapinDelaySeconds, st.FreepagesDelaySeconds, st.ThrashingDelaySeconds = zero, zero, zero
		st.CompactDelaySeconds, st.WpcopyDelaySeconds, st.IrqDelaySeconds = zero, zero, zero
		return st
	}
	return &yagpcc.SessionState{
		Time:       timestamppb.New(t0),
		ClusterId:  "test-cluster",
		Hostname:   testCoordinator,
		SessionKey: &yagpcc.SessionKey{SessId: 42, TmId: testTmID},
		SessionInfo: &yagpcc.SessionInfo{
			Pid: 4242, Database: "sales", User: "alice", ApplicationName: "psql",
			ClientAddr: "10.0.0.7", ClientHostname: "laptop", ClientPort: 51234,
			BackendStart: ts("2026-03-01T11:00:00.5Z"), XactStart: ts("2026-03-01T11:59:00Z"),
			QueryStart: ts("2026-03-01T11:59:30.25Z"), StateChange: ts("2026-03-01T11:59:30.25Z"),
			WaitingReason: "lock", Waiting: true, State: "active", BackendXid: "1234", BackendXmin: "1200",
			Rsgid: 6438, Rsgname: "admin_group", Rsgqueueduration: "00:00:01",
			WaitEventType: "Lock", WaitEvent: "relation", BackendType: "client backend",
		},
		RunningQuery: &yagpcc.QueryKey{Tmid: testTmID, Ssid: 42},
		RunningQueryInfo: &yagpcc.QueryInfo{
			QueryText: "select count(*) from t", UserName: "alice", DatabaseName: "sales",
			Rsgname: "admin_group", StartTime: ts("2026-03-01T11:59:30.25Z"),
		},
		LastMetrics: &yagpcc.GPMetrics{SystemStat: memory(&yagpcc.SystemStat{
			RunningTimeSeconds: 1.75, UserTimeSeconds: 1.5, KernelTimeSeconds: 0.25,
			Rchar: 10000, Wchar: 20000, Syscr: 11, Syscw: 22, ReadBytes: 4096, WriteBytes: 8192,
			CancelledWriteBytes: 512, RunDelaySeconds: proto.Float64(0.0625), BlkioDelaySeconds: proto.Float64(0.125),
			MinorFaults: 300, MajorFaults: 3, VoluntaryCtxtSwitches: 40, NonvoluntaryCtxtSwitches: 4,
			WindowSeconds: 299.5, Partial: true,
		})},
		TotalMetrics: &yagpcc.GPMetrics{SystemStat: memory(&yagpcc.SystemStat{
			RunningTimeSeconds: 120.75, UserTimeSeconds: 100.5, KernelTimeSeconds: 20.25,
			Rchar: 100000, Wchar: 200000, Syscr: 110, Syscw: 220, ReadBytes: 40960, WriteBytes: 81920,
			CancelledWriteBytes: 5120, RunDelaySeconds: proto.Float64(2.5), BlkioDelaySeconds: proto.Float64(1.5),
			MinorFaults: 3000, MajorFaults: 30, VoluntaryCtxtSwitches: 400, NonvoluntaryCtxtSwitches: 40,
		})},
	}
}

func assertProtoEqual(t *testing.T, got, want proto.Message) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Fatalf("mismatch\n got: %s\nwant: %s", prototext.Format(got), prototext.Format(want))
	}
}

func TestGetGPSessionsFillsEveryKnownField(t *testing.T) {
	srv := startDefault(t)
	srv.consume(t, buildSnapshot(t0, []testSession{fullSession()}))
	resp, err := srv.client.GetGPSessions(ctxTimeout(t), &yagpcc.GetGPSessionsReq{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.SessionsState) != 1 || resp.NextPageToken != "" {
		t.Fatalf("want one session and no next page, got %d, %q", len(resp.SessionsState), resp.NextPageToken)
	}
	assertProtoEqual(t, resp.SessionsState[0], wantFullState())
}

// A wait no process of the session reported (kernel.task_delayacct off)
// is absent from GetGPSessions' figures, over the window and the
// lifetime, never 0; a wait reported stays.
func TestUnreportedWaitsAreAbsent(t *testing.T) {
	srv := startDefault(t)
	s := fullSession()
	s.unreported = 1<<pipeline.DiskDelay | 1<<pipeline.DelaySwapin
	srv.consume(t, buildSnapshot(t0, []testSession{s}))
	resp, err := srv.client.GetGPSession(ctxTimeout(t), &yagpcc.GetGPSessionReq{SessionKey: &yagpcc.SessionKey{SessId: 42, TmId: testTmID}})
	if err != nil {
		t.Fatal(err)
	}
	for what, st := range map[string]*yagpcc.SystemStat{
		"last": resp.GetSessionsState().GetLastMetrics().GetSystemStat(), "total": resp.GetSessionsState().GetTotalMetrics().GetSystemStat(),
	} {
		if st.BlkioDelaySeconds != nil || st.SwapinDelaySeconds != nil {
			t.Errorf("%s: block I/O wait %v, swap-in wait %v: want both absent", what, st.BlkioDelaySeconds, st.SwapinDelaySeconds)
		}
		if st.RunDelaySeconds == nil {
			t.Errorf("%s: the run-queue wait some process reported is absent", what)
		}
	}
}

func TestIdleSessionHasNoRunningQuery(t *testing.T) {
	srv := startDefault(t)
	s := fullSession()
	s.meta[pipeline.MetaState] = "idle in transaction"
	srv.consume(t, buildSnapshot(t0, []testSession{s}))
	resp, err := srv.client.GetGPSession(ctxTimeout(t), &yagpcc.GetGPSessionReq{SessionKey: &yagpcc.SessionKey{SessId: 42, TmId: testTmID}})
	if err != nil {
		t.Fatal(err)
	}
	want := wantFullState()
	want.SessionInfo.State = "idle in transaction"
	want.RunningQuery, want.RunningQueryInfo = nil, nil
	assertProtoEqual(t, resp.SessionsState, want)
}

func TestHostnameOverride(t *testing.T) {
	cfg := testConfig()
	cfg.Hostname = "coordinator.example"
	srv := startServer(t, cfg, nopHost())
	srv.consume(t, buildSnapshot(t0, []testSession{fullSession()}))
	resp, err := srv.client.GetGPSessions(ctxTimeout(t), &yagpcc.GetGPSessionsReq{})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.SessionsState[0].Hostname; got != "coordinator.example" {
		t.Fatalf("hostname %q, want the configured override", got)
	}
}

func TestMissingLastWindowLeavesLastMetricsEmptyAndLogsOnce(t *testing.T) {
	cfg := testConfig()
	cfg.LastMetricsWindow = 10 * time.Minute // the snapshot carries 5m and 15m only
	srv := startServer(t, cfg, nopHost())
	srv.consume(t, buildSnapshot(t0, []testSession{fullSession()}))
	srv.consume(t, buildSnapshot(t0.Add(10*time.Second), []testSession{fullSession()}))
	resp, err := srv.client.GetGPSessions(ctxTimeout(t), &yagpcc.GetGPSessionsReq{})
	if err != nil {
		t.Fatal(err)
	}
	got := resp.SessionsState[0]
	if got.LastMetrics != nil {
		t.Fatalf("last_metrics must be absent without the configured window, got %s", prototext.Format(got.LastMetrics))
	}
	assertProtoEqual(t, got.TotalMetrics, wantFullState().TotalMetrics)
	if n := srv.logs.FilterMessageSnippet("last_metrics_window").Len(); n != 1 {
		t.Fatalf("want the missing window logged once, got %d lines", n)
	}
}

func TestWindowSpelledDifferentlyStillMatches(t *testing.T) {
	cfg := testConfig()
	cfg.LastMetricsWindow = 15 * time.Minute // the snapshot spells it "15m"
	srv := startServer(t, cfg, nopHost())
	srv.consume(t, buildSnapshot(t0, []testSession{fullSession()}))
	resp, err := srv.client.GetGPSessions(ctxTimeout(t), &yagpcc.GetGPSessionsReq{})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.SessionsState[0].GetLastMetrics().GetSystemStat().GetWindowSeconds(); got != 900 {
		t.Fatalf("window_seconds %v, want the 15m window's span 900", got)
	}
}

func TestShowSystemHidesSystemSessionsByDefault(t *testing.T) {
	srv := startDefault(t)
	client := fullSession()
	system := fullSession()
	system.sessID, system.system = 7, true
	srv.consume(t, buildSnapshot(t0, []testSession{client, system}))
	for _, show := range []bool{false, true} {
		resp, err := srv.client.GetGPSessions(ctxTimeout(t), &yagpcc.GetGPSessionsReq{ShowSystem: show})
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]int{false: 1, true: 2}[show]
		if len(resp.SessionsState) != want {
			t.Fatalf("show_system=%t: %d sessions, want %d", show, len(resp.SessionsState), want)
		}
		if show && !resp.SessionsState[0].SessionInfo.System {
			t.Fatalf("session 7 must carry system=true")
		}
	}
}

func TestHideEmptyQueries(t *testing.T) {
	srv := startDefault(t)
	active := fullSession()
	idle := fullSession()
	idle.sessID = 43
	idle.meta = map[string]any{pipeline.MetaState: "idle", pipeline.MetaQuery: "select 1"}
	activeEmpty := fullSession()
	activeEmpty.sessID = 44
	activeEmpty.meta = map[string]any{pipeline.MetaState: "active"}
	srv.consume(t, buildSnapshot(t0, []testSession{active, idle, activeEmpty}))
	resp, err := srv.client.GetGPSessions(ctxTimeout(t), &yagpcc.GetGPSessionsReq{HideEmptyQueries: true, ShowQueryType: yagpcc.RunningQueryType_RQT_LAST})
	if err != nil {
		t.Fatal(err)
	}
	if got := sessIDs(resp); !equalInts(got, []int64{42}) {
		t.Fatalf("hide_empty_queries: got sessions %v, want [42]", got)
	}
	_, err = srv.client.GetGPSessions(ctxTimeout(t), &yagpcc.GetGPSessionsReq{ShowQueryType: 9})
	statustest.AssertCode(t, err, codes.InvalidArgument, "show_query_type")
}

func TestGetGPSession(t *testing.T) {
	srv := startDefault(t)
	srv.consume(t, buildSnapshot(t0, []testSession{fullSession()}))
	ctx := ctxTimeout(t)
	resp, err := srv.client.GetGPSession(ctx, &yagpcc.GetGPSessionReq{SessionKey: &yagpcc.SessionKey{SessId: 42, TmId: testTmID}})
	if err != nil {
		t.Fatal(err)
	}
	assertProtoEqual(t, resp.SessionsState, wantFullState())
	_, err = srv.client.GetGPSession(ctx, &yagpcc.GetGPSessionReq{SessionKey: &yagpcc.SessionKey{SessId: 42, TmId: testTmID + 1}})
	statustest.AssertCode(t, err, codes.NotFound, "sess_id 42")
	_, err = srv.client.GetGPSession(ctx, &yagpcc.GetGPSessionReq{})
	statustest.AssertCode(t, err, codes.InvalidArgument, "session_key")
}

func TestGetTotalSessionsStatCountsLiveClientSessionsPerState(t *testing.T) {
	cfg := testConfig()
	cfg.SessionGracePeriod = time.Minute
	srv := startServer(t, cfg, nopHost())
	mk := func(id int64, state string, system bool) testSession {
		return testSession{sessID: id, tmID: testTmID, system: system, meta: map[string]any{pipeline.MetaState: state}}
	}
	gone := mk(99, "active", false)
	srv.consume(t, buildSnapshot(t0, []testSession{gone}))
	srv.consume(t, buildSnapshot(t0.Add(10*time.Second), []testSession{
		mk(1, "active", false), mk(2, "active", false), mk(3, "idle", false),
		mk(4, "idle in transaction", false), mk(5, "", false), mk(6, "active", true),
	}))
	resp, err := srv.client.GetTotalSessionsStat(ctxTimeout(t), &yagpcc.GetTotalSessionsReq{})
	if err != nil {
		t.Fatal(err)
	}
	want := &yagpcc.GetTotalSessionsResponse{SessionsStat: []*yagpcc.SessionStat{
		{State: "active", Count: 2}, {State: "idle", Count: 1}, {State: "idle in transaction", Count: 1}, {State: "unknown", Count: 1},
	}}
	assertProtoEqual(t, resp, want)
}

func TestGetGPQueriesListsLiveRunningClientSessions(t *testing.T) {
	cfg := testConfig()
	cfg.SessionGracePeriod = time.Minute
	srv := startServer(t, cfg, nopHost())
	mk := func(id int64, state, user string, system bool) testSession {
		return testSession{sessID: id, tmID: testTmID, user: user, system: system,
			meta: map[string]any{pipeline.MetaState: state, pipeline.MetaQuery: "q" + state}}
	}
	srv.consume(t, buildSnapshot(t0, []testSession{mk(99, "active", "alice", false)}))
	srv.consume(t, buildSnapshot(t0.Add(10*time.Second), []testSession{
		mk(1, "active", "alice", false), mk(2, "fastpath function call", "bob", false), mk(3, "idle", "alice", false),
		mk(4, "idle in transaction", "alice", false), mk(5, "active", "alice", true),
	}))
	ctx := ctxTimeout(t)
	resp, err := srv.client.GetGPQueries(ctx, &yagpcc.GetGPQueriesReq{})
	if err != nil {
		t.Fatal(err)
	}
	if got := sessIDs(resp); !equalInts(got, []int64{1, 2}) {
		t.Fatalf("GetGPQueries: sessions %v, want [1 2]", got)
	}
	resp, err = srv.client.GetGPQueries(ctx, &yagpcc.GetGPQueriesReq{
		Filter: []*yagpcc.SessionFilter{{FieldName: yagpcc.SessionFilterEnum_SESSION_FILTER_USER, Value: "bob"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := sessIDs(resp); !equalInts(got, []int64{2}) {
		t.Fatalf("GetGPQueries user=bob: sessions %v, want [2]", got)
	}
	// The gone session 99 is still served by GetGPSessions during its grace period.
	all, err := srv.client.GetGPSessions(ctx, &yagpcc.GetGPSessionsReq{})
	if err != nil {
		t.Fatal(err)
	}
	if got := sessIDs(all); !equalInts(got, []int64{1, 2, 3, 4, 99}) {
		t.Fatalf("GetGPSessions: sessions %v, want [1 2 3 4 99]", got)
	}
}

func TestGetGPQuery(t *testing.T) {
	cfg := testConfig()
	cfg.SessionGracePeriod = time.Minute
	srv := startServer(t, cfg, nopHost())
	idle := fullSession()
	idle.sessID = 43
	idle.meta = map[string]any{pipeline.MetaState: "idle", pipeline.MetaQuery: "select 1"}
	gone := fullSession()
	gone.sessID = 44
	srv.consume(t, buildSnapshot(t0.Add(-10*time.Second), []testSession{gone}))
	srv.consume(t, buildSnapshot(t0, []testSession{fullSession(), idle}))
	ctx := ctxTimeout(t)

	resp, err := srv.client.GetGPQuery(ctx, &yagpcc.GetGPQueryReq{QueryKey: &yagpcc.QueryKey{Tmid: testTmID, Ssid: 42}})
	if err != nil {
		t.Fatal(err)
	}
	full := wantFullState()
	assertProtoEqual(t, resp, &yagpcc.GetGPQueryResponse{QueriesData: &yagpcc.TotalQueryData{QueryStat: &yagpcc.QueryStat{
		ClusterId: "test-cluster", Hostname: testCoordinator, CollectTime: timestamppb.New(t0),
		QueryKey: &yagpcc.QueryKey{Tmid: testTmID, Ssid: 42}, QueryInfo: full.RunningQueryInfo,
		QueryStatus: yagpcc.QueryStatus_QUERY_STATUS_START, StartTime: full.RunningQueryInfo.StartTime,
		TotalQueryMetrics: full.LastMetrics, SessionState: "active",
	}}})

	for _, ssid := range []int32{43, 44, 1000} {
		_, err = srv.client.GetGPQuery(ctx, &yagpcc.GetGPQueryReq{QueryKey: &yagpcc.QueryKey{Tmid: testTmID, Ssid: ssid}})
		statustest.AssertCode(t, err, codes.NotFound, "in the latest snapshot")
	}
	_, err = srv.client.GetGPQuery(ctx, &yagpcc.GetGPQueryReq{QueryKey: &yagpcc.QueryKey{Tmid: testTmID, Ssid: 42, Ccnt: 5}})
	statustest.AssertCode(t, err, codes.NotFound, "ccnt 5")
	_, err = srv.client.GetGPQuery(ctx, &yagpcc.GetGPQueryReq{})
	statustest.AssertCode(t, err, codes.InvalidArgument, "query_key")
}

func sessIDs(resp *yagpcc.GetGPSessionsResponse) []int64 {
	var ids []int64
	for _, s := range resp.GetSessionsState() {
		ids = append(ids, s.GetSessionKey().GetSessId())
	}
	return ids
}

func equalInts(a, b []int64) bool {
	return slices.Equal(a, b)
}
