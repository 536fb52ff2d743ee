// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/internal/statustest"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// variedSessions gives every sortable field a different order: field f of
// session i takes the value perm_f[i].
func variedSessions(n int, seed uint64) []testSession {
	rng := rand.New(rand.NewPCG(seed, 1))
	type perm []int
	p := func() perm { return rng.Perm(n) }
	pid, db, user, app, addr, chost, port := p(), p(), p(), p(), p(), p(), p()
	bstart, xstart, qstart, schange, wreason, waiting, state := p(), p(), p(), p(), p(), p(), p()
	xid, xmin, rsgid, rsgname, rsgq, query := p(), p(), p(), p(), p(), p()
	fig := func() []*testFigures {
		fs := make([]*testFigures, n)
		q := make([]perm, 16)
		for k := range q {
			q[k] = p()
		}
		for i := range fs {
			f := func(k int) float64 { return float64(q[k][i]) + 0.5 }
			u := func(k int) int64 { return int64(q[k][i]) * 1000 }
			fs[i] = &testFigures{user: f(0), sys: f(1), diskDelay: f(2), runDelay: f(3), span: 300,
				readBytes: u(4), writeBytes: u(5), rchar: u(6), wchar: u(7), syscr: u(8), syscw: u(9),
				cancelled: u(10), major: u(11), minor: u(12), vol: u(13), invol: u(14)}
		}
		return fs
	}
	last, total := fig(), fig()
	rss, anon, shared, virt, vpeak, rssMax, anonMax := p(), p(), p(), p(), p(), p(), p()
	spillBytes, spillFiles, blocker := p(), p(), p()
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	stampAt := func(k int) string { return base.Add(time.Duration(k) * time.Minute).Format(time.RFC3339Nano) }
	word := func(prefix string, k int) string { return fmt.Sprintf("%s%03d", prefix, k) }

	var out []testSession
	for i := 0; i < n; i++ {
		out = append(out, testSession{
			sessID: int64(100 + i), tmID: testTmID, pid: int64(1000 + pid[i]),
			db: word("db", db[i]), user: word("user", user[i]),
			meta: map[string]any{
				pipeline.MetaApplicationName:  word("app", app[i]),
				pipeline.MetaClientAddr:       word("10.0.0.", addr[i]),
				pipeline.MetaClientHostname:   word("host", chost[i]),
				pipeline.MetaClientPort:       int64(40000 + port[i]),
				pipeline.MetaBackendStart:     stampAt(bstart[i]),
				pipeline.MetaXactStart:        stampAt(xstart[i]),
				pipeline.MetaQueryStart:       stampAt(qstart[i]),
				pipeline.MetaStateChange:      stampAt(schange[i]),
				pipeline.MetaWaitingReason:    word("reason", wreason[i]),
				pipeline.MetaWaiting:          waiting[i]%2 == 0,
				pipeline.MetaState:            []string{"active", "fastpath function call"}[state[i]%2],
				pipeline.MetaBackendXID:       word("xid", xid[i]),
				pipeline.MetaBackendXmin:      word("xmin", xmin[i]),
				pipeline.MetaRsgID:            int64(rsgid[i]),
				pipeline.MetaRsgName:          word("rsg", rsgname[i]),
				pipeline.MetaRsgQueueDuration: word("dur", rsgq[i]),
				pipeline.MetaQuery:            word("select ", query[i]),
			},
			last: last[i], total: total[i],
			memory: testMemory{rss: int64(rss[i]) << 20, rssAnon: int64(anon[i]) << 20, rssShared: int64(shared[i]) << 20,
				virtual: int64(virt[i]) << 30, virtualPeak: int64(vpeak[i]) << 30,
				rssMaxHost: int64(rssMax[i]) << 20, rssAnonMaxHost: int64(anonMax[i]) << 20},
			processes: 2, host: 1,
			greenplum: &snapshot.GreenplumSession{
				Spill: []snapshot.Spill{{Segment: 0, CommandCount: 2, Bytes: int64(spillBytes[i]) << 20, Files: int64(spillFiles[i])}},
				Wait:  &snapshot.LockWait{Segment: -1, Mode: "AccessShareLock", Object: "public.t", Blocker: int64(100 + blocker[i]), BlockerMode: "AccessExclusiveLock"}},
		})
	}
	return out
}

