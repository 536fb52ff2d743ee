// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpinfo

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/paging"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/view"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/viewtest"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/internal/statustest"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newTestStore is a session store whose views are sorted up front, as the
// exporter's.
func newTestStore() *view.Store {
	return view.NewStore(view.Config{Grace: 30 * time.Second, MaxSessions: 100000, LastWindow: 5 * time.Minute}, zap.NewNop(), nil, PrebuildOrders)
}

// testBatch is a snapshot at at of sessions 1 to n, idle, or running
// "select 1"; each has used id mod 7 seconds of user CPU over the last
// window, so that ties are common.
func testBatch(at time.Time, n int64, running bool) *view.Batch {
	b := &view.Batch{Snapshots: []snapshot.Header{{Time: pcommon.NewTimestampFromTime(at), Coordinator: viewtest.Coordinator}}}
	for id := int64(1); id <= n; id++ {
		st := &yagpcc.SessionState{SessionKey: &yagpcc.SessionKey{SessId: id, TmId: viewtest.TmID}, SessionInfo: &yagpcc.SessionInfo{State: "idle"},
			LastMetrics: &yagpcc.GPMetrics{SystemStat: &yagpcc.SystemStat{UserTimeSeconds: float64(id % 7)}}}
		if running {
			st.SessionInfo.State = "active"
			st.RunningQueryInfo = &yagpcc.QueryInfo{QueryText: "select 1"}
		}
		b.Sessions = append(b.Sessions, &view.Session{Key: pipeline.SessionKey{TmID: viewtest.TmID, ID: id}, State: st, Running: running})
	}
	return b
}

// allocatedDuring is how many heap bytes f allocates, freed or not.
func allocatedDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func noToken(*testing.T, string) string { return "" }

// stuffedToken takes a page token the server issued and puts a million sort
// values in it.
func stuffedToken(svc *Service) func(t *testing.T, method string) string {
	return func(t *testing.T, method string) string {
		t.Helper()
		var resp *yagpcc.GetGPSessionsResponse
		var err error
		if method == "GetGPSessions" {
			resp, err = svc.GetGPSessions(context.Background(), &yagpcc.GetGPSessionsReq{PageSize: 1})
		} else {
			resp, err = svc.GetGPQueries(context.Background(), &yagpcc.GetGPQueriesReq{PageSize: 1})
		}
		if err != nil || resp.GetNextPageToken() == "" {
			t.Fatalf("%s issued no page token: %v", method, err)
		}
		b, err := base64.RawURLEncoding.DecodeString(resp.GetNextPageToken())
		if err != nil {
			t.Fatal(err)
		}
		var tok map[string]json.RawMessage
		if err := json.Unmarshal(b, &tok); err != nil {
			t.Fatal(err)
		}
		tok["v"] = json.RawMessage("[{}" + strings.Repeat(",{}", 999_999) + "]")
		if b, err = json.Marshal(tok); err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
}

func TestOversizedSortAndFilterRequestsAreRefused(t *testing.T) {
	st := newTestStore()
	st.Consume(testBatch(t0, 1000, true))
	svc := NewService(st, nil, Limits{DefaultPageSize: 100, MaxPageSize: 10000, MaxResponseBytes: 4 << 20})

	repeatedPID := make([]*yagpcc.SessionFieldWrapper, 200_000)
	for i := range repeatedPID {
		repeatedPID[i] = &yagpcc.SessionFieldWrapper{FieldName: yagpcc.SessionField_SESSION_FIELD_PID}
	}
	users := make([]*yagpcc.SessionFilter, 1_000_000)
	for i := range users {
		users[i] = &yagpcc.SessionFilter{FieldName: yagpcc.SessionFilterEnum_SESSION_FILTER_USER, Value: strconv.Itoa(i)}
	}
	const budget = 50 << 20
	for _, c := range []struct {
		name  string
		field []*yagpcc.SessionFieldWrapper
		filt  []*yagpcc.SessionFilter
		token func(t *testing.T, method string) string
		limit string
	}{
		{"200000 repeated sort fields", repeatedPID, nil, noToken, fmt.Sprintf("at most %d sort fields", maxSortFields)},
		{"a million filter values", nil, users, noToken, fmt.Sprintf("at most %d filter values", paging.MaxFilterValues)},
		{"a page token of a million values", nil, nil, stuffedToken(svc), "page_token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sessionsToken, queriesToken := c.token(t, "GetGPSessions"), c.token(t, "GetGPQueries")
			var errSessions, errQueries error
			grew := allocatedDuring(func() {
				_, errSessions = svc.GetGPSessions(context.Background(), &yagpcc.GetGPSessionsReq{Field: c.field, Filter: c.filt, PageToken: sessionsToken})
				_, errQueries = svc.GetGPQueries(context.Background(), &yagpcc.GetGPQueriesReq{Field: c.field, Filter: c.filt, PageToken: queriesToken})
			})
			statustest.AssertCode(t, errSessions, codes.InvalidArgument, c.limit)
			statustest.AssertCode(t, errQueries, codes.InvalidArgument, c.limit)
			if grew > budget {
				t.Errorf("refusing the request allocated %d MiB, more than %d MiB", grew>>20, budget>>20)
			}
		})
	}
}

