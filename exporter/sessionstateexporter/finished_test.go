// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/confmap/xconfmap"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/paging"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/viewtest"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/internal/statustest"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// sessionRunsThenIdles is session 7 of receiverScrape at at, running the
// statement that started at start, or idle since ended when ended is set.
func sessionRunsThenIdles(at, start, ended time.Time, cpuUser float64) pipelinetest.Snapshot {
	born := t0.Add(-time.Hour)
	s := receiverScrape(at, []int64{7}, []receiverProcess{
		{host: testCoordinator, segment: -1, pid: 7007, created: born, cpuUser: cpuUser},
		{host: "sdw1", segment: 0, pid: 300, created: born, cpuUser: 2 * cpuUser},
	})
	s.Sessions[0].QueryStart = start
	if !ended.IsZero() {
		s.Sessions[0].State, s.Sessions[0].StateChange = "idle", ended
	}
	return s
}

// A query that ended is answered by GetGPQuery after the processor's
// longest window (5 m) has dropped it, with the figures it was answered
// with before, and NotFound once the retention (1 h) after its end has
// passed.
func TestFinishedQueryIsAnsweredAfterTheWindow(t *testing.T) {
	srv := startDefault(t)
	feed := feederInFront(t, srv)
	start, end := t0.Add(5*time.Second), t0.Add(40*time.Second)
	key := &yagpcc.QueryKey{Tmid: testTmID, Ssid: 7, QueryStart: timestamppb.New(start)}
	ctx := ctxTimeout(t)

	feed(sessionRunsThenIdles(t0, start, time.Time{}, 10))
	feed(sessionRunsThenIdles(t0.Add(time.Minute), start, end, 13))
	feed(sessionRunsThenIdles(t0.Add(2*time.Minute), start, end, 13))
	within, err := srv.client.GetGPQuery(ctx, &yagpcc.GetGPQueryReq{QueryKey: key})
	if err != nil {
		t.Fatalf("within the window: %v", err)
	}
	if cpu := within.GetQueriesData().GetQueryStat().GetTotalQueryMetrics().GetSystemStat().GetUserTimeSeconds(); cpu != 9 {
		t.Fatalf("within the window the query has %v s of user CPU, want 9: 3 s on the coordinator and 6 s on sdw1", cpu)
	}

	// The longest window passes: the processor no longer writes the query.
	for m := 3; m <= 7; m++ {
		feed(sessionRunsThenIdles(t0.Add(time.Duration(m)*time.Minute), start, end, 13))
	}
	after, err := srv.client.GetGPQuery(ctx, &yagpcc.GetGPQueryReq{QueryKey: key})
	if err != nil {
		t.Fatalf("after the window: %v", err)
	}
	stat := after.GetQueriesData().GetQueryStat()
	assertProtoEqual(t, stat.GetTotalQueryMetrics(), within.GetQueriesData().GetQueryStat().GetTotalQueryMetrics())
	if !stat.GetCompleted() || stat.GetQueryStatus() != yagpcc.QueryStatus_QUERY_STATUS_DONE ||
		!stat.GetStartTime().AsTime().Equal(start) || !stat.GetEndTime().AsTime().Equal(end) {
		t.Errorf("after the window: completed %v, status %v, %v to %v; want done, %v to %v",
			stat.GetCompleted(), stat.GetQueryStatus(), stat.GetStartTime().AsTime(), stat.GetEndTime().AsTime(), start, end)
	}
	if info := stat.GetQueryInfo(); info.GetUserName() != "alice" || info.GetDatabaseName() != "sales" {
		t.Errorf("after the window: user %q database %q, want alice and sales", info.GetUserName(), info.GetDatabaseName())
	}
	if stat.GetHostname() != testCoordinator || stat.GetClusterId() != "test-cluster" {
		t.Errorf("after the window: hostname %q cluster %q", stat.GetHostname(), stat.GetClusterId())
	}
	segs := after.GetQueriesData().GetSegmentQueryMetrics()
	assertProtoEqual(t, &yagpcc.TotalQueryData{SegmentQueryMetrics: segmentsOf(segs)},
		&yagpcc.TotalQueryData{SegmentQueryMetrics: segmentsOf(within.GetQueriesData().GetSegmentQueryMetrics())})
	if len(segs) != 2 {
		t.Errorf("after the window: %d segments, want the coordinator and segment 0", len(segs))
	}

	// A minute before the retention (1 h) after its end it is still
	// answered; a minute after it, no longer.
	feed(sessionRunsThenIdles(end.Add(time.Hour-time.Minute), start, end, 13))
	if _, err := srv.client.GetGPQuery(ctx, &yagpcc.GetGPQueryReq{QueryKey: key}); err != nil {
		t.Fatalf("within the retention: %v", err)
	}
	feed(sessionRunsThenIdles(end.Add(time.Hour+time.Minute), start, end, 13))
	_, err = srv.client.GetGPQuery(ctx, &yagpcc.GetGPQueryReq{QueryKey: key})
	statustest.AssertCode(t, err, codes.NotFound, "retention")
}