// sortableGetters read, from the answer itself, the value each supported
// field sorts by. A field missing here must be refused.
var sortableGetters = map[yagpcc.SessionField]func(*yagpcc.SessionState) any{
	yagpcc.SessionField_SESSION_FIELD_KEY: func(s *yagpcc.SessionState) any {
		return [2]int64{s.SessionKey.TmId, s.SessionKey.SessId}
	},
	yagpcc.SessionField_SESSION_FIELD_HOST:             func(s *yagpcc.SessionState) any { return s.Hostname },
	yagpcc.SessionField_SESSION_FIELD_PID:              func(s *yagpcc.SessionState) any { return s.SessionInfo.Pid },
	yagpcc.SessionField_SESSION_FIELD_DATABASE:         func(s *yagpcc.SessionState) any { return s.SessionInfo.Database },
	yagpcc.SessionField_SESSION_FIELD_USER:             func(s *yagpcc.SessionState) any { return s.SessionInfo.User },
	yagpcc.SessionField_SESSION_FIELD_APPLICATION_NAME: func(s *yagpcc.SessionState) any { return s.SessionInfo.ApplicationName },
	yagpcc.SessionField_SESSION_FIELD_CLIENT_ADDR:      func(s *yagpcc.SessionState) any { return s.SessionInfo.ClientAddr },
	yagpcc.SessionField_SESSION_FIELD_CLIENT_HOSTNAME:  func(s *yagpcc.SessionState) any { return s.SessionInfo.ClientHostname },
	yagpcc.SessionField_SESSION_FIELD_CLIENT_PORT:      func(s *yagpcc.SessionState) any { return s.SessionInfo.ClientPort },
	yagpcc.SessionField_SESSION_FIELD_BACKEND_START:    func(s *yagpcc.SessionState) any { return s.SessionInfo.BackendStart.AsTime().UnixNano() },
	yagpcc.SessionField_SESSION_FIELD_XACT_START:       func(s *yagpcc.SessionState) any { return s.SessionInfo.XactStart.AsTime().UnixNano() },
	yagpcc.SessionField_SESSION_FIELD_QUERY_START:      func(s *yagpcc.SessionState) any { return s.SessionInfo.QueryStart.AsTime().UnixNano() },
	yagpcc.SessionField_SESSION_FIELD_STATE_CHANGE:     func(s *yagpcc.SessionState) any { return s.SessionInfo.StateChange.AsTime().UnixNano() },
	yagpcc.SessionField_SESSION_FIELD_WAITING_REASON:   func(s *yagpcc.SessionState) any { return s.SessionInfo.WaitingReason },
	yagpcc.SessionField_SESSION_FIELD_WAITING: func(s *yagpcc.SessionState) any {
		return map[bool]int64{true: 1}[s.SessionInfo.Waiting]
	},
	yagpcc.SessionField_SESSION_FIELD_STATE:            func(s *yagpcc.SessionState) any { return s.SessionInfo.State },
	yagpcc.SessionField_SESSION_FIELD_BACKEND_XID:      func(s *yagpcc.SessionState) any { return s.SessionInfo.BackendXid },
	yagpcc.SessionField_SESSION_FIELD_BACKEND_XMIN:     func(s *yagpcc.SessionState) any { return s.SessionInfo.BackendXmin },
	yagpcc.SessionField_SESSION_FIELD_RSGID:            func(s *yagpcc.SessionState) any { return s.SessionInfo.Rsgid },
	yagpcc.SessionField_SESSION_FIELD_RSGNAME:          func(s *yagpcc.SessionState) any { return s.SessionInfo.Rsgname },
	yagpcc.SessionField_SESSION_FIELD_RSGQUEUEDURATION: func(s *yagpcc.SessionState) any { return s.SessionInfo.Rsgqueueduration },
	yagpcc.SessionField_QUERY_QUERY_TEXT:               func(s *yagpcc.SessionState) any { return s.RunningQueryInfo.QueryText },
	yagpcc.SessionField_QUERY_USERNAME:                 func(s *yagpcc.SessionState) any { return s.RunningQueryInfo.UserName },
	yagpcc.SessionField_QUERY_DATABASENAME:             func(s *yagpcc.SessionState) any { return s.RunningQueryInfo.DatabaseName },
	yagpcc.SessionField_QUERY_RSGNAME:                  func(s *yagpcc.SessionState) any { return s.RunningQueryInfo.Rsgname },

	yagpcc.SessionField_TOTAL_RUNNINGTIMESECONDS:    total(func(s *yagpcc.SystemStat) any { return s.RunningTimeSeconds }),
	yagpcc.SessionField_TOTAL_USERTIMESECONDS:       total(func(s *yagpcc.SystemStat) any { return s.UserTimeSeconds }),
	yagpcc.SessionField_TOTAL_KERNELTIMESECONDS:     total(func(s *yagpcc.SystemStat) any { return s.KernelTimeSeconds }),
	yagpcc.SessionField_TOTAL_VSIZE:                 total(func(s *yagpcc.SystemStat) any { return s.Vsize }),
	yagpcc.SessionField_TOTAL_RSS:                   total(func(s *yagpcc.SystemStat) any { return s.Rss }),
	yagpcc.SessionField_TOTAL_VMPEAKKB:              total(func(s *yagpcc.SystemStat) any { return s.VmPeakKb }),
	yagpcc.SessionField_TOTAL_RCHAR:                 total(func(s *yagpcc.SystemStat) any { return s.Rchar }),
	yagpcc.SessionField_TOTAL_WCHAR:                 total(func(s *yagpcc.SystemStat) any { return s.Wchar }),
	yagpcc.SessionField_TOTAL_SYSCR:                 total(func(s *yagpcc.SystemStat) any { return s.Syscr }),
	yagpcc.SessionField_TOTAL_SYSCW:                 total(func(s *yagpcc.SystemStat) any { return s.Syscw }),
	yagpcc.SessionField_TOTAL_READ_BYTES:            total(func(s *yagpcc.SystemStat) any { return s.ReadBytes }),
	yagpcc.SessionField_TOTAL_WRITE_BYTES:           total(func(s *yagpcc.SystemStat) any { return s.WriteBytes }),
	yagpcc.SessionField_TOTAL_CANCELLED_WRITE_BYTES: total(func(s *yagpcc.SystemStat) any { return s.CancelledWriteBytes }),
	yagpcc.SessionField_TOTAL_RSS_ANON:              total(func(s *yagpcc.SystemStat) any { return s.RssAnon }),
	yagpcc.SessionField_TOTAL_RUN_DELAY_SECONDS:     total(func(s *yagpcc.SystemStat) any { return s.GetRunDelaySeconds() }),
	yagpcc.SessionField_TOTAL_BLKIO_DELAY_SECONDS:   total(func(s *yagpcc.SystemStat) any { return s.GetBlkioDelaySeconds() }),
	yagpcc.SessionField_LAST_RUNNINGTIMESECONDS:     last(func(s *yagpcc.SystemStat) any { return s.RunningTimeSeconds }),
	yagpcc.SessionField_LAST_USERTIMESECONDS:        last(func(s *yagpcc.SystemStat) any { return s.UserTimeSeconds }),
	yagpcc.SessionField_LAST_KERNELTIMESECONDS:      last(func(s *yagpcc.SystemStat) any { return s.KernelTimeSeconds }),
	yagpcc.SessionField_LAST_VSIZE:                  last(func(s *yagpcc.SystemStat) any { return s.Vsize }),
	yagpcc.SessionField_LAST_RSS:                    last(func(s *yagpcc.SystemStat) any { return s.Rss }),
	yagpcc.SessionField_LAST_VMPEAKKB:               last(func(s *yagpcc.SystemStat) any { return s.VmPeakKb }),
	yagpcc.SessionField_LAST_RCHAR:                  last(func(s *yagpcc.SystemStat) any { return s.Rchar }),
	yagpcc.SessionField_LAST_WCHAR:                  last(func(s *yagpcc.SystemStat) any { return s.Wchar }),
	yagpcc.SessionField_LAST_SYSCR:                  last(func(s *yagpcc.SystemStat) any { return s.Syscr }),
	yagpcc.SessionField_LAST_SYSCW:                  last(func(s *yagpcc.SystemStat) any { return s.Syscw }),
	yagpcc.SessionField_LAST_READ_BYTES:             last(func(s *yagpcc.SystemStat) any { return s.ReadBytes }),
	yagpcc.SessionField_LAST_WRITE_BYTES:            last(func(s *yagpcc.SystemStat) any { return s.WriteBytes }),
	yagpcc.SessionField_LAST_CANCELLED_WRITE_BYTES:  last(func(s *yagpcc.SystemStat) any { return s.CancelledWriteBytes }),
	yagpcc.SessionField_LAST_RSS_ANON:               last(func(s *yagpcc.SystemStat) any { return s.RssAnon }),
	yagpcc.SessionField_LAST_RUN_DELAY_SECONDS:      last(func(s *yagpcc.SystemStat) any { return s.GetRunDelaySeconds() }),
	yagpcc.SessionField_LAST_BLKIO_DELAY_SECONDS:    last(func(s *yagpcc.SystemStat) any { return s.GetBlkioDelaySeconds() }),
	yagpcc.SessionField_LAST_RSS_MAX_HOST:           last(func(s *yagpcc.SystemStat) any { return s.RssMaxHost }),

	yagpcc.SessionField_SESSION_FIELD_BLOCKED_BY: func(s *yagpcc.SessionState) any { return s.SessionInfo.BlockedBySessId },
	yagpcc.SessionField_LAST_SPILL_TOTALBYTES:    func(s *yagpcc.SessionState) any { return s.LastMetrics.GetSpill().GetTotalBytes() },
	yagpcc.SessionField_LAST_SPILL_FILECOUNT:     func(s *yagpcc.SessionState) any { return int64(s.LastMetrics.GetSpill().GetFileCount()) },
	yagpcc.SessionField_TOTAL_SPILL_TOTALBYTES:   func(s *yagpcc.SessionState) any { return s.TotalMetrics.GetSpill().GetTotalBytes() },
	yagpcc.SessionField_TOTAL_SPILL_FILECOUNT:    func(s *yagpcc.SessionState) any { return int64(s.TotalMetrics.GetSpill().GetFileCount()) },
}

