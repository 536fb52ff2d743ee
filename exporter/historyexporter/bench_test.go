// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/benchmeter"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
)

// benchBatch is the events of one write: as many as the default batch.
const benchBatch = defaultBatchMaxEvents

// BenchmarkHistoryStore writes batches of benchBatch events (queries and
// one session per five) through the exporter's own path (queue, decode,
// rows, the look-up of rows in the batch's range of end times, the COPY
// and, where earlier rows lie in that range, the insert that leaves out
// known keys; commit) into the testbed's PostgreSQL, and beside it, in
// the same run, COPYs the same rows into a plain table (no partitions,
// indexes or key look-up): the reference. It reports query rows/s of each
// and their ratio, the exporter's own CPU (this process: encoding, pgx)
// per 1000 events, and what a query row takes on disk with its indexes,
// for segments instances per query and a 200-character query text, and
// for each way the batches' end times lie (benchWindows).
func BenchmarkHistoryStore(b *testing.B) {
	db := startTestbedHistoryDB(b)
	for _, segments := range []int{3, 64} {
		b.Run(fmt.Sprintf("segments=%d", segments), func(b *testing.B) {
			for _, window := range benchWindows {
				// The benchmark function runs more than once (b.N grows); each
				// run writes keys new to the tables.
				st := newBenchStore(b, db, segments, window)
				b.Run("window="+window, st.run)
			}
		})
	}
}

// How a run's batches' end times lie.
const (
	// windowOwn: each batch ends after the one before, as a running
	// cluster's events arrive (a batch holds the queries that ended since
	// the last): the table holds no row in a batch's range, and the batch
	// is copied straight in.
	windowOwn = "own"
	// windowShared: every batch ends over the same two hours and more, the
	// worst case: each is staged, and its look-up reads the rows of every
	// batch before it.
	windowShared = "shared"
)

var benchWindows = []string{windowOwn, windowShared}

// benchStore is one schema's exporter and reference table.
type benchStore struct {
	db          *historyDB
	segments    int
	window      string
	e           *historyExporter
	queries     string // the exporter's table
	reference   string // the plain one
	nextBatch   int
	rowsInTable int64
}

func newBenchStore(b *testing.B, db *historyDB, segments int, window string) *benchStore {
	ctx := await.Context(b)
	cfg := *db.cfg
	cfg.Schema = fmt.Sprintf("bench_%d_%s", segments, window)
	e := newExporterAt(b, &cfg, nil, nil)
	q, _, err := openQueue(ctx, newMemoryClient(), cfg.Queue.MaxBytes)
	if err != nil {
		b.Fatal(err)
	}
	e.queue = q
	if err := e.store.open(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.store.close(context.Background()) })
	st := &benchStore{db: db, segments: segments, window: window, e: e, queries: cfg.Schema + ".queries", reference: cfg.Schema + ".reference"}
	if _, err := db.admin.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (LIKE %s)", st.reference, st.queries)); err != nil {
		b.Fatal(err)
	}
	return st
}

// batchEnd is when the last query of batch i ends. The own windows start
// three days back, so that the runs' batches (a few dozen, of some two
// hours each) end before the clock.
func (st *benchStore) batchEnd(i int) time.Time {
	if st.window == windowShared {
		return middayToday()
	}
	span := time.Duration(benchQueries()+1) * time.Second
	return middayToday().Add(-3*day + time.Duration(i)*span)
}

func (st *benchStore) run(b *testing.B) {
	ctx := await.Context(b)
	e, db := st.e, st.db
	var exporterTime, referenceTime, cpu time.Duration
	var queryRows, events, queued int64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		end := st.batchEnd(st.nextBatch)
		ld, n := benchEvents(st.nextBatch, st.segments, end)
		st.nextBatch++
		// The reference's input: the same rows, already in COPY's text.
		rows := encodeEvents(ld, e.store.tables, end.Add(-day), end.Add(day))
		queued += int64(len(rows.payload))
		b.StartTimer()

		began, cpuBefore := time.Now(), benchmeter.ProcessCPU()
		if err := e.consumeLogs(ctx, ld); err != nil {
			b.Fatal(err)
		}
		if err := e.writeQueued(ctx); err != nil {
			b.Fatal(err)
		}
		exporterTime += time.Since(began)
		cpu += benchmeter.ProcessCPU() - cpuBefore

		b.StopTimer()
		began = time.Now()
		if _, err := db.admin.PgConn().CopyFrom(ctx, bytes.NewReader(rows.tables[0].data), "COPY "+st.reference+" FROM STDIN"); err != nil {
			b.Fatal(err)
		}
		referenceTime += time.Since(began)
		queryRows += rows.tables[0].rows
		events += n
		b.StartTimer()
	}
	b.StopTimer()
	st.rowsInTable += queryRows
	if got := db.count(b, "SELECT count(*) FROM "+st.queries); got != st.rowsInTable {
		b.Fatalf("%d query rows in the table, want %d", got, st.rowsInTable)
	}
	exporterRate := float64(queryRows) / exporterTime.Seconds()
	referenceRate := float64(queryRows) / referenceTime.Seconds()
	b.ReportMetric(exporterRate, "query_rows/s")
	b.ReportMetric(referenceRate, "reference_query_rows/s")
	b.ReportMetric(exporterRate/referenceRate, "ratio_to_plain_copy")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(events)*1000, "cpu_ms/1000_events")
	bytesPerRow := float64(db.count(b, `SELECT sum(pg_total_relation_size(i.inhrelid))::bigint FROM pg_inherits i WHERE i.inhparent = $1::regclass`,
		st.queries)) / float64(st.rowsInTable)
	b.ReportMetric(bytesPerRow, "bytes/query_row")
	b.ReportMetric(float64(queued)/float64(events), "queued_bytes/event")
	b.ReportMetric(bytesPerRow*10*86400/(1<<20), "MiB/day_at_10_queries/s")
}

// benchQueries is how many of a batch's events are queries.
func benchQueries() int { return benchBatch * queriesPerSession / (queriesPerSession + 1) }

// benchEvents is iteration i's events: benchBatch of them, their keys
// new to the tables, the last ending at end one second after the one
// before.
func benchEvents(i, segments int, end time.Time) (plog.Logs, int64) {
	queries := benchQueries()
	ld := workload(i*queries, queries, end)
	text := strings.Repeat("SELECT x, count(*) FROM t GROUP BY x; ", 6)[:200]
	rls := ld.ResourceLogs()
	var n int64
	for j := range rls.Len() {
		lrs := rls.At(j).ScopeLogs().At(0).LogRecords()
		for k := range lrs.Len() {
			lr := lrs.At(k)
			n++
			if lr.EventName() != events.EventQueryEnd {
				continue
			}
			lr.Attributes().PutStr(pipeline.AttrDBQueryText, text)
			segs := lr.Attributes().PutEmptySlice(events.AttrSegments)
			for s := -1; s < segments-1; s++ {
				m := segs.AppendEmpty().SetEmptyMap()
				m.PutStr(events.SegmentKeyHost, fmt.Sprintf("sdw%d", s/8+1))
				m.PutInt(events.SegmentKeySegment, int64(s))
				m.PutDouble(events.SegmentKeyCPU, 1.234567891*float64(s+2))
				m.PutInt(events.SegmentKeyRead, int64(s+2)<<20)
				m.PutInt(events.SegmentKeyWritten, int64(s+2)<<12)
			}
		}
	}
	return ld, n
}