// segmentsOf keeps what both answers share of each segment: where and
// what it used (not the collect time).
func segmentsOf(segs []*yagpcc.SegmentMetrics) []*yagpcc.SegmentMetrics {
	out := make([]*yagpcc.SegmentMetrics, 0, len(segs))
	for _, s := range segs {
		out = append(out, &yagpcc.SegmentMetrics{Hostname: s.GetHostname(), SegmentKey: s.GetSegmentKey(), SegmentMetrics: s.GetSegmentMetrics()})
	}
	return out
}

func finishedClient(srv *testServer) gpotelv1.FinishedWorkClient {
	return gpotelv1.NewFinishedWorkClient(srv.conn)
}

// A finished query is answered by its command count, with how it ended in
// yagpcc's terms (its status and message), its text, spill and exact end.
func TestFinishedQueryAnsweredByCommandCount(t *testing.T) {
	srv := startDefault(t)
	end := t0.Add(-time.Minute)
	var queries []events.FinishedQuery
	for n := range 7 {
		queries = append(queries, viewtest.FinishedQuery(n, end.Add(time.Duration(n)*time.Second)))
	}
	srv.consume(t, viewtest.FinishedBatch(t0, queries, nil))
	for n, want := range []yagpcc.QueryStatus{yagpcc.QueryStatus_QUERY_STATUS_DONE, yagpcc.QueryStatus_QUERY_STATUS_ERROR,
		yagpcc.QueryStatus_QUERY_STATUS_CANCELED, yagpcc.QueryStatus_QUERY_STATUS_END, yagpcc.QueryStatus_QUERY_STATUS_ERROR,
		yagpcc.QueryStatus_QUERY_STATUS_ERROR, yagpcc.QueryStatus_QUERY_STATUS_ERROR} {
		q := queries[n]
		resp, err := srv.client.GetGPQuery(ctxTimeout(t), &yagpcc.GetGPQueryReq{QueryKey: &yagpcc.QueryKey{
			Tmid: testTmID, Ssid: int32(q.Session.ID), Ccnt: int32(q.CommandCount)}})
		if err != nil {
			t.Fatalf("query %d: %v", n, err)
		}
		stat := resp.GetQueriesData().GetQueryStat()
		if stat.GetQueryStatus() != want || !stat.GetCompleted() || stat.GetEndTime().AsTime().UnixNano() != q.End ||
			stat.GetQueryKey().GetCcnt() != int32(q.CommandCount) {
			t.Errorf("query %d (%s): status %v completed %v end %v ccnt %d; want %v at %v", n, q.Status, stat.GetQueryStatus(),
				stat.GetCompleted(), stat.GetEndTime().AsTime(), stat.GetQueryKey().GetCcnt(), want, time.Unix(0, q.End).UTC())
		}
		// yagpcc keeps a failed query's error message in QueryStat.message.
		if stat.GetMessage() != q.ErrorMessage {
			t.Errorf("query %d (%s): message %q, want %q", n, q.Status, stat.GetMessage(), q.ErrorMessage)
		}
		m := stat.GetTotalQueryMetrics()
		user := float64(q.Totals[pipeline.CPUUser]) / 1e9
		if !closeTo(m.GetSystemStat().GetUserTimeSeconds(), user) || m.GetSystemStat().GetWriteBytes() != uint64(q.Totals[pipeline.DiskWrite]) ||
			m.GetSystemStat().GetCpuSkew() != q.Skew.CPU.Ratio || m.GetSystemStat().GetIoHottestSegment() != q.Skew.IO.Hottest {
			t.Errorf("query %d: figures %v, want user %v s, write %d bytes, cpu skew %v, io hottest %d", n, m.GetSystemStat(), user,
				q.Totals[pipeline.DiskWrite], q.Skew.CPU.Ratio, q.Skew.IO.Hottest)
		}
		if m.GetSystemStat().GetPartial() != q.Partial {
			t.Errorf("query %d: partial %v, want %v", n, m.GetSystemStat().GetPartial(), q.Partial)
		}
		// Query 0's processes reported no block I/O wait: absent, not 0.
		if measured := q.Known&(1<<pipeline.DiskDelay) != 0; measured != (m.GetSystemStat().BlkioDelaySeconds != nil) {
			t.Errorf("query %d: block I/O wait %v; want it exactly when some process reported it (%v)", n,
				m.GetSystemStat().BlkioDelaySeconds, measured)
		}
		if q.Text != nil && (stat.GetQueryInfo().GetQueryText() != *q.Text || m.GetSpill().GetTotalBytes() != q.Spill.MaxBytes) {
			t.Errorf("query %d: text %q spill %v, want %q and %d bytes", n, stat.GetQueryInfo().GetQueryText(), m.GetSpill(), *q.Text, q.Spill.MaxBytes)
		}
		if segs := resp.GetQueriesData().GetSegmentQueryMetrics(); len(segs) != 3 || segs[2].GetHostname() != "sdw2" ||
			segs[2].GetSegmentMetrics().GetSystemStat().GetWriteBytes() != uint64(q.Segments[2].Written) {
			t.Errorf("query %d: segments %v", n, segs)
		}
	}
}

