// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/gpotel/gpotel/deploy"
	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/gpsql"
	"github.com/gpotel/gpotel/internal/ownbackends"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
)

// middayToday ends the sample queries within today's UTC day, whatever
// the hour, and within the bound on how far ahead of the clock an event
// may end.
func middayToday() time.Time { return time.Now().UTC().Truncate(day).Add(12 * time.Hour) }

// Each event is one row of its table with the same figures, and the
// statements docs/operations.md gives a DBA answer what the events say.
func TestHistoryRowsMatchTheEvents(t *testing.T) {
	for _, target := range historyTargets(t) {
		t.Run(target.name, func(t *testing.T) {
			db := target.start(t)
			const n = 40
			end := middayToday()
			ld := workload(0, n, end)
			e := startExporter(t, db.cfg, componenttest.NewNopHost(), nil, nil)
			if err := e.consumeLogs(context.Background(), ld); err != nil {
				t.Fatal(err)
			}
			db.awaitRows(t, tableQueries, n)
			db.awaitRows(t, tableSessions, int64(sessionsOf(n)))
			for _, table := range e.store.tables {
				checkRowsMatchTheEvents(t, db, table, ld)
			}
			t.Run("documented SQL", func(t *testing.T) { checkDocumentedSQL(t, db, n, end) })
			t.Run("the dashboard's history panels", func(t *testing.T) { checkDashboardSQL(t, db, n, end) })
		})
	}
}