func total(f func(*yagpcc.SystemStat) any) func(*yagpcc.SessionState) any {
	return func(s *yagpcc.SessionState) any { return f(s.TotalMetrics.SystemStat) }
}

func last(f func(*yagpcc.SystemStat) any) func(*yagpcc.SessionState) any {
	return func(s *yagpcc.SessionState) any { return f(s.LastMetrics.SystemStat) }
}

func compareAny(a, b any) int {
	switch a := a.(type) {
	case string:
		return strings.Compare(a, b.(string))
	case int64:
		return cmp.Compare(a, b.(int64))
	case uint64:
		return cmp.Compare(a, b.(uint64))
	case float64:
		return cmp.Compare(a, b.(float64))
	case [2]int64:
		bb := b.([2]int64)
		return cmp.Or(cmp.Compare(a[0], bb[0]), cmp.Compare(a[1], bb[1]))
	}
	panic(fmt.Sprintf("no comparison for %T", a))
}

func TestSortByEveryField(t *testing.T) {
	const n = 12
	srv := startDefault(t)
	srv.consume(t, buildSnapshot(t0, variedSessions(n, 7)))
	ctx := ctxTimeout(t)
	fields := make([]int32, 0, len(yagpcc.SessionField_name))
	for v := range yagpcc.SessionField_name {
		fields = append(fields, v)
	}
	slices.Sort(fields)
	for _, v := range append(fields, 5000) {
		field := yagpcc.SessionField(v)
		getter, supported := sortableGetters[field]
		for _, order := range []yagpcc.SortOrder{yagpcc.SortOrder_SORT_ASC, yagpcc.SortOrder_SORT_DESC, yagpcc.SortOrder_SORT_ORDER_UNSPECIFIED} {
			t.Run(fmt.Sprintf("%s/%s", field.String(), order), func(t *testing.T) {
				resp, err := srv.client.GetGPSessions(ctx, &yagpcc.GetGPSessionsReq{
					Field: []*yagpcc.SessionFieldWrapper{{FieldName: field, Order: order}},
				})
				if !supported {
					statustest.AssertCode(t, err, codes.InvalidArgument, field.String())
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.SessionsState) != n {
					t.Fatalf("got %d sessions, want %d", len(resp.SessionsState), n)
				}
				assertSorted(t, resp.SessionsState, getter, order == yagpcc.SortOrder_SORT_DESC)
			})
		}
	}
}