// The bounds hold at their edge: one more than the bound is refused, the
// bound itself is served (the oversized requests above are refused by any
// bound below theirs).
func TestSortAndFilterBoundsHoldAtTheirEdge(t *testing.T) {
	fields := slices.Sorted(maps.Keys(sortFields))
	if len(fields) <= maxSortFields {
		t.Fatalf("%d sort fields, need more than %d distinct ones", len(fields), maxSortFields)
	}
	order := func(n int) []*yagpcc.SessionFieldWrapper {
		var ws []*yagpcc.SessionFieldWrapper
		for _, f := range fields[:n] {
			ws = append(ws, &yagpcc.SessionFieldWrapper{FieldName: f})
		}
		return ws
	}
	if _, err := parseSortSpec(order(maxSortFields)); err != nil {
		t.Errorf("%d sort fields: %v", maxSortFields, err)
	}
	if _, err := parseSortSpec(order(maxSortFields + 1)); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("at most %d sort fields", maxSortFields)) {
		t.Errorf("%d sort fields: %v, want refused", maxSortFields+1, err)
	}
	users := func(n int) []*yagpcc.SessionFilter {
		out := make([]*yagpcc.SessionFilter, n)
		for i := range out {
			out[i] = &yagpcc.SessionFilter{FieldName: yagpcc.SessionFilterEnum_SESSION_FILTER_USER, Value: strconv.Itoa(i)}
		}
		return out
	}
	if _, err := parseFilters(users(paging.MaxFilterValues)); err != nil {
		t.Errorf("%d filter values: %v", paging.MaxFilterValues, err)
	}
	if _, err := parseFilters(users(paging.MaxFilterValues + 1)); err == nil ||
		!strings.Contains(err.Error(), fmt.Sprintf("at most %d filter values", paging.MaxFilterValues)) {
		t.Errorf("%d filter values: %v, want refused", paging.MaxFilterValues+1, err)
	}
}

func TestEachSortFieldAppearsOnce(t *testing.T) {
	pid := &yagpcc.SessionFieldWrapper{FieldName: yagpcc.SessionField_SESSION_FIELD_PID}
	user := &yagpcc.SessionFieldWrapper{FieldName: yagpcc.SessionField_SESSION_FIELD_USER, Order: yagpcc.SortOrder_SORT_DESC}
	_, err := parseSortSpec([]*yagpcc.SessionFieldWrapper{pid, user, pid})
	if err == nil || !strings.Contains(err.Error(), "field[2]: SESSION_FIELD_PID repeats field[0]") {
		t.Fatalf("a repeated sort field: %v", err)
	}
	if _, err := parseSortSpec([]*yagpcc.SessionFieldWrapper{pid, user}); err != nil {
		t.Fatalf("distinct sort fields: %v", err)
	}
}

