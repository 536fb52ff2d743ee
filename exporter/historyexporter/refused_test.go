// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
)

// counted is the sum a counter of tel holds, over the data points whose
// attribute key has value (every point when key is "").
func counted(t *testing.T, tel *componenttest.Telemetry, name, key, value string) int64 {
	t.Helper()
	m, err := tel.GetMetric(name)
	if err != nil {
		return 0 // never recorded
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T", name, m.Data)
	}
	var n int64
	for _, dp := range sum.DataPoints {
		if v, _ := dp.Attributes.Value(attribute.Key(key)); key == "" || v.AsString() == value {
			n += dp.Value
		}
	}
	return n
}

// beginCounter counts the transactions a connection begins.
type beginCounter struct{ n atomic.Int64 }

func (c *beginCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.EqualFold(strings.TrimSpace(data.SQL), "begin") {
		c.n.Add(1)
	}
	return ctx
}

func (*beginCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// queriesWithTexts is one query event per text, ending a second apart
// up to end.
func queriesWithTexts(texts []string, end time.Time) plog.Logs {
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for i, text := range texts {
		q := sampleQuery(i, endOf(i, len(texts), end))
		q.Text = &text
		pipelinetest.AppendQueryEvent(lrs, q, 1)
	}
	return ld
}

// A row the server refuses for its data (SQLSTATE class 22) costs that
// row, counted, and never the batch's progress: the rows around it are
// written, each once, even when writing them one by one would take longer
// than the timeout.
func TestOneRefusedRowDoesNotStallTheHistory(t *testing.T) {
	for _, target := range historyTargets(t) {
		t.Run(target.name, func(t *testing.T) {
			db := target.start(t)
			if db.cluster == nil {
				t.Skip("the poison row is a trigger of the testbed's PostgreSQL")
			}
			cfg := *db.cfg
			// Far too short to write 3 000 rows one transaction each.
			cfg.Timeout = 2 * time.Second
			tel := componenttest.NewTelemetry()
			t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
			e := newExporterAt(t, &cfg, tel, nil)
			begins := &beginCounter{}
			e.store.tracer = begins
			if err := e.start(context.Background(), componenttest.NewNopHost()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.shutdown(context.Background()) })
			ctx := await.Context(t)
			// The server refuses the poison row as COPY and INSERT send it.
			for _, stmt := range []string{
				`CREATE FUNCTION public.poison() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN
					IF NEW.query_text LIKE '%poison%' THEN
						RAISE EXCEPTION 'a poison row' USING ERRCODE = 'data_exception';
					END IF;
					RETURN NEW;
				END $$`,
				`CREATE TRIGGER poison BEFORE INSERT ON gpotel_history.queries FOR EACH ROW EXECUTE FUNCTION public.poison()`,
			} {
				if _, err := db.admin.Exec(ctx, stmt); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
			const n, poison = 3000, 1700
			texts := make([]string, n)
			for i := range texts {
				texts[i] = fmt.Sprintf("SELECT %d -- query %d", i, i)
			}
			texts[poison] = "SELECT 'poison'"
			begins.n.Store(0)
			if err := e.consumeLogs(ctx, queriesWithTexts(texts, middayToday())); err != nil {
				t.Fatal(err)
			}
			db.awaitRows(t, tableQueries, n-1)
			await.Until(t, "the poison row counted", func() bool {
				return counted(t, tel, "otelcol_history_events_dropped", "reason", reasonRejectedByDatabase) == 1
			})
			if events, _ := e.queue.size(); events != 0 {
				t.Errorf("%d events still queued", events)
			}
			if twice := db.count(t, "SELECT count(*) - count(DISTINCT query_text) FROM gpotel_history.queries"); twice != 0 {
				t.Errorf("%d rows written twice", twice)
			}
			if got := counted(t, tel, "otelcol_history_events_written", "", ""); got != n-1 {
				t.Errorf("history_events_written counts %d, want %d", got, n-1)
			}
			// About 2·log2(n) transactions an attempt; row by row is n.
			if got := begins.n.Load(); got > 200 {
				t.Errorf("%d transactions for %d rows and one refused", got, n)
			}
		})
	}
}

// A character the history database's encoding cannot hold is written as
// '?' and counted; every other character is stored as it was sent.
func TestACharacterTheDatabaseCannotHoldIsReplacedAndCounted(t *testing.T) {
	for _, tc := range []struct {
		encoding, want string
		replaced       int64
	}{
		{"UTF8", "a😀bé中c\\t", 0},
		{"SQL_ASCII", "a😀bé中c\\t", 0},
		{"LATIN1", "a?bé?c\\t", 2},
		{"WIN1251", "a?b??c\\t", 3},
		{"EUC_CN", "a?bé中c\\t", 1},
		{"EUC_JP", "a?bé中c\\t", 1}, // é in JIS X 0212
		{"EUC_KR", "a?b?中c\\t", 2},
		{"MULE_INTERNAL", "a?b??c\\t", 3},
	} {
		got, n := charsetOf(tc.encoding).fit([]byte("a😀bé中c\\t"))
		if string(got) != tc.want || n != tc.replaced {
			t.Errorf("%s: %q, %d replaced; want %q, %d", tc.encoding, got, n, tc.want, tc.replaced)
		}
	}
	if got, n := charsetOf("LATIN1").fit([]byte("a\xffb")); string(got) != "a?b" || n != 1 {
		t.Errorf("invalid UTF-8 in LATIN1: %q, %d replaced", got, n)
	}
}

// The same on a real server: what is stored is the text where its
// encoding holds it, '?' where not, counted.
func TestHistoryTextSurvivesTheDatabaseEncoding(t *testing.T) {
	const text = "a😀bé中c"
	for _, target := range historyTargets(t) {
		t.Run(target.name, func(t *testing.T) {
			db := target.start(t)
			for _, tc := range []struct {
				encoding string
				want     string
				replaced int64
			}{
				{"UTF8", text, 0},
				{"LATIN1", "a?bé?c", 2},
				{"EUC_CN", "a?bé中c", 1},
			} {
				t.Run(tc.encoding, func(t *testing.T) {
					ctx := await.Context(t)
					database := "gpotel_history_" + strings.ToLower(tc.encoding)
					maintenance, err := pgx.Connect(ctx, db.adminDSN)
					if err != nil {
						t.Fatal(err)
					}
					defer func() { _ = maintenance.Close(context.Background()) }()
					for _, stmt := range []string{
						"DROP DATABASE IF EXISTS " + database,
						fmt.Sprintf("CREATE DATABASE %s ENCODING '%s' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0", database, tc.encoding),
						"GRANT CREATE, TEMPORARY ON DATABASE " + database + " TO gpotel_history",
					} {
						if _, err := maintenance.Exec(ctx, stmt); err != nil {
							t.Fatalf("%s: %v", stmt, err)
						}
					}
					// Registered first, run last: after the exporter closed its
					// connection. A database left behind keeps the history
					// role, which the next test on the same server drops.
					t.Cleanup(func() {
						ctx := context.Background()
						if c, err := pgx.Connect(ctx, db.adminDSN); err == nil {
							if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+database); err != nil {
								t.Errorf("drop %s: %v", database, err)
							}
							_ = c.Close(ctx)
						}
					})
					cfg := *db.cfg
					cfg.Database = database
					tel := componenttest.NewTelemetry()
					t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
					e := startExporter(t, &cfg, componenttest.NewNopHost(), tel, nil)
					if err := e.consumeLogs(ctx, queriesWithTexts([]string{text}, middayToday())); err != nil {
						t.Fatal(err)
					}
					cc := maintenance.Config().Copy()
					cc.Database = database
					cc.RuntimeParams["client_encoding"] = "UTF8"
					reader, err := pgx.ConnectConfig(ctx, cc)
					if err != nil {
						t.Fatal(err)
					}
					defer func() { _ = reader.Close(context.Background()) }()
					var stored string
					await.NoError(t, "the row written", func() error {
						return reader.QueryRow(ctx, "SELECT query_text FROM gpotel_history.queries").Scan(&stored)
					})
					if stored != tc.want {
						t.Errorf("stored %q, want %q", stored, tc.want)
					}
					// Counted once the write is done, just after the commit.
					await.Until(t, fmt.Sprintf("%d characters replaced", tc.replaced), func() bool {
						events, _ := e.queue.size()
						return events == 0 && counted(t, tel, "otelcol_history_characters_replaced", "", "") == tc.replaced
					})
					assertNothingDropped(t, tel)
					if err := e.shutdown(ctx); err != nil {
						t.Error(err)
					}
				})
			}
		})
	}
}