// listFinished walks every page of a list request, page_size at a time.
func listFinished(t *testing.T, c gpotelv1.FinishedWorkClient, req *gpotelv1.ListFinishedWorkRequest, sessions bool) []protoreflect.Message {
	t.Helper()
	var out []protoreflect.Message
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("more than 1000 pages")
		}
		var next string
		if sessions {
			resp, err := c.ListEndedSessions(ctxTimeout(t), req)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range resp.GetSessions() {
				out = append(out, s.ProtoReflect())
			}
			next = resp.GetNextPageToken()
		} else {
			resp, err := c.ListFinishedQueries(ctxTimeout(t), req)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range resp.GetQueries() {
				out = append(out, q.ProtoReflect())
			}
			next = resp.GetNextPageToken()
		}
		if next == "" {
			return out
		}
		req = proto.CloneOf(req)
		req.PageToken = next
	}
}

// compareItemField orders two items by one field as the list must:
// absent first, then by value.
func compareItemField(a, b protoreflect.Message, fd protoreflect.FieldDescriptor) int {
	ha, hb := !fd.HasPresence() || a.Has(fd), !fd.HasPresence() || b.Has(fd)
	if ha != hb || !ha {
		return cmp.Compare(boolInt(ha), boolInt(hb))
	}
	va, vb := a.Get(fd), b.Get(fd)
	switch fd.Kind() {
	case protoreflect.Int64Kind:
		return cmp.Compare(va.Int(), vb.Int())
	case protoreflect.DoubleKind:
		return cmp.Compare(va.Float(), vb.Float())
	case protoreflect.StringKind:
		return strings.Compare(va.String(), vb.String())
	case protoreflect.BoolKind:
		return cmp.Compare(boolInt(va.Bool()), boolInt(vb.Bool()))
	case protoreflect.MessageKind:
		return va.Message().Interface().(*timestamppb.Timestamp).AsTime().Compare(vb.Message().Interface().(*timestamppb.Timestamp).AsTime())
	}
	panic("unsortable kind " + fd.Kind().String())
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// itemKey names an item by its key, to tell that a walk returns each once.
func itemKey(m protoreflect.Message) string {
	var b strings.Builder
	for _, name := range []protoreflect.Name{"tm_id", "sess_id", "ccnt", "query_start", "session_start"} {
		if fd := m.Descriptor().Fields().ByName(name); fd != nil {
			fmt.Fprintf(&b, "%v/", m.Get(fd))
		}
	}
	return b.String()
}

// Both lists sort by every field of their items but the segments, both
// ways, across pages: each field's values are in order and every item is
// returned once.
func TestListSortsByEveryField(t *testing.T) {
	srv := startDefault(t)
	const n = 11
	var queries []events.FinishedQuery
	var sessions []events.EndedSession
	for i := range n {
		end := t0.Add(-time.Duration(i*7%n) * time.Second)
		queries, sessions = append(queries, viewtest.FinishedQuery(i, end)), append(sessions, viewtest.EndedSession(i, end))
	}
	srv.consume(t, viewtest.FinishedBatch(t0, queries, sessions))
	for _, item := range []proto.Message{&gpotelv1.FinishedQuery{}, &gpotelv1.EndedSession{}} {
		desc := item.ProtoReflect().Descriptor()
		for j := range desc.Fields().Len() {
			fd := desc.Fields().Get(j)
			if fd.IsList() {
				continue
			}
			for _, descending := range []bool{false, true} {
				items := listFinished(t, finishedClient(srv), &gpotelv1.ListFinishedWorkRequest{SortBy: string(fd.Name()), Descending: descending, PageSize: 3},
					desc.Name() == "EndedSession")
				seen := map[string]bool{}
				for k, it := range items {
					seen[itemKey(it)] = true
					if k == 0 {
						continue
					}
					if c := compareItemField(items[k-1], it, fd); descending && c < 0 || !descending && c > 0 {
						t.Errorf("%s by %s (descending %v): item %d out of order: %v then %v", desc.Name(), fd.Name(), descending, k,
							items[k-1].Get(fd), it.Get(fd))
					}
				}
				if len(items) != n || len(seen) != n {
					t.Errorf("%s by %s (descending %v): %d items, %d distinct; want %d", desc.Name(), fd.Name(), descending, len(items), len(seen), n)
				}
			}
		}
	}
}

// The list keeps the queries that ended in [ended_from, ended_to), of the
// users, databases and sessions asked (OR within a field, AND across).
func TestListFiltersByRangeUserDatabaseAndSession(t *testing.T) {
	srv := startDefault(t)
	var queries []events.FinishedQuery
	for i := range 30 {
		queries = append(queries, viewtest.FinishedQuery(i, t0.Add(-time.Duration(30-i)*time.Second)))
	}
	srv.consume(t, viewtest.FinishedBatch(t0, queries, nil))
	from, to := t0.Add(-25*time.Second), t0.Add(-7*time.Second)
	req := &gpotelv1.ListFinishedWorkRequest{EndedFrom: timestamppb.New(from), EndedTo: timestamppb.New(to),
		Users: []string{"alice"}, Databases: []string{"sales", "ops"}, SessIds: []int64{100, 102}, TmId: testTmID, PageSize: 2}
	var want []string
	for _, q := range queries {
		end := time.Unix(0, q.End)
		if !end.Before(from) && end.Before(to) && q.Who.User == "alice" && q.Who.Database != "hr" && q.Session.ID != 101 {
			want = append(want, fmt.Sprintf("%d/%d", q.Session.ID, q.CommandCount))
		}
	}
	var got []string
	for _, it := range listFinished(t, finishedClient(srv), req, false) {
		q := it.Interface().(*gpotelv1.FinishedQuery)
		got = append(got, fmt.Sprintf("%d/%d", q.GetSessId(), q.GetCcnt()))
	}
	if !slices.Equal(got, want) || len(want) < 2 {
		t.Errorf("got %v, want %v (by end time)", got, want)
	}
	req.TmId = testTmID + 1
	if items := listFinished(t, finishedClient(srv), req, false); len(items) != 0 {
		t.Errorf("another tm_id: %d items", len(items))
	}
}

// ended_from and ended_to beyond what Unix nanoseconds hold (1677 to 2262)
// stand for the edge of time, never wrapping to another year: to
// 9999-12-31 lists everything, from it lists nothing.
func TestAnEndedRangeBeyond2262IsClamped(t *testing.T) {
	srv := startDefault(t)
	var queries []events.FinishedQuery
	for i := range 5 {
		queries = append(queries, viewtest.FinishedQuery(i, t0.Add(-time.Duration(i)*time.Second)))
	}
	srv.consume(t, viewtest.FinishedBatch(t0, queries, nil))
	farFuture := timestamppb.New(time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC))
	farPast := timestamppb.New(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name string
		req  *gpotelv1.ListFinishedWorkRequest
		want int
	}{
		{"to 9999-12-31", &gpotelv1.ListFinishedWorkRequest{EndedTo: farFuture}, len(queries)},
		{"from 0001-01-01 to 9999-12-31", &gpotelv1.ListFinishedWorkRequest{EndedFrom: farPast, EndedTo: farFuture}, len(queries)},
		{"from 9999-12-31", &gpotelv1.ListFinishedWorkRequest{EndedFrom: farFuture}, 0},
		{"to 0001-01-01", &gpotelv1.ListFinishedWorkRequest{EndedTo: farPast}, 0},
	} {
		if got := len(listFinished(t, finishedClient(srv), tc.req, false)); got != tc.want {
			t.Errorf("%s: %d queries, want %d", tc.name, got, tc.want)
		}
	}
}