// assertSorted checks the order and that ties fall back to the session key.
func assertSorted(t *testing.T, states []*yagpcc.SessionState, getter func(*yagpcc.SessionState) any, desc bool) {
	t.Helper()
	distinct := 0
	for i := 1; i < len(states); i++ {
		a, b := getter(states[i-1]), getter(states[i])
		c := compareAny(a, b)
		if desc {
			c = -c
		}
		if c > 0 {
			t.Fatalf("position %d: %v comes before %v", i, a, b)
		}
		if c < 0 {
			distinct++
			continue
		}
		ka, kb := states[i-1].SessionKey, states[i].SessionKey
		if ka.TmId > kb.TmId || (ka.TmId == kb.TmId && ka.SessId >= kb.SessId) {
			t.Fatalf("tie at position %d not broken by ascending session key: %v then %v", i, ka, kb)
		}
	}
	if getter(states[0]) != getter(states[len(states)-1]) && distinct == 0 {
		t.Fatalf("no two neighbours differ")
	}
}

func TestSortByTwoFieldsAndAbsentValuesFirst(t *testing.T) {
	srv := startDefault(t)
	sessions := variedSessions(10, 3)
	sessions[4].last = nil // the window is missing for this one
	srv.consume(t, buildSnapshot(t0, sessions))
	ctx := ctxTimeout(t)

	resp, err := srv.client.GetGPSessions(ctx, &yagpcc.GetGPSessionsReq{Field: []*yagpcc.SessionFieldWrapper{
		{FieldName: yagpcc.SessionField_LAST_USERTIMESECONDS, Order: yagpcc.SortOrder_SORT_ASC},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.SessionsState[0].SessionKey.SessId; got != 104 {
		t.Fatalf("ascending: session without last_metrics must come first, got %d", got)
	}
	resp, err = srv.client.GetGPSessions(ctx, &yagpcc.GetGPSessionsReq{Field: []*yagpcc.SessionFieldWrapper{
		{FieldName: yagpcc.SessionField_SESSION_FIELD_STATE, Order: yagpcc.SortOrder_SORT_ASC},
		{FieldName: yagpcc.SessionField_TOTAL_USERTIMESECONDS, Order: yagpcc.SortOrder_SORT_DESC},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(resp.SessionsState); i++ {
		a, b := resp.SessionsState[i-1], resp.SessionsState[i]
		c := strings.Compare(a.SessionInfo.State, b.SessionInfo.State)
		if c > 0 || (c == 0 && a.TotalMetrics.SystemStat.UserTimeSeconds < b.TotalMetrics.SystemStat.UserTimeSeconds) {
			t.Fatalf("position %d out of order: (%s, %v) then (%s, %v)", i, a.SessionInfo.State,
				a.TotalMetrics.SystemStat.UserTimeSeconds, b.SessionInfo.State, b.TotalMetrics.SystemStat.UserTimeSeconds)
		}
	}
	_, err = srv.client.GetGPSessions(ctx, &yagpcc.GetGPSessionsReq{Field: []*yagpcc.SessionFieldWrapper{
		{FieldName: yagpcc.SessionField_SESSION_FIELD_PID, Order: 7},
	}})
	statustest.AssertCode(t, err, codes.InvalidArgument, "sort order")
}

func TestFilters(t *testing.T) {
	srv := startDefault(t)
	mk := func(id, tm int64, user, db, app, chost, state, rsg string) testSession {
		return testSession{sessID: id, tmID: tm, user: user, db: db, meta: map[string]any{
			pipeline.MetaApplicationName: app, pipeline.MetaClientHostname: chost,
			pipeline.MetaState: state, pipeline.MetaRsgName: rsg,
		}}
	}
	srv.consume(t, buildSnapshot(t0, []testSession{
		mk(1, testTmID, "alice", "sales", "psql", "h1", "active", "default_group"),
		mk(2, testTmID, "bob", "sales", "etl", "h2", "idle", "admin_group"),
		mk(3, testTmID, "alice", "hr", "etl", "h1", "idle", "default_group"),
		mk(4, testTmID+1, "carol", "hr", "psql", "h3", "active", "admin_group"),
	}))
	f := func(field yagpcc.SessionFilterEnum, v string) *yagpcc.SessionFilter {
		return &yagpcc.SessionFilter{FieldName: field, Value: v}
	}
	for _, tc := range []struct {
		name    string
		filters []*yagpcc.SessionFilter
		want    []int64
	}{
		{"none", nil, []int64{1, 2, 3, 4}},
		{"host", []*yagpcc.SessionFilter{f(yagpcc.SessionFilterEnum_SESSION_FILTER_HOST, testCoordinator)}, []int64{1, 2, 3, 4}},
		{"host other", []*yagpcc.SessionFilter{f(yagpcc.SessionFilterEnum_SESSION_FILTER_HOST, "sdw1")}, nil},
		{"user", []*yagpcc.SessionFilter{f(yagpcc.SessionFilterEnum_SESSION_FILTER_USER, "alice")}, []int64{1, 3}},
		{"database", []*yagpcc.SessionFilter{f(yagpcc.SessionFilterEnum_SESSION_FILTER_DATABASE, "hr")}, []int64{3, 4}},
		{"application_name", []*yagpcc.SessionFilter{f(yagpcc.SessionFilterEnum_SESSION_FILTER_APPLICATION_NAME, "etl")}, []int64{2, 3}},
		{"client_hostname", []*yagpcc.SessionFilter{f(yagpcc.SessionFilterEnum_SESSION_FILTER_CLIENT_HOSTNAME, "h1")}, []int64{1, 3}},
		{"state", []*yagpcc.SessionFilter{f(yagpcc.SessionFilterEnum_SESSION_FILTER_STATE, "active")}, []int64{1, 4}},
		{"rsgname", []*yagpcc.SessionFilter{f(yagpcc.SessionFilterEnum_SESSION_FILTER_RSGNAME, "admin_group")}, []int64{2, 4}},
		{"sess_id", []*yagpcc.SessionFilter{f(yagpcc.SessionFilterEnum_SESSION_FILTER_SESS_ID, "3")}, []int64{3}},
		{"tm_id", []*yagpcc.SessionFilter{f(yagpcc.SessionFilterEnum_SESSION_FILTER_TM_ID, fmt.Sprint(testTmID+1))}, []int64{4}},
		{"exact match only", []*yagpcc.SessionFilter{f(yagpcc.SessionFilterEnum_SESSION_FILTER_USER, "ali")}, nil},
		{"two fields AND", []*yagpcc.SessionFilter{
			f(yagpcc.SessionFilterEnum_SESSION_FILTER_USER, "alice"), f(yagpcc.SessionFilterEnum_SESSION_FILTER_STATE, "idle"),
		}, []int64{3}},
		{"one field twice OR", []*yagpcc.SessionFilter{
			f(yagpcc.SessionFilterEnum_SESSION_FILTER_USER, "bob"), f(yagpcc.SessionFilterEnum_SESSION_FILTER_USER, "carol"),
		}, []int64{2, 4}},
		{"OR within, AND across", []*yagpcc.SessionFilter{
			f(yagpcc.SessionFilterEnum_SESSION_FILTER_SESS_ID, "1"), f(yagpcc.SessionFilterEnum_SESSION_FILTER_SESS_ID, "2"),
			f(yagpcc.SessionFilterEnum_SESSION_FILTER_DATABASE, "sales"), f(yagpcc.SessionFilterEnum_SESSION_FILTER_APPLICATION_NAME, "etl"),
		}, []int64{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := srv.client.GetGPSessions(ctxTimeout(t), &yagpcc.GetGPSessionsReq{Filter: tc.filters})
			if err != nil {
				t.Fatal(err)
			}
			if got := sessIDs(resp); !equalInts(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	for _, bad := range []*yagpcc.SessionFilter{
		f(yagpcc.SessionFilterEnum_SESSION_FILTER_SESS_ID, "x1"),
		f(yagpcc.SessionFilterEnum_SESSION_FILTER_TM_ID, ""),
		f(yagpcc.SessionFilterEnum_SESSION_FILTER_ENUM_UNSPECIFIED, "a"),
		f(99, "a"),
	} {
		_, err := srv.client.GetGPSessions(ctxTimeout(t), &yagpcc.GetGPSessionsReq{Filter: []*yagpcc.SessionFilter{bad}})
		statustest.AssertCode(t, err, codes.InvalidArgument, "filter[0]")
		_, err = srv.client.GetGPQueries(ctxTimeout(t), &yagpcc.GetGPQueriesReq{Filter: []*yagpcc.SessionFilter{bad}})
		statustest.AssertCode(t, err, codes.InvalidArgument, "filter[0]")
	}
}
