// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unique"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap/xconfmap"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/metadata"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/metadatatest"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
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
	assertCode(t, err, codes.NotFound, "retention")
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

// testFinishedQuery is query n of a varied set: each figure's order over n
// differs from the key's (n·5 mod 11), and every fourth query lacks the
// optional fields (no text, spill, lock blocker, vmem, application,
// delays).
func testFinishedQuery(n int, end time.Time) events.FinishedQuery {
	rank := int64(n*5%11 + 1)
	ns := func(s int64) int64 { return s * int64(time.Second) / 10 }
	q := events.FinishedQuery{
		Session: pipeline.SessionKey{TmID: testTmID, ID: int64(100 + n%3)},
		Who: events.SessionWho{Database: []string{"sales", "hr", "ops"}[n%3], User: []string{"bob", "alice"}[n%2],
			ClientAddress: pipeline.Null[string]{V: "10.0.0.9", Valid: true}, ClientPort: pipeline.Null[int64]{V: 50000 + rank, Valid: true}},
		CommandCount: int64(n + 1), Start: end.Add(-time.Duration(rank) * time.Second).UnixNano(), End: end.UnixNano(),
		Status:   []string{events.QueryCompleted, events.QueryError, events.QueryCancelled, events.QueryUnknown, events.QueryTerminated, events.QueryClientLost, events.QueryAborted}[n%7],
		Partial:  n%3 != 2,
		LockWait: ns(rank * 3 % 7),
		SQLState: "57014", ErrorMessage: "canceling statement due to statement timeout", CancelReason: events.CancelStatementTimeout,
		EndedByRule: "runaway-spill",
		Segments: []pipeline.SegmentUse{
			{Host: testCoordinator, Segment: -1, CPU: ns(rank), Read: 10 * rank, Written: 3 * rank},
			{Host: "sdw1", Segment: 0, CPU: ns(2 * rank), Read: 100 * rank, Written: 30},
			{Host: "sdw2", Segment: 1, CPU: ns(12 - rank), Read: 1000, Written: 300 * rank},
		},
		Skew: pipeline.SkewPair{
			CPU: pipeline.Skew{Ratio: float64(rank) / 20, MaxOverAvg: 1 + float64(rank)/10, Hottest: int32(rank % 2), Segments: 2, OK: true},
			IO:  pipeline.Skew{Ratio: float64(12-rank) / 20, MaxOverAvg: 2 - float64(rank)/10, Hottest: int32(1 - rank%2), Segments: 2, OK: true},
		},
	}
	switch n % 3 {
	case 0:
		q.PartialCause = events.PartialCause{StartedBefore: true, Since: q.Start + int64(time.Second)}
	case 1:
		q.PartialCause = events.PartialCause{Hosts: []string{"sdw2"}, Since: q.Start + int64(time.Second)}
	}
	for c := range pipeline.NumCounters {
		q.Totals[c] = (rank*int64(c+3))%17*1000 + int64(c)
		q.Known |= 1 << c
	}
	if n%4 != 0 {
		text := fmt.Sprintf("select %d from t%d", rank, n)
		q.Text = &text
		q.Spill = &pipeline.QuerySpill{MaxBytes: rank << 20, MaxFiles: 12 - rank}
		q.LockBlocker = 200 + rank
		q.VmemPeak = (12 - rank) << 20
		q.Who.Application = pipeline.Null[string]{V: fmt.Sprintf("app%d", rank%3), Valid: true}
		q.Who.ResourceGroup = pipeline.Null[string]{V: "default_group", Valid: true}
	} else {
		q.Known &^= 1<<pipeline.DelaySwapin | 1<<pipeline.DelayIRQ | 1<<pipeline.DiskDelay
	}
	return q
}