// A walk reads every query once while new ones arrive between its pages,
// and every response stays under max_response_bytes.
func TestListPagesStayUnderMaxResponseBytes(t *testing.T) {
	cfg := testConfig()
	cfg.MaxResponseBytes = 4096
	srv := startServer(t, cfg, nopHost())
	c := finishedClient(srv)
	wide := func(n int, end time.Time) events.FinishedQuery {
		q := viewtest.FinishedQuery(n, end)
		for s := range 40 {
			q.Segments = append(q.Segments, pipeline.SegmentUse{Host: fmt.Sprintf("sdw%d", s/4+3), Segment: int32(s + 2), CPU: 1e9, Read: 1 << 20})
		}
		return q
	}
	var batch []events.FinishedQuery
	for i := range 20 {
		batch = append(batch, wide(i, t0.Add(-time.Duration(i)*time.Second)))
	}
	srv.consume(t, viewtest.FinishedBatch(t0, batch, nil))
	req := &gpotelv1.ListFinishedWorkRequest{SortBy: "cpu_time", Descending: true}
	seen := map[string]int{}
	for pages, i := 0, 20; ; pages, i = pages+1, i+1 {
		resp, err := c.ListFinishedQueries(ctxTimeout(t), req)
		if err != nil {
			t.Fatal(err)
		}
		if size := proto.Size(resp); size > cfg.MaxResponseBytes {
			t.Errorf("page %d: %d bytes, over max_response_bytes %d", pages, size, cfg.MaxResponseBytes)
		}
		for _, q := range resp.GetQueries() {
			seen[itemKey(q.ProtoReflect())]++
		}
		if resp.GetNextPageToken() == "" {
			break
		}
		if pages > 20 {
			t.Fatal("more pages than queries")
		}
		// A newer query ends between pages: sorted by CPU it may fall on
		// either side of the walk's place; the walk goes on.
		srv.consume(t, viewtest.FinishedBatch(t0.Add(time.Duration(pages+1)*time.Second), []events.FinishedQuery{wide(i, t0)}, nil))
		req.PageToken = resp.GetNextPageToken()
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("query %s returned %d times", k, n)
		}
	}
	for _, q := range batch {
		if k := fmt.Sprintf("%d/%d/%d/", q.Session.TmID, q.Session.ID, q.CommandCount); !strings.Contains(strings.Join(slices.Collect(maps.Keys(seen)), " "), k) {
			t.Errorf("query %s never returned", k)
		}
	}
}

