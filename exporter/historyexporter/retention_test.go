// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/gpotel/gpotel/exporter/historyexporter/internal/metadatatest"
	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/gpsql"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
)

// Retention drops the partition of every day that ended before the
// retention began, as a whole, and leaves the newer rows as they were
// (same physical row, same writing transaction): no row is deleted.
func TestHistoryRetentionDropsWholeDays(t *testing.T) {
	for _, target := range historyTargets(t) {
		t.Run(target.name, func(t *testing.T) {
			db := target.start(t)
			// Forty days ago at 06:00 UTC: the events end on three days
			// before it and twice on its own day.
			d0 := time.Now().UTC().Truncate(day).AddDate(0, 0, -40)
			then := d0.Add(6 * time.Hour)
			ends := []time.Time{d0.AddDate(0, 0, -2).Add(time.Hour), d0.AddDate(0, 0, -1).Add(time.Hour), d0.Add(time.Hour), d0.Add(5 * time.Hour)}
			ld := workload(0, 0, then)
			lrs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
			for i, end := range ends {
				appendQuery(lrs, i, end)
			}
			e := startExporter(t, db.cfg, componenttest.NewNopHost(), nil, func() time.Time { return then })
			if err := e.consumeLogs(context.Background(), ld); err != nil {
				t.Fatal(err)
			}
			db.awaitRows(t, tableQueries, int64(len(ends)))
			if err := e.shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			kept := db.physicalRows(t, d0)
			if len(kept) != 2 {
				t.Fatalf("%d rows on %s before the retention, want 2", len(kept), d0.Format(time.DateOnly))
			}

			// Thirty days and eighteen hours later the retention (30 days)
			// began at 18:00 of d0: the two days before d0 are past it,
			// d0 itself is not wholly.
			later := then.Add(defaultRetention + 12*time.Hour)
			tel := componenttest.NewTelemetry()
			t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
			startExporter(t, db.cfg, componenttest.NewNopHost(), tel, func() time.Time { return later })
			// Its first retention runs at start; the counter follows the drops.
			await.Until(t, "partitions counted as dropped", func() bool {
				_, err := tel.GetMetric("otelcol_history_partitions_dropped")
				return err == nil
			})
			metadatatest.AssertEqualHistoryPartitionsDropped(t, tel, []metricdata.DataPoint[int64]{
				{Value: 2, Attributes: attribute.NewSet(attribute.String("table", tableQueries))},
			}, metricdatatest.IgnoreTimestamp())
			days := db.partitionDays(t, tableQueries)
			for _, d := range []time.Time{d0.AddDate(0, 0, -2), d0.AddDate(0, 0, -1)} {
				if slices.ContainsFunc(days, d.Equal) {
					t.Errorf("partitions %v: the day %s, wholly older than the retention, is still there", days, d.Format(time.DateOnly))
				}
			}
			if days := db.partitionDays(t, tableQueries); !slices.ContainsFunc(days, d0.Equal) {
				t.Errorf("partitions %v: the day %s, newer than the retention at its end, is gone", days, d0.Format(time.DateOnly))
			}
			if n := db.count(t, "SELECT count(*) FROM gpotel_history.queries WHERE query_end < $1", d0); n != 0 {
				t.Errorf("%d rows of the dropped days remain", n)
			}
			if after := db.physicalRows(t, d0); !maps.Equal(after, kept) {
				t.Errorf("the rows of %s changed: before %v, after %v", d0.Format(time.DateOnly), kept, after)
			}
		})
	}
}

// physicalRows maps each row of a day to where it lies and the
// transaction that wrote it: a rewrite or a delete changes them.
func (db *historyDB) physicalRows(t *testing.T, d time.Time) map[string]string {
	t.Helper()
	rows, err := db.admin.Query(await.Context(t),
		"SELECT ccnt::text || '/' || sess_id::text, ctid::text || ' ' || xmin::text FROM gpotel_history.queries WHERE query_end >= $1 AND query_end < $2",
		d, d.Add(day))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var key, where string
	if _, err := pgx.ForEachRow(rows, []any{&key, &where}, func() error { out[key] = where; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// partitionDays are the days of table's partitions, as the exporter names them.
func (db *historyDB) partitionDays(t *testing.T, table string) []time.Time {
	t.Helper()
	d := db.dialect(t)
	rows, err := db.admin.Query(await.Context(t), gpsql.HistoryPartitions(d), defaultSchema, table)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var days []time.Time
	for _, name := range names {
		if day, ok := gpsql.HistoryPartitionDay(d, gpsql.HistoryTable{Schema: defaultSchema, Name: table}, name); ok {
			days = append(days, day)
		}
	}
	slices.SortFunc(days, time.Time.Compare)
	return days
}

// dialect is the history database's, from its version().
func (db *historyDB) dialect(t *testing.T) dialect.Dialect {
	t.Helper()
	var version string
	if err := db.admin.QueryRow(await.Context(t), gpsql.Version).Scan(&version); err != nil {
		t.Fatal(err)
	}
	d, err := dialect.Detect(version)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func appendQuery(lrs plog.LogRecordSlice, i int, end time.Time) {
	pipelinetest.AppendQueryEvent(lrs, sampleQuery(i, end), 1)
}

// Retention cuts the three tables at one instant: a day goes once its
// last instant is older than the retention, not a nanosecond sooner.
func TestHistoryRetentionCutsEveryTableAtTheDaysLastInstant(t *testing.T) {
	for _, target := range historyTargets(t) {
		t.Run(target.name, func(t *testing.T) {
			db := target.start(t)
			ctx := await.Context(t)
			d0 := time.Now().UTC().Truncate(day).AddDate(0, 0, -40)
			days := []time.Time{d0.AddDate(0, 0, -2), d0.AddDate(0, 0, -1), d0}
			s := newStore(db.cfg)
			defer s.close(context.Background())
			ld := plog.NewLogs()
			lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
			for i, d := range days {
				end := d.Add(time.Hour)
				pipelinetest.AppendQueryEvent(lrs, sampleQuery(i*queriesPerSession, end), 1)
				pipelinetest.AppendSessionEvent(lrs, sampleSession(i*queriesPerSession, end), 1)
				events.AppendRuleAction(lrs, sampleRuleAction(i, end), 1)
			}
			b := newBatch(s.tables)
			b.add(encodeEvents(ld, s.tables, days[0], d0.Add(day)))
			if w, err := s.write(ctx, b); err != nil || w != [tableCount]int64{3, 3, 3} {
				t.Fatalf("write: %v rows, %v; want 3 in each table", w, err)
			}
			for _, step := range []struct {
				cutoff time.Time
				kept   []time.Time
			}{
				// The day before d0 ends at d0's first instant: a nanosecond
				// before it, that day is not wholly older yet.
				{cutoff: d0.Add(-time.Nanosecond), kept: days[1:]},
				{cutoff: d0, kept: days[2:]},
			} {
				s.now = func() time.Time { return step.cutoff.Add(s.cfg.Retention) }
				if _, err := s.dropOldDays(ctx); err != nil {
					t.Fatal(err)
				}
				for _, table := range []string{tableQueries, tableSessions, tableRuleActions} {
					var got []time.Time
					for _, d := range db.partitionDays(t, table) {
						if d.Before(d0.Add(day)) {
							got = append(got, d)
						}
					}
					if !slices.EqualFunc(got, step.kept, time.Time.Equal) {
						t.Errorf("retention beginning at %s: the %s partitions are %v, want %v", step.cutoff, table, got, step.kept)
					}
				}
			}
		})
	}
}