// testEndedSession is session n of a varied set, as testFinishedQuery.
func testEndedSession(n int, end time.Time) events.EndedSession {
	q := testFinishedQuery(n, end)
	s := events.EndedSession{Session: pipeline.SessionKey{TmID: testTmID, ID: int64(300 + n)}, Who: q.Who, Start: q.Start, End: q.End,
		Partial: q.Partial, PartialCause: q.PartialCause, Queries: int64(n*3%5 + 1), Totals: q.Totals, Known: q.Known, MemoryPeak: int64(n*7%9) << 20,
		LockWait: q.LockWait, VmemPeak: q.VmemPeak, EndReason: events.SessionTerminated, SQLState: "57P01",
		Message: "terminating connection due to administrator command"}
	if q.Spill != nil {
		s.SpillMax = q.Spill.MaxBytes
	}
	return s
}

// finishedBatch is a closing batch at at (a snapshot resource of mdw)
// carrying the events.
func finishedBatch(at time.Time, queries []events.FinishedQuery, sessions []events.EndedSession) pmetric.Metrics {
	md := buildSnapshot(at, nil)
	for i := range queries {
		events.AppendFinishedQuery(md.ResourceMetrics(), &queries[i])
	}
	for i := range sessions {
		events.AppendEndedSession(md.ResourceMetrics(), &sessions[i])
	}
	return md
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
		queries = append(queries, testFinishedQuery(n, end.Add(time.Duration(n)*time.Second)))
	}
	srv.consume(t, finishedBatch(t0, queries, nil))
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

// Every field of each event is a field of its gpotel.v1 item, of a type
// that holds it and optional exactly where the event's is; the item has
// no field that is not the event's, but cpu_time. And an event with every
// field carries each into its item with the event's value.
func TestItemsCarryEveryEventField(t *testing.T) {
	full := testFinishedQuery(1, t0)
	md := finishedBatch(t0, []events.FinishedQuery{full}, []events.EndedSession{testEndedSession(1, t0)})
	for i, l := range []*eventLayout{queryLayout, sessionLayout} {
		desc := l.message().Descriptor()
		columns := map[string]bool{cpuTimeColumn: true}
		for j, f := range l.fields {
			columns[f.Column] = true
			if l.item[j] == nil {
				t.Errorf("%s has no field %s for the event's %s (%s, optional %v): add it to proto/gpotel/v1/finished_work.proto",
					desc.Name(), f.Column, f.Key, f.Type, f.Optional)
			}
		}
		for j := range desc.Fields().Len() {
			if name := string(desc.Fields().Get(j).Name()); !columns[name] {
				t.Errorf("%s.%s is no field of the event", desc.Name(), name)
			}
		}

		attrs := md.ResourceMetrics().At(1 + i).Resource().Attributes()
		r, err := l.read(attrs)
		if err != nil {
			t.Fatal(err)
		}
		item := r.message()
		for j, f := range l.fields {
			want, ok := events.Value(attrs, f)
			if !ok {
				t.Errorf("%s: the test's event lacks %s", desc.Name(), f.Key)
				continue
			}
			if got := itemValue(item, l.item[j], f.Type); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s.%s = %v, the event's %s is %v", desc.Name(), f.Column, got, f.Key, want)
			}
		}
	}
}