// checkRowsMatchTheEvents reads every row of table and compares each
// column with its field in the event of the same key.
func checkRowsMatchTheEvents(t *testing.T, db *historyDB, table *historyTable, ld plog.Logs) {
	t.Helper()
	evs := map[string]pcommon.Map{}
	rls := ld.ResourceLogs()
	for i := range rls.Len() {
		lrs := rls.At(i).ScopeLogs().At(0).LogRecords()
		for j := range lrs.Len() {
			if lrs.At(j).EventName() == table.event {
				evs[eventKey(t, table, lrs.At(j).Attributes())] = lrs.At(j).Attributes()
			}
		}
	}
	names := make([]string, len(table.Columns))
	for i, c := range table.Columns {
		names[i] = gpsql.QuoteIdent(c.Name)
	}
	rows, err := db.admin.Query(await.Context(t), fmt.Sprintf("SELECT %s FROM gpotel_history.%s", strings.Join(names, ", "), table.Name))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for rows.Next() {
		values, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		seen++
		var key []string
		for i, f := range table.fields {
			if f.Identity {
				key = append(key, fmt.Sprint(normalise(values[i])))
			}
		}
		attrs, ok := evs[strings.Join(key, "|")]
		if !ok {
			t.Errorf("%s: row %v is no event's", table.Name, key)
			continue
		}
		for i, f := range table.fields {
			want, present := events.Value(attrs, f)
			if !present {
				want = nil
			}
			if got, want := normalise(values[i]), normalise(want); !reflect.DeepEqual(got, want) {
				t.Errorf("%s %v: %s is %v (%T), the event says %v (%T)", table.Name, key, f.Column, got, got, want, want)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != len(evs) {
		t.Errorf("%s: %d rows for %d events", table.Name, seen, len(evs))
	}
}

func eventKey(t *testing.T, table *historyTable, attrs pcommon.Map) string {
	t.Helper()
	var key []string
	for _, f := range table.fields {
		if f.Identity {
			v, _ := events.Value(attrs, f)
			key = append(key, fmt.Sprint(normalise(v)))
		}
	}
	return strings.Join(key, "|")
}

// normalise makes a column's value and an event's comparable: times to
// the server's microseconds in UTC, the per-segment figures as the JSON
// the column holds, decoded.
func normalise(v any) any {
	switch v := v.(type) {
	case time.Time:
		return v.UTC().Truncate(time.Microsecond)
	case []pipeline.SegmentUse:
		var out any
		if err := json.Unmarshal(segmentsJSON(v), &out); err != nil {
			panic(err)
		}
		return out
	case []string:
		return anySlice(v)
	case []float64:
		return anySlice(v)
	}
	return v
}

// anySlice is an array column's value as pgx decodes it.
func anySlice[T any](v []T) []any {
	out := make([]any, len(v))
	for i, e := range v {
		out[i] = e
	}
	return out
}

// checkDocumentedSQL runs each statement of docs/operations.md on the
// rows of workload(0, n, end) and checks its answer against the events.
func checkDocumentedSQL(t *testing.T, db *historyDB, n int, end time.Time) {
	ctx := await.Context(t)
	if _, err := db.admin.Exec(ctx, "SET TIME ZONE 'UTC'"); err != nil {
		t.Fatal(err)
	}
	queries := make([]*events.FinishedQuery, n)
	for i := range n {
		queries[i] = sampleQuery(i, endOf(i, n, end))
	}
	cpu := func(q *events.FinishedQuery) float64 {
		return float64(q.Totals[pipeline.CPUUser])/1e9 + float64(q.Totals[pipeline.CPUSystem])/1e9
	}
	vars := map[string]string{"day": end.Format(time.DateOnly)}
	answer := func(name string, extra map[string]string) []map[string]any {
		t.Helper()
		for k, v := range vars {
			extra[k] = v
		}
		sql := withVariables(t, documentedSQL(t, name), extra)
		rows, err := db.admin.Query(ctx, sql)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, sql)
		}
		out, err := pgx.CollectRows(rows, pgx.RowToMap)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return out
	}
	// top asserts the first rows of an answer name queries of these
	// indexes (by session and ccnt), in order.
	top := func(name string, got []map[string]any, want []int) {
		t.Helper()
		if len(got) < len(want) {
			t.Fatalf("%s: %d rows, want at least %d", name, len(got), len(want))
		}
		for k, i := range want {
			q := queries[i]
			if got[k]["sess_id"] != q.Session.ID || got[k]["ccnt"] != q.CommandCount {
				t.Errorf("%s row %d: session %v ccnt %v, want query %d (session %d ccnt %d)", name, k, got[k]["sess_id"], got[k]["ccnt"], i, q.Session.ID, q.CommandCount)
			}
		}
	}
	byFigure := func(figure func(*events.FinishedQuery) (float64, bool)) []int {
		var idx []int
		for i, q := range queries {
			if _, ok := figure(q); ok {
				idx = append(idx, i)
			}
		}
		slices.SortStableFunc(idx, func(a, b int) int {
			fa, _ := figure(queries[a])
			fb, _ := figure(queries[b])
			return cmp.Compare(fb, fa)
		})
		return idx
	}

	t.Run("top CPU queries of a day", func(t *testing.T) {
		got := answer("top-cpu", map[string]string{})
		want := byFigure(func(q *events.FinishedQuery) (float64, bool) { return cpu(q), true })
		top("top-cpu", got, want[:20])
		if len(got) != 20 {
			t.Errorf("%d rows, want the LIMIT of 20", len(got))
		}
	})
	t.Run("the most skewed", func(t *testing.T) {
		got := answer("most-skewed", map[string]string{})
		want := byFigure(func(q *events.FinishedQuery) (float64, bool) { return q.Skew.CPU.Ratio, true })
		if len(got) != 20 || got[0]["skew_cpu_ratio"] != queries[want[0]].Skew.CPU.Ratio {
			t.Errorf("%d rows, the first skew %v; want 20 and %v", len(got), got[0]["skew_cpu_ratio"], queries[want[0]].Skew.CPU.Ratio)
		}
		for k := 1; k < len(got); k++ {
			if got[k]["skew_cpu_ratio"].(float64) > got[k-1]["skew_cpu_ratio"].(float64) {
				t.Errorf("row %d is more skewed than the one before", k)
			}
		}
	})
	t.Run("the biggest spillers", func(t *testing.T) {
		got := answer("spillers", map[string]string{})
		want := byFigure(func(q *events.FinishedQuery) (float64, bool) {
			if q.Spill == nil {
				return 0, false
			}
			return float64(q.Spill.MaxBytes), true
		})
		if len(got) != min(20, len(want)) {
			t.Errorf("%d rows, want the %d queries that spilled", len(got), len(want))
		}
		top("spillers", got, want[:min(20, len(want))])
	})
	t.Run("each user's share of the CPU", func(t *testing.T) {
		got := answer("user-share", map[string]string{})
		sums := map[string]float64{}
		var total float64
		for i, q := range queries {
			sums[sampleUser(i)] += cpu(q)
			total += cpu(q)
		}
		if len(got) != len(sums) {
			t.Fatalf("%d users, want %d", len(got), len(sums))
		}
		for _, row := range got {
			user := row["username"].(string)
			if c := numericFloat(t, row["cpu_s"]); math.Abs(c-sums[user]) > 0.0005+1e-9 {
				t.Errorf("%s: %v CPU seconds, the events say %v (to the millisecond)", user, c, sums[user])
			}
			wantPct := math.Round(1000*sums[user]/total) / 10
			if got := numericFloat(t, row["share_pct"]); got != wantPct {
				t.Errorf("%s: share %v %%, the events say %v %%", user, got, wantPct)
			}
		}
	})
	t.Run("the longest lock waits", func(t *testing.T) {
		got := answer("lock-waits", map[string]string{})
		want := byFigure(func(q *events.FinishedQuery) (float64, bool) { return float64(q.LockWait), q.LockWait > 0 })
		if len(got) != min(20, len(want)) {
			t.Errorf("%d rows, want %d", len(got), min(20, len(want)))
		}
		if got[0]["lock_wait_time"] != float64(queries[want[0]].LockWait)/1e9 || got[0]["lock_blocker_sess_id"] != queries[want[0]].LockBlocker {
			t.Errorf("first row waited %v for %v, want %v for %v", got[0]["lock_wait_time"], got[0]["lock_blocker_sess_id"],
				float64(queries[want[0]].LockWait)/1e9, queries[want[0]].LockBlocker)
		}
	})
	t.Run("the partial queries and why", func(t *testing.T) {
		got := answer("partial", map[string]string{})
		var want []*events.FinishedQuery
		for _, q := range queries {
			if q.Partial {
				want = append(want, q)
			}
		}
		if len(got) != len(want) || len(want) == 0 {
			t.Fatalf("%d rows, want the %d partial queries", len(got), len(want))
		}
		for k, q := range want {
			hosts := any(nil)
			if len(q.PartialCause.Hosts) > 0 {
				hosts = q.PartialCause.HostList()
			}
			if got[k]["sess_id"] != q.Session.ID || got[k]["ccnt"] != q.CommandCount || got[k]["partial_reason"] != q.PartialCause.Reason() ||
				got[k]["partial_hosts"] != hosts || !got[k]["partial_since"].(time.Time).Equal(time.Unix(0, q.PartialCause.Since).Truncate(time.Microsecond)) {
				t.Errorf("row %d: %v; want session %d ccnt %d, %s, hosts %v since %v", k, got[k], q.Session.ID, q.CommandCount,
					q.PartialCause.Reason(), hosts, time.Unix(0, q.PartialCause.Since).UTC())
			}
		}
	})
	t.Run("a session's queries in order", func(t *testing.T) {
		q := queries[7]
		got := answer("session-queries", map[string]string{"tm_id": fmt.Sprint(q.Session.TmID), "sess_id": fmt.Sprint(q.Session.ID)})
		var want []int64
		for _, other := range queries {
			if other.Session == q.Session {
				want = append(want, other.CommandCount)
			}
		}
		var ccnts []int64
		for _, row := range got {
			ccnts = append(ccnts, row["ccnt"].(int64))
		}
		if !slices.Equal(ccnts, want) {
			t.Errorf("session %d: queries %v, want %v in order", q.Session.ID, ccnts, want)
		}
	})
}

// numericFloat reads a numeric column.
func numericFloat(t *testing.T, v any) float64 {
	t.Helper()
	n, ok := v.(pgtype.Numeric)
	if !ok {
		t.Fatalf("%v is a %T, not a numeric", v, v)
	}
	f, err := n.Float64Value()
	if err != nil {
		t.Fatal(err)
	}
	return f.Float64
}

// A batch of rule firings written again, on the same connection or a
// new one, adds no row; each row holds its event's every attribute.
func TestRuleActionsAreWrittenOnce(t *testing.T) {
	for _, target := range historyTargets(t) {
		t.Run(target.name, func(t *testing.T) {
			db := target.start(t)
			ctx := await.Context(t)
			const n = 12
			ld := ruleWorkload(0, n, middayToday())
			// Another rule on the same query at the same snapshot, superseded:
			// a row of its own.
			lrs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
			other := sampleRuleAction(0, endOf(0, n, middayToday()))
			other.Rule, other.Outcome, other.OutcomeDetail = "cpu-hog", "superseded", "rule runaway-spill (cancel) acted on the query"
			events.AppendRuleAction(lrs, other, 1)
			write := func(s *store) [tableCount]int64 {
				t.Helper()
				b := newBatch(s.tables)
				b.add(encodeEvents(ld, s.tables, middayToday().Add(-day), middayToday().Add(day)))
				written, err := s.write(ctx, b)
				if err != nil {
					t.Fatal(err)
				}
				return written
			}
			first := newStore(db.cfg)
			defer first.close(context.Background())
			if w := write(first); w != [tableCount]int64{0, 0, n + 1} {
				t.Fatalf("first write: %v rows, want %d rule_actions", w, n+1)
			}
			if w := write(first); w != [tableCount]int64{} {
				t.Errorf("the same firings again: %v rows written, want none", w)
			}
			restarted := newStore(db.cfg)
			defer restarted.close(context.Background())
			if w := write(restarted); w != [tableCount]int64{} {
				t.Errorf("the same firings on a new connection: %v rows written, want none", w)
			}
			checkRowsMatchTheEvents(t, db, first.tables[2], ld)
			t.Run("documented SQL", func(t *testing.T) { checkRuleActionsSQL(t, db, n, middayToday()) })
		})
	}
}

// checkRuleActionsSQL runs docs/operations.md's "what did rule X do on a
// day" on ruleWorkload(0, n, end): rule runaway-spill's firings, in order.
func checkRuleActionsSQL(t *testing.T, db *historyDB, n int, end time.Time) {
	ctx := await.Context(t)
	if _, err := db.admin.Exec(ctx, "SET TIME ZONE 'UTC'"); err != nil {
		t.Fatal(err)
	}
	sql := withVariables(t, documentedSQL(t, "rule-actions"), map[string]string{"rule": "runaway-spill", "day": end.Format(time.DateOnly)})
	rows, err := db.admin.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
	var fired []time.Time
	for rows.Next() {
		values, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		fired = append(fired, values[0].(time.Time))
		if values[7] != "gpotel.query.spill.size > 1GiB" {
			t.Errorf("firing at %s: the first predicate is %v", values[0], values[7])
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var want []time.Time
	for i := 0; i < n; i += 2 {
		want = append(want, endOf(i, n, end).Truncate(time.Microsecond))
	}
	if !slices.EqualFunc(fired, want, time.Time.Equal) {
		t.Errorf("rule runaway-spill fired at %v, want %v", fired, want)
	}
}

// A batch written again, as after a timeout whose first attempt did
// commit, or by a restarted collector before its queue forgot the batch,
// adds no row; grown by newer events meanwhile, it adds only those.
func TestHistoryReplayedBatchIsWrittenOnce(t *testing.T) {
	for _, target := range historyTargets(t) {
		t.Run(target.name, func(t *testing.T) {
			db := target.start(t)
			ctx := await.Context(t)
			const n = 20
			now := middayToday()
			write := func(s *store) [tableCount]int64 {
				t.Helper()
				b := newBatch(s.tables)
				b.add(encodeEvents(workload(0, n, now), s.tables, now.Add(-day), now.Add(day)))
				written, err := s.write(ctx, b)
				if err != nil {
					t.Fatal(err)
				}
				return written
			}
			first := newStore(db.cfg)
			defer first.close(context.Background())
			if w := write(first); w != [tableCount]int64{n, n / queriesPerSession} {
				t.Fatalf("first write: %v rows, want %d and %d", w, n, n/queriesPerSession)
			}
			if w := write(first); w != [tableCount]int64{} {
				t.Errorf("the same batch again: %v rows written, want none", w)
			}
			restarted := newStore(db.cfg)
			defer restarted.close(context.Background())
			if w := write(restarted); w != [tableCount]int64{} {
				t.Errorf("the same batch on a new connection: %v rows written, want none", w)
			}
			// Retried after more events were queued: the batch grew.
			const more = 10
			grown := newBatch(first.tables)
			grown.add(encodeEvents(workload(0, n, now), first.tables, now.Add(-day), now.Add(day)))
			grown.add(encodeEvents(workload(n, more, now.Add(more*time.Second)), first.tables, now.Add(-day), now.Add(day)))
			w, err := first.write(ctx, grown)
			if err != nil {
				t.Fatal(err)
			}
			if w != [tableCount]int64{more, more / queriesPerSession} {
				t.Errorf("the batch grown by %d events: %v rows written, want %d and %d", more, w, more, more/queriesPerSession)
			}
			if got := db.count(t, "SELECT count(*) FROM gpotel_history.queries"); got != n+more {
				t.Errorf("%d rows, want %d", got, n+more)
			}
		})
	}
}

// checkDashboardSQL runs the Grafana dashboard's history panels, their
// macros expanded as Grafana does, over the hour around the workload.
func checkDashboardSQL(t *testing.T, db *historyDB, n int, end time.Time) {
	qs, err := deploy.DashboardSQL(end.Add(-time.Hour), end.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var most, total float64
	for i := range n {
		q := sampleQuery(i, end)
		c := float64(q.Totals[pipeline.CPUUser])/1e9 + float64(q.Totals[pipeline.CPUSystem])/1e9
		most, total = max(most, c), total+c
	}
	for _, q := range qs {
		rows, err := db.admin.Query(await.Context(t), q.SQL)
		if err != nil {
			t.Fatalf("%s: %v\n%s", q.Source, err, q.SQL)
		}
		got, err := pgx.CollectRows(rows, pgx.RowToMap)
		if err != nil {
			t.Fatalf("%s: %v", q.Source, err)
		}
		if len(got) == 0 {
			t.Fatalf("%s: no rows", q.Source)
		}
		switch {
		case got[0]["cpu_s"] != nil:
			if c := numericFloat(t, got[0]["cpu_s"]); c != math.Round(most*100)/100 {
				t.Errorf("%s: the first query used %v CPU seconds, the busiest event %v", q.Source, c, most)
			}
		case got[0]["value"] != nil:
			var sum float64
			for _, row := range got {
				sum += row["value"].(float64)
			}
			if math.Abs(sum-total) > 1e-6 {
				t.Errorf("%s: %v CPU seconds over the users and times, the events %v", q.Source, sum, total)
			}
		default:
			t.Errorf("%s: neither a CPU column nor a value: %v", q.Source, got[0])
		}
	}
}

// A field new to the events becomes a column of the existing table at
// the next start, and rows queued before it (encoded without the field)
// are written with NULL there.
func TestHistoryAddsTheColumnOfANewField(t *testing.T) {
	for _, target := range historyTargets(t) {
		t.Run(target.name, func(t *testing.T) {
			db := target.start(t)
			ctx := await.Context(t)
			e := startExporter(t, db.cfg, componenttest.NewNopHost(), nil, nil)
			if err := e.shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			// The tables as an exporter made them that did not know the field.
			const column = "vmem_peak"
			if _, err := db.admin.Exec(ctx, "ALTER TABLE gpotel_history.queries DROP COLUMN "+column); err != nil {
				t.Fatal(err)
			}
			older := historyTables(defaultSchema)
			older[0] = newHistoryTable(defaultSchema, tableQueries, events.EventQueryEnd,
				slices.DeleteFunc(slices.Clone(events.QueryEventFields), func(f events.Field) bool { return f.Column == column }),
				events.AttrQueryEnd)
			end := middayToday()
			withVmem := func(i int) plog.Logs {
				q := sampleQuery(i, end.Add(time.Duration(i)*time.Second))
				q.VmemPeak = 1 << 30
				ld := plog.NewLogs()
				pipelinetest.AppendQueryEvent(ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords(), q, 1)
				return ld
			}
			queuedBefore := encodeEvents(withVmem(0), older, end.Add(-day), end.Add(day))

			e = startExporter(t, db.cfg, componenttest.NewNopHost(), nil, nil)
			if _, err := e.queue.push(ctx, queuedBefore.events(), queuedBefore.payload); err != nil {
				t.Fatal(err)
			}
			if err := e.consumeLogs(ctx, withVmem(1)); err != nil {
				t.Fatal(err)
			}
			db.awaitRows(t, tableQueries, 2)
			if n := db.count(t, "SELECT count(*) FROM gpotel_history.queries WHERE "+column+" IS NULL AND ccnt = 1"); n != 1 {
				t.Errorf("the row queued before the field: %d with %s NULL, want 1", n, column)
			}
			if n := db.count(t, "SELECT count(*) FROM gpotel_history.queries WHERE "+column+" = 1073741824 AND ccnt = 2"); n != 1 {
				t.Errorf("the row with the field: %d with its %s, want 1", n, column)
			}
		})
	}
}

// TestHistoryQueryRowNamesTheRuleThatEndedIt: a query a workload rule
// ended has the rule in its row's ended_by_rule; one that ended by itself
// has NULL there.
func TestHistoryQueryRowNamesTheRuleThatEndedIt(t *testing.T) {
	for _, target := range historyTargets(t) {
		t.Run(target.name, func(t *testing.T) {
			db := target.start(t)
			e := startExporter(t, db.cfg, componenttest.NewNopHost(), nil, nil)
			end := middayToday()
			ld := plog.NewLogs()
			lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
			for i := range 2 {
				q := sampleQuery(i, end)
				q.Status = events.QueryCancelled
				if i == 0 {
					q.CancelReason, q.EndedByRule = events.CancelUserRequest, "runaway-spill"
				}
				pipelinetest.AppendQueryEvent(lrs, q, 1)
			}
			if err := e.consumeLogs(context.Background(), ld); err != nil {
				t.Fatal(err)
			}
			db.awaitRows(t, tableQueries, 2)
			if n := db.count(t, "SELECT count(*) FROM gpotel_history.queries WHERE ended_by_rule = 'runaway-spill' AND ccnt = 1"); n != 1 {
				t.Errorf("the query the rule ended: %d rows naming it, want 1", n)
			}
			if n := db.count(t, "SELECT count(*) FROM gpotel_history.queries WHERE ended_by_rule IS NULL AND ccnt = 2"); n != 1 {
				t.Errorf("the query that ended by itself: %d rows naming no rule, want 1", n)
			}
			sql := withVariables(t, documentedSQL(t, "rule-ended"), map[string]string{"rule": "runaway-spill", "day": end.Format(time.DateOnly)})
			rows, err := db.admin.Query(context.Background(), sql)
			if err != nil {
				t.Fatalf("%v\n%s", err, sql)
			}
			got, err := pgx.CollectRows(rows, pgx.RowToMap)
			if err != nil || len(got) != 1 || got[0]["ccnt"] != int64(1) {
				t.Errorf("the documented statement answers %v %v, want the query the rule ended", got, err)
			}
		})
	}
}

// The history connection is one of the collector's own on its server: in
// the monitored cluster, its statements make no finished-work events (and
// so no history rows of their own), and it is its own no longer once closed.
func TestHistoryConnectionIsTheCollectorsOwn(t *testing.T) {
	for _, target := range historyTargets(t) {
		t.Run(target.name, func(t *testing.T) {
			db := target.start(t)
			e := startExporter(t, db.cfg, componenttest.NewNopHost(), nil, nil)
			if err := e.consumeLogs(context.Background(), workload(0, 4, middayToday())); err != nil {
				t.Fatal(err)
			}
			db.awaitRows(t, tableQueries, 4)
			tmID := db.count(t, gpsql.PostmasterStart)
			pid := db.count(t, "SELECT pid FROM pg_catalog.pg_stat_activity WHERE usename = $1 AND pid <> pg_backend_pid()", db.cfg.User)
			if !ownbackends.OnServer(tmID, pid) {
				t.Fatalf("the history connection's backend %d on tm_id %d is not the collector's own", pid, tmID)
			}
			if err := e.shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if ownbackends.OnServer(tmID, pid) {
				t.Errorf("backend %d is still the collector's own after the exporter shut down", pid)
			}
		})
	}
}

// The key that keeps a replayed event out is every identity column of
// its table: an event that differs from a written one in any single one
// of them is another query or session, and is written.
func TestHistoryKeyIsEveryIdentityColumn(t *testing.T) {
	for _, target := range historyTargets(t) {
		t.Run(target.name, func(t *testing.T) {
			db := target.start(t)
			ctx := await.Context(t)
			now := middayToday()
			s := newStore(db.cfg)
			defer s.close(context.Background())
			write := func(ld plog.Logs) [tableCount]int64 {
				t.Helper()
				b := newBatch(s.tables)
				b.add(encodeEvents(ld, s.tables, now.Add(-day), now.Add(day)))
				written, err := s.write(ctx, b)
				if err != nil {
					t.Fatal(err)
				}
				return written
			}
			written := workload(0, queriesPerSession, now)
			for i := range 2 {
				events.AppendRuleAction(written.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords(), sampleRuleAction(i, endOf(i, 2, now)), 1)
			}
			if w := write(written); w != [tableCount]int64{queriesPerSession, 1, 2} {
				t.Fatalf("first write: %v rows, want %d, 1 and 2", w, queriesPerSession)
			}
			for ti, table := range s.tables {
				for _, f := range table.fields {
					if !f.Identity {
						continue
					}
					t.Run(table.Name+"."+f.Column, func(t *testing.T) {
						ld := plog.NewLogs()
						lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
						orig := firstEvent(t, written, table.event)
						lr := lrs.AppendEmpty()
						orig.CopyTo(lr)
						changeAttr(t, lr.Attributes(), f)
						var want [tableCount]int64
						want[ti] = 1
						if w := write(ld); w != want {
							t.Errorf("an event differing only in %s: %v rows written, want %v", f.Column, w, want)
						}
					})
				}
			}
		})
	}
}

// firstEvent is the first log record of ld named event.
func firstEvent(t *testing.T, ld plog.Logs, event string) plog.LogRecord {
	t.Helper()
	lrs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
	for i := range lrs.Len() {
		if lrs.At(i).EventName() == event {
			return lrs.At(i)
		}
	}
	t.Fatalf("no %s event", event)
	return plog.LogRecord{}
}

// changeAttr gives field f of attrs another value of its type, one the
// history keeps apart from the first (times move by a microsecond, the
// server's resolution).
func changeAttr(t *testing.T, attrs pcommon.Map, f events.Field) {
	t.Helper()
	v, ok := attrs.Get(f.Key)
	if !ok {
		t.Fatalf("the event has no %s", f.Key)
	}
	switch f.Type {
	case events.EventInt:
		v.SetInt(v.Int() + 1)
	case events.EventString:
		v.SetStr(v.Str() + "x")
	case events.EventTime:
		at, err := time.Parse(time.RFC3339Nano, v.Str())
		if err != nil {
			t.Fatal(err)
		}
		v.SetStr(at.Add(time.Microsecond).UTC().Format(time.RFC3339Nano))
	default:
		t.Fatalf("identity field %s has type %d, which this test cannot change", f.Key, f.Type)
	}
}