// Hostile requests are refused with InvalidArgument naming the problem; a
// huge page size is capped at max_page_size.
func TestFinishedWorkRefusesHostileRequests(t *testing.T) {
	cfg := testConfig()
	cfg.MaxPageSize = 3
	cfg.DefaultPageSize = 2
	srv := startServer(t, cfg, nopHost())
	c := finishedClient(srv)
	var queries []events.FinishedQuery
	for i := range 5 {
		queries = append(queries, viewtest.FinishedQuery(i, t0.Add(-time.Duration(i)*time.Second)))
	}
	srv.consume(t, viewtest.FinishedBatch(t0, queries, nil))

	resp, err := c.ListFinishedQueries(ctxTimeout(t), &gpotelv1.ListFinishedWorkRequest{PageSize: math.MaxUint32})
	if err != nil || len(resp.GetQueries()) != 3 || resp.GetNextPageToken() == "" {
		t.Fatalf("page_size 2^32-1: %d queries, token %q, %v; want max_page_size 3 and a token", len(resp.GetQueries()), resp.GetNextPageToken(), err)
	}
	other, err := c.ListFinishedQueries(ctxTimeout(t), &gpotelv1.ListFinishedWorkRequest{SortBy: "duration"})
	if err != nil {
		t.Fatal(err)
	}
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"r":"x","k":[` + strings.Repeat("1,", 100000) + `1]}`))
	many := make([]string, paging.MaxFilterValues+1)
	for _, tc := range []struct {
		name string
		req  *gpotelv1.ListFinishedWorkRequest
		want string
	}{
		{"range reversed", &gpotelv1.ListFinishedWorkRequest{EndedFrom: timestamppb.New(t0), EndedTo: timestamppb.New(t0.Add(-time.Nanosecond))}, "is after ended_to"},
		{"bad timestamp", &gpotelv1.ListFinishedWorkRequest{EndedFrom: &timestamppb.Timestamp{Nanos: 2e9}}, "ended_from"},
		{"unknown sort field", &gpotelv1.ListFinishedWorkRequest{SortBy: "cpu_time_total" + strings.Repeat("x", 1<<16)}, "sort_by"},
		{"segments", &gpotelv1.ListFinishedWorkRequest{SortBy: "segments"}, "sort_by"},
		{"a session field", &gpotelv1.ListFinishedWorkRequest{SortBy: "memory_rss_max"}, "sort_by"},
		{"too many filters", &gpotelv1.ListFinishedWorkRequest{Users: many}, "at most 1024"},
		{"token not base64", &gpotelv1.ListFinishedWorkRequest{PageToken: "%%%"}, "page_token"},
		{"token not JSON", &gpotelv1.ListFinishedWorkRequest{PageToken: base64.RawURLEncoding.EncodeToString([]byte("{"))}, "page_token"},
		{"forged token", &gpotelv1.ListFinishedWorkRequest{PageToken: forged}, "page_token"},
		{"token of another order", &gpotelv1.ListFinishedWorkRequest{PageToken: other.GetNextPageToken()}, "different request"},
		{"token of another filter", &gpotelv1.ListFinishedWorkRequest{Users: []string{"alice"}, PageToken: resp.GetNextPageToken()}, "different request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.ListFinishedQueries(ctxTimeout(t), tc.req)
			statustest.AssertCode(t, err, codes.InvalidArgument, tc.want)
			if st, _ := status.FromError(err); len(st.Message()) > 1024 {
				t.Errorf("message of %d bytes", len(st.Message()))
			}
		})
	}
	_, err = c.ListEndedSessions(ctxTimeout(t), &gpotelv1.ListFinishedWorkRequest{PageToken: resp.GetNextPageToken()})
	statustest.AssertCode(t, err, codes.InvalidArgument, "different request")
}

// With retention 0 nothing is kept, and the list says so.
func TestNoRetentionKeepsNothing(t *testing.T) {
	cfg := testConfig()
	cfg.FinishedQueries.Retention = 0
	srv := startServer(t, cfg, nopHost())
	q := viewtest.FinishedQuery(1, t0)
	srv.consume(t, viewtest.FinishedBatch(t0, []events.FinishedQuery{q}, nil))
	_, err := finishedClient(srv).ListFinishedQueries(ctxTimeout(t), &gpotelv1.ListFinishedWorkRequest{})
	statustest.AssertCode(t, err, codes.FailedPrecondition, "retention is 0")
	_, err = srv.client.GetGPQuery(ctxTimeout(t), &yagpcc.GetGPQueryReq{QueryKey: &yagpcc.QueryKey{Tmid: testTmID, Ssid: int32(q.Session.ID), Ccnt: int32(q.CommandCount)}})
	statustest.AssertCode(t, err, codes.NotFound, "retention is 0")
}

// The real processor in front: a session that ran a statement and left is
// listed, after it settled, with the lifetime figures it was served with
// while it lived, and its query with the query's.
func TestEndedSessionIsListed(t *testing.T) {
	srv := startDefault(t)
	start, end := t0.Add(5*time.Second), t0.Add(40*time.Second)
	feed := feederInFront(t, srv)
	feed(sessionRunsThenIdles(t0, start, time.Time{}, 10))
	feed(sessionRunsThenIdles(t0.Add(time.Minute), start, end, 13))
	ctx := ctxTimeout(t)
	alive, err := srv.client.GetGPSession(ctx, &yagpcc.GetGPSessionReq{SessionKey: &yagpcc.SessionKey{SessId: 7, TmId: testTmID}})
	if err != nil {
		t.Fatal(err)
	}
	query, err := srv.client.GetGPQuery(ctx, &yagpcc.GetGPQueryReq{QueryKey: &yagpcc.QueryKey{Tmid: testTmID, Ssid: 7, QueryStart: timestamppb.New(start)}})
	if err != nil {
		t.Fatal(err)
	}
	left := t0.Add(2 * time.Minute)
	feed(receiverScrape(left, nil, nil))
	feed(receiverScrape(t0.Add(3*time.Minute), nil, nil))

	c := finishedClient(srv)
	sessions, err := c.ListEndedSessions(ctx, &gpotelv1.ListFinishedWorkRequest{Users: []string{"alice"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions.GetSessions()) != 1 {
		t.Fatalf("%d ended sessions, want session 7", len(sessions.GetSessions()))
	}
	s := sessions.GetSessions()[0]
	total := alive.GetSessionsState().GetTotalMetrics().GetSystemStat()
	if s.GetSessId() != 7 || !s.GetSessionEnd().AsTime().Equal(left) || s.GetQueries() != 1 || !s.GetPartial() ||
		!closeTo(s.GetCpuTimeUser(), total.GetUserTimeSeconds()) || !closeTo(s.GetCpuTime(), total.GetRunningTimeSeconds()) {
		t.Errorf("ended session %v; want session 7 gone at %v after 1 query, partial, with the CPU it was served with alive (%v)", s, left, total)
	}
	queries, err := c.ListFinishedQueries(ctx, &gpotelv1.ListFinishedWorkRequest{SessIds: []int64{7}})
	if err != nil {
		t.Fatal(err)
	}
	qs := query.GetQueriesData().GetQueryStat().GetTotalQueryMetrics().GetSystemStat()
	if len(queries.GetQueries()) != 1 || !closeTo(queries.GetQueries()[0].GetCpuTime(), qs.GetRunningTimeSeconds()) ||
		len(queries.GetQueries()[0].GetSegments()) != 2 {
		t.Errorf("finished queries %v; want one with %v s of CPU on 2 segments", queries.GetQueries(), qs.GetRunningTimeSeconds())
	}
}

func TestFinishedQueriesConfig(t *testing.T) {
	if fq := loadConfig(t, "sessionstate").FinishedQueries; fq != (FinishedQueriesConfig{Retention: time.Hour, MaxEvents: 100000, MaxBytes: 256 << 20}) {
		t.Errorf("defaults %+v", fq)
	}
	cfg := loadConfig(t, "sessionstate/finished_queries")
	if err := xconfmap.Validate(cfg); err != nil || cfg.FinishedQueries != (FinishedQueriesConfig{Retention: 30 * time.Minute, MaxEvents: 5000, MaxBytes: 64 << 20}) {
		t.Errorf("custom %+v: %v", cfg.FinishedQueries, err)
	}
	for name, wants := range map[string][]string{
		"sessionstate/finished_queries_invalid": {"finished_queries::retention 192h0m0s: must be in [0, 168h0m0s]",
			"finished_queries::max_events 0: must be positive", "finished_queries::max_bytes 1000: must be at least 1048576"},
		"sessionstate/finished_queries_negative": {"finished_queries::retention -1s", "finished_queries::max_events -3"},
	} {
		err := xconfmap.Validate(loadConfig(t, name))
		for _, want := range wants {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error does not name %q: %v", name, want, err)
			}
		}
	}
}

// Walkers page through the list while batches of events arrive and old
// ones expire: each walk is in order and returns no item twice (run with
// -race).
func TestListWalksWhileEventsArrive(t *testing.T) {
	cfg := testConfig()
	cfg.FinishedQueries.Retention = 30 * time.Second
	srv := startServer(t, cfg, nopHost())
	c := finishedClient(srv)
	n := 0
	batch := func(at time.Time) pmetric.Metrics {
		var qs []events.FinishedQuery
		for range 20 {
			qs = append(qs, viewtest.FinishedQuery(n, at.Add(-time.Duration(n%7)*time.Second)))
			n++
		}
		return viewtest.FinishedBatch(at, qs, nil)
	}
	srv.consume(t, batch(t0))
	var wg sync.WaitGroup
	for walker := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for walk := 0; walk < 3; walk++ {
				req := &gpotelv1.ListFinishedWorkRequest{SortBy: "cpu_time", Descending: walker%2 == 0, PageSize: 40}
				seen := map[string]bool{}
				var prev *gpotelv1.FinishedQuery
				for pages := 0; pages < 1000; pages++ {
					resp, err := c.ListFinishedQueries(ctxTimeout(t), req)
					if err != nil {
						t.Error(err)
						return
					}
					for _, q := range resp.GetQueries() {
						k := itemKey(q.ProtoReflect())
						if seen[k] {
							t.Errorf("walker %d: %s twice", walker, k)
						}
						seen[k] = true
						if prev != nil {
							if c := cmp.Compare(prev.GetCpuTime(), q.GetCpuTime()); req.Descending && c < 0 || !req.Descending && c > 0 {
								t.Errorf("walker %d: cpu_time %v then %v", walker, prev.GetCpuTime(), q.GetCpuTime())
							}
						}
						prev = q
					}
					if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
						break
					}
				}
			}
		}()
	}
	for i := 1; i <= 40; i++ {
		srv.consume(t, batch(t0.Add(time.Duration(i)*time.Second)))
	}
	wg.Wait()
}

// Once a query's event has come, GetGPQuery answers it from the event even
// while the processor still writes the query: how it ended and its exact
// end are the server's, not the last snapshot's (on Greenplum 6.24.3 a
// cancelled query was answered DONE until its window passed).
func TestEndedQueryIsAnsweredFromItsEventWithinTheWindow(t *testing.T) {
	srv := startDefault(t)
	feed := feederInFront(t, srv)
	start, end := t0.Add(5*time.Second), t0.Add(40*time.Second)
	key := &yagpcc.QueryKey{Tmid: testTmID, Ssid: 7, QueryStart: timestamppb.New(start)}
	feed(sessionRunsThenIdles(t0, start, time.Time{}, 10))
	cancelled := sessionRunsThenIdles(t0.Add(time.Minute), start, end, 13)
	cancelled.Endings = []snapshot.HostEndings{{Host: testCoordinator, LogReadThrough: t0.Add(time.Minute).UnixNano(), Endings: []snapshot.Ending{{
		Session: 7, PID: 7007, Time: end.UnixNano(), Severity: "ERROR", SQLState: "57014", Message: "canceling statement due to user request"}}}}
	feed(cancelled)
	for m := 2; m <= 3; m++ {
		feed(sessionRunsThenIdles(t0.Add(time.Duration(m)*time.Minute), start, end, 13))
	}
	resp, err := srv.client.GetGPQuery(ctxTimeout(t), &yagpcc.GetGPQueryReq{QueryKey: key})
	if err != nil {
		t.Fatal(err)
	}
	stat := resp.GetQueriesData().GetQueryStat()
	if stat.GetQueryStatus() != yagpcc.QueryStatus_QUERY_STATUS_CANCELED || !stat.GetEndTime().AsTime().Equal(end) ||
		stat.GetMessage() != "canceling statement due to user request" {
		t.Errorf("within the window: status %v, end %v, message %q; want CANCELED at %v with the server's message",
			stat.GetQueryStatus(), stat.GetEndTime().AsTime(), stat.GetMessage(), end)
	}
}

// Within the processor's window a finished query is answered as its event
// says it ended (status, end), not as the processor's figures, which only
// tell that it ended, at the snapshot that no longer saw its session.
func TestFinishedQueryIsAnsweredAsItsEventSaysWithinTheWindow(t *testing.T) {
	srv := startDefault(t)
	feed := feederInFront(t, srv)
	start := t0.Add(5 * time.Second)
	key := &yagpcc.QueryKey{Tmid: testTmID, Ssid: 7, QueryStart: timestamppb.New(start)}
	feed(sessionRunsThenIdles(t0, start, time.Time{}, 10))
	feed(sessionRunsThenIdles(t0.Add(10*time.Second), start, time.Time{}, 13))
	// The session leaves while its query runs; nothing tells how it ended.
	for s := 2; s <= 6; s++ {
		feed(receiverScrape(t0.Add(time.Duration(s)*10*time.Second), nil, nil))
	}
	resp, err := srv.client.GetGPQuery(ctxTimeout(t), &yagpcc.GetGPQueryReq{QueryKey: key})
	if err != nil {
		t.Fatal(err)
	}
	stat := resp.GetQueriesData().GetQueryStat()
	if stat.GetQueryStatus() != yagpcc.QueryStatus_QUERY_STATUS_END {
		t.Errorf("a query whose end nothing told answered %v, want QUERY_STATUS_END (its event's unknown)", stat.GetQueryStatus())
	}
}