// itemValue reads an item field as pipeline.EventValue returns the
// event's: int64, float64, string, bool, time.Time or []SegmentUse.
func itemValue(m protoreflect.Message, fd protoreflect.FieldDescriptor, typ events.FieldType) any {
	if fd == nil || fd.HasPresence() && !m.Has(fd) {
		return nil
	}
	v := m.Get(fd)
	switch typ {
	case events.EventTime:
		return v.Message().Interface().(*timestamppb.Timestamp).AsTime()
	case events.EventSegments:
		var out []pipeline.SegmentUse
		for i := range v.List().Len() {
			s := v.List().Get(i).Message().Interface().(*gpotelv1.SegmentUse)
			out = append(out, pipeline.SegmentUse{Host: s.GetHostname(), Segment: s.GetSegment(), CPU: int64(math.Round(s.GetCpuSeconds() * 1e9)),
				Read: s.GetReadBytes(), Written: s.GetWriteBytes()})
		}
		return out
	}
	return v.Interface()
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
		queries, sessions = append(queries, testFinishedQuery(i, end)), append(sessions, testEndedSession(i, end))
	}
	srv.consume(t, finishedBatch(t0, queries, sessions))
	for _, l := range []*eventLayout{queryLayout, sessionLayout} {
		desc := l.message().Descriptor()
		sorted := 0
		for j := range desc.Fields().Len() {
			fd := desc.Fields().Get(j)
			if fd.IsList() {
				continue
			}
			sorted++
			for _, descending := range []bool{false, true} {
				items := listFinished(t, finishedClient(srv), &gpotelv1.ListFinishedWorkRequest{SortBy: string(fd.Name()), Descending: descending, PageSize: 3},
					l == sessionLayout)
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
		if sorted != len(l.columns) {
			t.Errorf("%s: %d sortable item fields, %d sort columns", desc.Name(), sorted, len(l.columns))
		}
	}
}

// The list keeps the queries that ended in [ended_from, ended_to), of the
// users, databases and sessions asked (OR within a field, AND across).
func TestListFiltersByRangeUserDatabaseAndSession(t *testing.T) {
	srv := startDefault(t)
	var queries []events.FinishedQuery
	for i := range 30 {
		queries = append(queries, testFinishedQuery(i, t0.Add(-time.Duration(30-i)*time.Second)))
	}
	srv.consume(t, finishedBatch(t0, queries, nil))
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
		queries = append(queries, testFinishedQuery(i, t0.Add(-time.Duration(i)*time.Second)))
	}
	srv.consume(t, finishedBatch(t0, queries, nil))
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
		q := testFinishedQuery(n, end)
		for s := range 40 {
			q.Segments = append(q.Segments, pipeline.SegmentUse{Host: fmt.Sprintf("sdw%d", s/4+3), Segment: int32(s + 2), CPU: 1e9, Read: 1 << 20})
		}
		return q
	}
	var batch []events.FinishedQuery
	for i := range 20 {
		batch = append(batch, wide(i, t0.Add(-time.Duration(i)*time.Second)))
	}
	srv.consume(t, finishedBatch(t0, batch, nil))
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
		srv.consume(t, finishedBatch(t0.Add(time.Duration(pages+1)*time.Second), []events.FinishedQuery{wide(i, t0)}, nil))
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
		queries = append(queries, testFinishedQuery(i, t0.Add(-time.Duration(i)*time.Second)))
	}
	srv.consume(t, finishedBatch(t0, queries, nil))

	resp, err := c.ListFinishedQueries(ctxTimeout(t), &gpotelv1.ListFinishedWorkRequest{PageSize: math.MaxUint32})
	if err != nil || len(resp.GetQueries()) != 3 || resp.GetNextPageToken() == "" {
		t.Fatalf("page_size 2^32-1: %d queries, token %q, %v; want max_page_size 3 and a token", len(resp.GetQueries()), resp.GetNextPageToken(), err)
	}
	other, err := c.ListFinishedQueries(ctxTimeout(t), &gpotelv1.ListFinishedWorkRequest{SortBy: "duration"})
	if err != nil {
		t.Fatal(err)
	}
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"r":"x","k":[` + strings.Repeat("1,", 100000) + `1]}`))
	many := make([]string, maxFilterValues+1)
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
			assertCode(t, err, codes.InvalidArgument, tc.want)
			if st, _ := status.FromError(err); len(st.Message()) > 1024 {
				t.Errorf("message of %d bytes", len(st.Message()))
			}
		})
	}
	_, err = c.ListEndedSessions(ctxTimeout(t), &gpotelv1.ListFinishedWorkRequest{PageToken: resp.GetNextPageToken()})
	assertCode(t, err, codes.InvalidArgument, "different request")
}

// With retention 0 nothing is kept, and the list says so.
func TestNoRetentionKeepsNothing(t *testing.T) {
	cfg := testConfig()
	cfg.FinishedQueries.Retention = 0
	srv := startServer(t, cfg, nopHost())
	q := testFinishedQuery(1, t0)
	srv.consume(t, finishedBatch(t0, []events.FinishedQuery{q}, nil))
	_, err := finishedClient(srv).ListFinishedQueries(ctxTimeout(t), &gpotelv1.ListFinishedWorkRequest{})
	assertCode(t, err, codes.FailedPrecondition, "retention is 0")
	_, err = srv.client.GetGPQuery(ctxTimeout(t), &yagpcc.GetGPQueryReq{QueryKey: &yagpcc.QueryKey{Tmid: testTmID, Ssid: int32(q.Session.ID), Ccnt: int32(q.CommandCount)}})
	assertCode(t, err, codes.NotFound, "retention is 0")

	// Nor does the store take the events in: retention 0 costs no memory.
	w, _ := newTestFinishedWork(t, FinishedQueriesConfig{Retention: 0, MaxEvents: 10, MaxBytes: 1 << 20})
	w.consume(decoded(finishedBatch(t0, []events.FinishedQuery{q}, nil)), t0)
	if w.count != 0 || len(w.queries) != 0 {
		t.Errorf("retention 0: the store holds %d events (%d queries), want none", w.count, len(w.queries))
	}
}

// newTestFinishedWork is a store with its own telemetry.
func newTestFinishedWork(t *testing.T, fq FinishedQueriesConfig) (*finishedWork, *componenttest.Telemetry) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	tb, err := metadata.NewTelemetryBuilder(tt.NewTelemetrySettings())
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.FinishedQueries = fq
	w := newFinishedWork(cfg, zap.NewNop(), "")
	w.telemetry = tb
	return w, tt
}

// held lists the command counts of the finished queries w answers for.
func held(w *finishedWork, queries []events.FinishedQuery) []int64 {
	var out []int64
	for _, q := range queries {
		if r, expired := w.query(queryID{session: q.Session, ccnt: q.CommandCount}); r != nil && !expired {
			out = append(out, q.CommandCount)
		}
	}
	return out
}

func droppedBy(bound string, n int64) metricdata.DataPoint[int64] {
	return metricdata.DataPoint[int64]{Value: n, Attributes: attribute.NewSet(attribute.String("bound", bound))}
}

// When max_events is reached the oldest arrivals go first, counted; what
// is complete is said from the latest end dropped.
func TestMaxEventsDropsTheOldestAndCountsIt(t *testing.T) {
	w, tt := newTestFinishedWork(t, FinishedQueriesConfig{Retention: time.Hour, MaxEvents: 3, MaxBytes: 1 << 30})
	w.consume(decoded(finishedBatch(t0.Add(-time.Hour), nil, nil)), t0.Add(-time.Hour)) // the exporter's first snapshot
	var queries []events.FinishedQuery
	for i := range 5 {
		queries = append(queries, testFinishedQuery(i, t0.Add(time.Duration(i)*time.Second)))
		w.consume(decoded(finishedBatch(t0.Add(time.Minute), queries[i:i+1], nil)), t0.Add(time.Minute))
	}
	if got := held(w, queries); !slices.Equal(got, []int64{3, 4, 5}) {
		t.Errorf("held ccnt %v, want the 3 newest [3 4 5]", got)
	}
	metadatatest.AssertEqualSessionstateFinishedDropped(t, tt, []metricdata.DataPoint[int64]{droppedBy(boundEvents, 2)}, metricdatatest.IgnoreTimestamp())
	if got := w.completeSince(); got != queries[1].End {
		t.Errorf("complete since %v, want the end of the newest dropped, %v", timeOf(got), timeOf(queries[1].End))
	}
}

// When max_bytes is reached the oldest arrivals go first, counted; an
// event larger than the whole budget is dropped alone.
func TestMaxBytesDropsTheOldestAndCountsIt(t *testing.T) {
	probe, _ := queryLayout.read(finishedBatch(t0, []events.FinishedQuery{testFinishedQuery(1, t0)}, nil).ResourceMetrics().At(1).Resource().Attributes())
	probe.coordinator = unique.Make(testCoordinator)
	budget := minFinishedMaxBytes
	per := budget/3 - 1 // three queries fit, not four
	w, tt := newTestFinishedWork(t, FinishedQueriesConfig{Retention: time.Hour, MaxEvents: 100, MaxBytes: budget})
	var queries []events.FinishedQuery
	for i := range 5 {
		q := testFinishedQuery(1, t0.Add(time.Duration(i)*time.Second))
		q.CommandCount = int64(i + 1)
		text := strings.Repeat("x", per-probe.bytes()+len(*q.Text))
		q.Text = &text
		queries = append(queries, q)
		w.consume(decoded(finishedBatch(t0.Add(time.Minute), queries[i:i+1], nil)), t0.Add(time.Minute))
	}
	if got := held(w, queries); !slices.Equal(got, []int64{3, 4, 5}) || w.bytes > budget {
		t.Errorf("held ccnt %v in %d bytes, want the 3 newest [3 4 5] within %d", got, w.bytes, budget)
	}
	huge := testFinishedQuery(1, t0.Add(10*time.Second))
	huge.CommandCount = 99
	text := strings.Repeat("x", budget)
	huge.Text = &text
	w.consume(decoded(finishedBatch(t0.Add(time.Minute), []events.FinishedQuery{huge}, nil)), t0.Add(time.Minute))
	if got := held(w, append(queries, huge)); !slices.Equal(got, []int64{3, 4, 5}) {
		t.Errorf("after an event over the budget: held %v, want [3 4 5]", got)
	}
	metadatatest.AssertEqualSessionstateFinishedDropped(t, tt, []metricdata.DataPoint[int64]{droppedBy(boundBytes, 3)}, metricdatatest.IgnoreTimestamp())
}

// Rows leave at the end of their retention, measured in snapshot time,
// and those behind a younger arrival are not answered past it either:
// GetGPQuery says the query ended more than the retention ago.
func TestRetentionExpiresInSnapshotTime(t *testing.T) {
	w, _ := newTestFinishedWork(t, FinishedQueriesConfig{Retention: time.Hour, MaxEvents: 100, MaxBytes: 1 << 30})
	young, old := testFinishedQuery(1, t0), testFinishedQuery(2, t0.Add(-30*time.Minute))
	w.consume(decoded(finishedBatch(t0.Add(-2*time.Hour), nil, nil)), t0.Add(-2*time.Hour)) // the exporter's first snapshot
	w.consume(decoded(finishedBatch(t0, []events.FinishedQuery{young, old}, nil)), t0)
	w.consume(decoded(finishedBatch(t0.Add(31*time.Minute), nil, nil)), t0.Add(31*time.Minute))
	if got := held(w, []events.FinishedQuery{young, old}); !slices.Equal(got, []int64{2}) {
		t.Errorf("31 min on: held %v, want the young one [2]", got)
	}
	_, err := w.getGPQuery(queryID{session: old.Session, ccnt: old.CommandCount},
		&yagpcc.QueryKey{Tmid: int32(old.Session.TmID), Ssid: int32(old.Session.ID), Ccnt: int32(old.CommandCount)}, t0.Add(31*time.Minute))
	assertCode(t, err, codes.NotFound, "more than finished_queries::retention (1h0m0s) ago")
	if got := w.completeSince(); got != t0.Add(-29*time.Minute).UnixNano() {
		t.Errorf("complete since %v, want an hour back", timeOf(got))
	}
	w.consume(decoded(finishedBatch(t0.Add(61*time.Minute), nil, nil)), t0.Add(61*time.Minute))
	if w.count != 0 || w.bytes != 0 || len(w.queries) != 0 {
		t.Errorf("61 min on: %d events, %d bytes, %d indexed; want none", w.count, w.bytes, len(w.queries))
	}
}

// An event that reaches the exporter twice (a replayed batch) is kept
// once, its later copy.
func TestAnEventWrittenTwiceIsKeptOnce(t *testing.T) {
	w, _ := newTestFinishedWork(t, FinishedQueriesConfig{Retention: time.Hour, MaxEvents: 100, MaxBytes: 1 << 30})
	q, s := testFinishedQuery(1, t0), testEndedSession(1, t0)
	for range 2 {
		w.consume(decoded(finishedBatch(t0, []events.FinishedQuery{q}, []events.EndedSession{s})), t0)
	}
	first, _ := queryLayout.read(finishedBatch(t0, []events.FinishedQuery{q}, nil).ResourceMetrics().At(1).Resource().Attributes())
	first.coordinator = unique.Make(testCoordinator)
	second, _ := sessionLayout.read(finishedBatch(t0, nil, []events.EndedSession{s}).ResourceMetrics().At(1).Resource().Attributes())
	second.coordinator = first.coordinator
	if w.count != 2 || len(w.queries) != 1 || len(w.sessions) != 1 || w.bytes != first.bytes()+second.bytes() {
		t.Errorf("%d events (%d queries, %d sessions) in %d bytes; want one of each in %d", w.count, len(w.queries), len(w.sessions), w.bytes,
			first.bytes()+second.bytes())
	}
	for _, l := range []*eventLayout{queryLayout, sessionLayout} {
		sel, err := parseFinishedSelection("List", l, &gpotelv1.ListFinishedWorkRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if rows, _ := w.selectRows(sel, 10); len(rows) != 1 {
			t.Errorf("%s: listed %d times", l.kind, len(rows))
		}
	}
	w.consume(decoded(finishedBatch(t0.Add(2*time.Hour), nil, nil)), t0.Add(2*time.Hour))
	if w.count != 0 || w.bytes != 0 {
		t.Errorf("all expired: %d events in %d bytes left", w.count, w.bytes)
	}
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
			qs = append(qs, testFinishedQuery(n, at.Add(-time.Duration(n%7)*time.Second)))
			n++
		}
		return finishedBatch(at, qs, nil)
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

// A page token is hostile input: whatever it holds, it decodes to a
// cursor of the request's key length or to an error; one this server
// issued decodes to the place it named.
func FuzzDecodeFinishedToken(f *testing.F) {
	sel, err := parseFinishedSelection("ListFinishedQueries", queryLayout, &gpotelv1.ListFinishedWorkRequest{SortBy: "query_text"})
	if err != nil {
		f.Fatal(err)
	}
	q := testFinishedQuery(1, t0)
	text := "a\x00é\"\\"
	q.Text = &text
	r, err := queryLayout.read(finishedBatch(t0, []events.FinishedQuery{q}, nil).ResourceMetrics().At(1).Resource().Attributes())
	if err != nil {
		f.Fatal(err)
	}
	c := candidate{r: r, v: sel.column.get(r)}
	issued := sel.token(&c)
	f.Add(issued)
	f.Add("")
	f.Add(base64.RawURLEncoding.EncodeToString([]byte(`{"r":"` + sel.fingerprint + `","k":[1,2,3,4,5,6],"v":{"p":true,"f":1}}`)))
	f.Add(base64.RawURLEncoding.EncodeToString([]byte(`{"r":"` + sel.fingerprint + `","k":{"a":1}}`)))
	f.Fuzz(func(t *testing.T, tok string) {
		cur, err := sel.decodeToken(tok)
		if err == nil && len(cur.key) != len(queryLayout.identity) {
			t.Fatalf("a cursor of %d key values, the key has %d", len(cur.key), len(queryLayout.identity))
		}
		if tok != issued {
			return
		}
		if err != nil || cur.value != c.v {
			t.Fatalf("the issued token decodes to %v, %v; it named %v", cur, err, c.v)
		}
		for j, i := range queryLayout.identity {
			if cur.key[j] != r.num(i) {
				t.Fatalf("key %v, the row's %d is %d", cur.key, j, r.num(i))
			}
		}
	})
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

// The configured hostname names the coordinator of the finished work, over
// the one the snapshots name.
func TestConfiguredHostnameNamesTheFinishedWorksCoordinator(t *testing.T) {
	w, _ := newTestFinishedWork(t, FinishedQueriesConfig{Retention: time.Hour, MaxEvents: 100, MaxBytes: 1 << 30})
	w.hostOverride = "gp-prod"
	q := testFinishedQuery(1, t0)
	w.consume(decoded(finishedBatch(t0, []events.FinishedQuery{q}, nil)), t0)
	r, _ := w.query(queryID{session: q.Session, ccnt: q.CommandCount})
	if r == nil {
		t.Fatal("the finished query is not held")
	}
	if got := r.coordinator.Value(); got != "gp-prod" {
		t.Errorf("held under coordinator %q, want the configured hostname gp-prod", got)
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