// distinctSpecs are n different orders of width fields each.
func distinctSpecs(t *testing.T, n, width int) []sortSpec {
	t.Helper()
	fields := slices.Sorted(maps.Keys(sortFields))
	var specs []sortSpec
	for i := range n {
		var ws []*yagpcc.SessionFieldWrapper
		for j := range width {
			ws = append(ws, &yagpcc.SessionFieldWrapper{FieldName: fields[(i+j)%len(fields)]})
		}
		ws[0].Order = yagpcc.SortOrder(1 + i/len(fields)%2)
		spec, err := parseSortSpec(ws)
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, spec)
	}
	return specs
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func TestOrderCacheIsBoundedByBytes(t *testing.T) {
	st := newTestStore()
	st.Consume(testBatch(t0, 10_000, false))
	v := st.Load()
	before := heapInUse()
	for _, spec := range distinctSpecs(t, 64, maxSortFields) {
		orderOf(v, spec)
	}
	grew := heapInUse() - min(before, heapInUse())
	runtime.KeepAlive(v)
	if limit := uint64(maxOrderCacheBytes + 8<<20); grew > limit {
		t.Fatalf("64 orders of %d fields over 10000 sessions keep %d MiB, more than the cache's %d MiB (+8 MiB slack)",
			maxSortFields, grew>>20, maxOrderCacheBytes>>20)
	}
}

// FuzzDecodeToken: whatever a client sends as page_token, decoding neither
// panics nor returns other than one value per sort field, and a token the
// server issued decodes to what it encoded.
func FuzzDecodeToken(f *testing.F) {
	spec, err := parseSortSpec([]*yagpcc.SessionFieldWrapper{
		{FieldName: yagpcc.SessionField_SESSION_FIELD_USER}, {FieldName: yagpcc.SessionField_LAST_USERTIMESECONDS}})
	if err != nil {
		f.Fatal(err)
	}
	e := orderEntry{s: &view.Session{Key: pipeline.SessionKey{TmID: viewtest.TmID, ID: 7}}, vals: []paging.Value{paging.Str("a\x00é"), {Present: true, F: math.NaN()}}}
	f.Add(encodeToken("fp", e), "fp")
	f.Add("", "fp")
	f.Add(base64.RawURLEncoding.EncodeToString([]byte(`{"r":"fp","v":[{},{},{}]}`)), "fp")
	f.Add(base64.RawURLEncoding.EncodeToString([]byte(`{"r":"fp","v":{"p":true}}`)), "fp")
	f.Fuzz(func(t *testing.T, tok, request string) {
		vals, key, err := decodeToken(tok, request, spec)
		if err == nil && len(vals) != len(spec) {
			t.Fatalf("%d values for %d sort fields", len(vals), len(spec))
		}
		if tok == encodeToken(request, e) && (err != nil || key != e.s.Key || vals[0] != e.vals[0] || !math.IsNaN(vals[1].F)) {
			t.Fatalf("an issued token does not decode to what it encoded: %v %v %v", vals, key, err)
		}
	})
}

func TestNextViewIsPresortedInTheOrdersClientsAsked(t *testing.T) {
	st := newTestStore()
	st.Consume(testBatch(t0, 19, false))
	spec, err := parseSortSpec([]*yagpcc.SessionFieldWrapper{{FieldName: yagpcc.SessionField_LAST_USERTIMESECONDS, Order: yagpcc.SortOrder_SORT_DESC}})
	if err != nil {
		t.Fatal(err)
	}
	orderOf(st.Load(), spec)
	st.Consume(testBatch(t0.Add(time.Second), 19, false))
	v := st.Load()
	o := ordersOf(v).orders[spec.String()]
	if o == nil || len(o.entries) != 19 {
		t.Fatalf("the new view was not sorted in the order asked of the previous one")
	}
	if other := ordersOf(v).orders[sortSpec(nil).String()]; other != nil {
		t.Fatalf("an order nobody asked for was built")
	}
}
