// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package finishedwork

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unique"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/metadata"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/metadatatest"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/view"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/viewtest"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// decoded is md as the exporter decodes it with finished work kept.
func decoded(md pmetric.Metrics) *view.Batch {
	d := view.NewDecoder("test-cluster", 5*time.Minute, true)
	return d.Decode(md)
}

// With retention 0 the store does not take the events in: retention 0
// costs no memory.
func TestNoRetentionKeepsNothing(t *testing.T) {
	w, _ := newTestFinishedWork(t, Config{Retention: 0, MaxEvents: 10, MaxBytes: 1 << 20})
	w.Consume(decoded(viewtest.FinishedBatch(t0, []events.FinishedQuery{viewtest.FinishedQuery(1, t0)}, nil)), t0)
	if w.count != 0 || len(w.queries) != 0 {
		t.Errorf("retention 0: the store holds %d events (%d queries), want none", w.count, len(w.queries))
	}
}

// Every field of each event is a field of its gpotel.v1 item, of a type
// that holds it and optional exactly where the event's is; the item has
// no field that is not the event's, but cpu_time. And an event with every
// field carries each into its item with the event's value.
func TestItemsCarryEveryEventField(t *testing.T) {
	full := viewtest.FinishedQuery(1, t0)
	md := viewtest.FinishedBatch(t0, []events.FinishedQuery{full}, []events.EndedSession{viewtest.EndedSession(1, t0)})
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
		sortable := 0
		for j := range desc.Fields().Len() {
			if name := string(desc.Fields().Get(j).Name()); !columns[name] {
				t.Errorf("%s.%s is no field of the event", desc.Name(), name)
			}
			if !desc.Fields().Get(j).IsList() {
				sortable++
			}
		}
		if sortable != len(l.columns) {
			t.Errorf("%s: %d sortable item fields, %d sort columns", desc.Name(), sortable, len(l.columns))
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

// itemValue reads an item field as events.Value returns the
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

// newTestFinishedWork is a store with its own telemetry.
func newTestFinishedWork(t *testing.T, fq Config) (*Store, *componenttest.Telemetry) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	tb, err := metadata.NewTelemetryBuilder(tt.NewTelemetrySettings())
	if err != nil {
		t.Fatal(err)
	}
	return NewStore(fq, Owner{ClusterID: "test-cluster"}, zap.NewNop(), tb), tt
}

// held lists the command counts of the finished queries w answers for.
func held(w *Store, queries []events.FinishedQuery) []int64 {
	var out []int64
	for _, q := range queries {
		if r, expired := w.query(view.QueryID{Session: q.Session, Ccnt: q.CommandCount}); r != nil && !expired {
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
	w, tt := newTestFinishedWork(t, Config{Retention: time.Hour, MaxEvents: 3, MaxBytes: 1 << 30})
	w.Consume(decoded(viewtest.FinishedBatch(t0.Add(-time.Hour), nil, nil)), t0.Add(-time.Hour)) // the exporter's first snapshot
	var queries []events.FinishedQuery
	for i := range 5 {
		queries = append(queries, viewtest.FinishedQuery(i, t0.Add(time.Duration(i)*time.Second)))
		w.Consume(decoded(viewtest.FinishedBatch(t0.Add(time.Minute), queries[i:i+1], nil)), t0.Add(time.Minute))
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
	probe, _ := queryLayout.read(viewtest.FinishedBatch(t0, []events.FinishedQuery{viewtest.FinishedQuery(1, t0)}, nil).ResourceMetrics().At(1).Resource().Attributes())
	probe.coordinator = unique.Make(viewtest.Coordinator)
	budget := minFinishedMaxBytes
	per := budget/3 - 1 // three queries fit, not four
	w, tt := newTestFinishedWork(t, Config{Retention: time.Hour, MaxEvents: 100, MaxBytes: budget})
	var queries []events.FinishedQuery
	for i := range 5 {
		q := viewtest.FinishedQuery(1, t0.Add(time.Duration(i)*time.Second))
		q.CommandCount = int64(i + 1)
		text := strings.Repeat("x", per-probe.bytes()+len(*q.Text))
		q.Text = &text
		queries = append(queries, q)
		w.Consume(decoded(viewtest.FinishedBatch(t0.Add(time.Minute), queries[i:i+1], nil)), t0.Add(time.Minute))
	}
	if got := held(w, queries); !slices.Equal(got, []int64{3, 4, 5}) || w.bytes > budget {
		t.Errorf("held ccnt %v in %d bytes, want the 3 newest [3 4 5] within %d", got, w.bytes, budget)
	}
	huge := viewtest.FinishedQuery(1, t0.Add(10*time.Second))
	huge.CommandCount = 99
	text := strings.Repeat("x", budget)
	huge.Text = &text
	w.Consume(decoded(viewtest.FinishedBatch(t0.Add(time.Minute), []events.FinishedQuery{huge}, nil)), t0.Add(time.Minute))
	if got := held(w, append(queries, huge)); !slices.Equal(got, []int64{3, 4, 5}) {
		t.Errorf("after an event over the budget: held %v, want [3 4 5]", got)
	}
	metadatatest.AssertEqualSessionstateFinishedDropped(t, tt, []metricdata.DataPoint[int64]{droppedBy(boundBytes, 3)}, metricdatatest.IgnoreTimestamp())
}

// Rows leave at the end of their retention, measured in snapshot time,
// and those behind a younger arrival are not answered past it either:
// GetGPQuery says the query ended more than the retention ago.
func TestRetentionExpiresInSnapshotTime(t *testing.T) {
	w, _ := newTestFinishedWork(t, Config{Retention: time.Hour, MaxEvents: 100, MaxBytes: 1 << 30})
	young, old := viewtest.FinishedQuery(1, t0), viewtest.FinishedQuery(2, t0.Add(-30*time.Minute))
	w.Consume(decoded(viewtest.FinishedBatch(t0.Add(-2*time.Hour), nil, nil)), t0.Add(-2*time.Hour)) // the exporter's first snapshot
	w.Consume(decoded(viewtest.FinishedBatch(t0, []events.FinishedQuery{young, old}, nil)), t0)
	w.Consume(decoded(viewtest.FinishedBatch(t0.Add(31*time.Minute), nil, nil)), t0.Add(31*time.Minute))
	if got := held(w, []events.FinishedQuery{young, old}); !slices.Equal(got, []int64{2}) {
		t.Errorf("31 min on: held %v, want the young one [2]", got)
	}
	_, err := w.GetGPQuery(view.QueryID{Session: old.Session, Ccnt: old.CommandCount},
		&yagpcc.QueryKey{Tmid: int32(old.Session.TmID), Ssid: int32(old.Session.ID), Ccnt: int32(old.CommandCount)}, t0.Add(31*time.Minute))
	if want := "more than finished_queries::retention (1h0m0s) ago"; status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), want) {
		t.Errorf("GetGPQuery of the expired query: %v, want NotFound naming %q", err, want)
	}
	if got := w.completeSince(); got != t0.Add(-29*time.Minute).UnixNano() {
		t.Errorf("complete since %v, want an hour back", timeOf(got))
	}
	w.Consume(decoded(viewtest.FinishedBatch(t0.Add(61*time.Minute), nil, nil)), t0.Add(61*time.Minute))
	if w.count != 0 || w.bytes != 0 || len(w.queries) != 0 {
		t.Errorf("61 min on: %d events, %d bytes, %d indexed; want none", w.count, w.bytes, len(w.queries))
	}
}

// An event that reaches the exporter twice (a replayed batch) is kept
// once, its later copy.
func TestAnEventWrittenTwiceIsKeptOnce(t *testing.T) {
	w, _ := newTestFinishedWork(t, Config{Retention: time.Hour, MaxEvents: 100, MaxBytes: 1 << 30})
	q, s := viewtest.FinishedQuery(1, t0), viewtest.EndedSession(1, t0)
	for range 2 {
		w.Consume(decoded(viewtest.FinishedBatch(t0, []events.FinishedQuery{q}, []events.EndedSession{s})), t0)
	}
	first, _ := queryLayout.read(viewtest.FinishedBatch(t0, []events.FinishedQuery{q}, nil).ResourceMetrics().At(1).Resource().Attributes())
	first.coordinator = unique.Make(viewtest.Coordinator)
	second, _ := sessionLayout.read(viewtest.FinishedBatch(t0, nil, []events.EndedSession{s}).ResourceMetrics().At(1).Resource().Attributes())
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
	w.Consume(decoded(viewtest.FinishedBatch(t0.Add(2*time.Hour), nil, nil)), t0.Add(2*time.Hour))
	if w.count != 0 || w.bytes != 0 {
		t.Errorf("all expired: %d events in %d bytes left", w.count, w.bytes)
	}
}

// A page token is hostile input: whatever it holds, it decodes to a
// cursor of the request's key length or to an error; one this server
// issued decodes to the place it named.
func FuzzDecodeFinishedToken(f *testing.F) {
	sel, err := parseFinishedSelection("ListFinishedQueries", queryLayout, &gpotelv1.ListFinishedWorkRequest{SortBy: "query_text"})
	if err != nil {
		f.Fatal(err)
	}
	q := viewtest.FinishedQuery(1, t0)
	text := "a\x00é\"\\"
	q.Text = &text
	r, err := queryLayout.read(viewtest.FinishedBatch(t0, []events.FinishedQuery{q}, nil).ResourceMetrics().At(1).Resource().Attributes())
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

// The configured hostname names the coordinator of the finished work, over
// the one the snapshots name.
func TestConfiguredHostnameNamesTheFinishedWorksCoordinator(t *testing.T) {
	w, _ := newTestFinishedWork(t, Config{Retention: time.Hour, MaxEvents: 100, MaxBytes: 1 << 30})
	w.hostOverride = "gp-prod"
	q := viewtest.FinishedQuery(1, t0)
	w.Consume(decoded(viewtest.FinishedBatch(t0, []events.FinishedQuery{q}, nil)), t0)
	r, _ := w.query(view.QueryID{Session: q.Session, Ccnt: q.CommandCount})
	if r == nil {
		t.Fatal("the finished query is not held")
	}
	if got := r.coordinator.Value(); got != "gp-prod" {
		t.Errorf("held under coordinator %q, want the configured hostname gp-prod", got)
	}
}
