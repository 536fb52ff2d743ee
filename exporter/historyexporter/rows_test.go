// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/gpotel/gpotel/internal/pipeline"
)

var (
	testNow    = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	testOldest = testNow.Add(-defaultRetention)
	testNewest = testNow.Add(maxFutureEnd)
)

func oneQuery(q *pipeline.FinishedQuery) plog.Logs {
	ld := plog.NewLogs()
	pipeline.AppendQueryEvent(ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords(), q, 1)
	return ld
}

func batchOf(lds ...plog.Logs) *batch {
	b := newBatch(historyTables(defaultSchema))
	for _, ld := range lds {
		b.addLogs(ld, testOldest, testNewest)
	}
	return b
}

func columnsOf(t *testing.T, row []byte) []string {
	t.Helper()
	if !bytes.HasSuffix(row, []byte("\n")) || bytes.Count(row, []byte("\n")) != 1 {
		t.Fatalf("a row is not one line: %q", row)
	}
	return strings.Split(strings.TrimSuffix(string(row), "\n"), "\t")
}

func TestEveryFieldIsAColumnOfItsRow(t *testing.T) {
	b := batchOf(workload(0, queriesPerSession, testNow))
	for _, tr := range b.tables {
		if tr.rows == 0 {
			t.Fatalf("%s: no row", tr.t.Name)
		}
		row, _, _ := bytes.Cut(tr.data.Bytes(), []byte("\n"))
		cols := columnsOf(t, append(row, '\n'))
		if len(cols) != len(tr.t.fields) || len(tr.t.Columns) != len(tr.t.fields) {
			t.Fatalf("%s: %d values and %d columns for %d fields", tr.t.Name, len(cols), len(tr.t.Columns), len(tr.t.fields))
		}
		for i, f := range tr.t.fields {
			if cols[i] == `\N` && !f.Optional {
				t.Errorf("%s.%s: NULL in a column every event has", tr.t.Name, f.Column)
			}
		}
	}
}

// A database user chooses their name, application and query text: no
// character of them may leave its column, break the row, or make the
// server refuse the batch (NUL, invalid UTF-8); a text is cut at a bound.
func TestHostileStringsStayInTheirColumn(t *testing.T) {
	q := sampleQuery(0, testNow)
	q.Who.User = "a\tb\nc\\d\re\x00f\xffg"
	q.Who.Application = pipeline.NullOf(new(`\.` + "\n" + `\N`))
	long := strings.Repeat("é", maxTextBytes) // 2 bytes each: twice the bound
	q.Text = &long
	q.Segments[1].Host = "sdw\"1\\\x01"
	b := batchOf(oneQuery(q))
	cols := columnsOf(t, b.tables[0].data.Bytes())
	if len(cols) != len(pipeline.QueryEventFields) {
		t.Fatalf("%d columns, want %d", len(cols), len(pipeline.QueryEventFields))
	}
	at := func(key string) string {
		for i, f := range pipeline.QueryEventFields {
			if f.Key == key {
				return cols[i]
			}
		}
		t.Fatalf("no field %s", key)
		return ""
	}
	if got, want := at(pipeline.AttrSessionUser), `a\tb\nc\\d\re`+"\uFFFD"+"f\uFFFDg"; got != want {
		t.Errorf("user column %q, want %q", got, want)
	}
	if got, want := at(pipeline.AttrEventApplication), `\\.\n\\N`; got != want {
		t.Errorf("application column %q, want %q (an escaped end marker and NULL)", got, want)
	}
	text := at(pipeline.AttrDBQueryText)
	if len(text) > maxTextBytes || !utf8.ValidString(text) || len(text) < maxTextBytes-1 {
		t.Errorf("query text of %d bytes (valid UTF-8: %v), want cut at a character boundary within %d", len(text), utf8.ValidString(text), maxTextBytes)
	}
	if got := at(pipeline.AttrEventSegments); !strings.Contains(got, `"host":"sdw\\"1\\\\\\u0001"`) {
		t.Errorf("segments column %s: the host is not one escaped JSON string", got)
	}
}

func TestAnEventWithoutAFieldItMustHaveIsLeftOut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(plog.LogRecord)
	}{
		{"status missing", func(lr plog.LogRecord) { lr.Attributes().Remove(pipeline.AttrEventQueryStatus) }},
		{"key of another type", func(lr plog.LogRecord) { lr.Attributes().PutStr(pipeline.AttrSessionID, "42") }},
		{"optional of another type", func(lr plog.LogRecord) { lr.Attributes().PutStr(pipeline.AttrEventClientPort, "5432") }},
		{"start in year 1", func(lr plog.LogRecord) { lr.Attributes().PutStr(pipeline.AttrQueryStart, "0001-01-01T00:00:00Z") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ld := oneQuery(sampleQuery(0, testNow))
			tc.spoil(ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0))
			b := batchOf(ld)
			if b.events() != 0 || b.rejected[reasonInvalid] != 1 {
				t.Errorf("%d rows, rejected %v; want none and one invalid", b.events(), b.rejected)
			}
		})
	}
}

func TestAnEventEndingOutsideTheRetentionOrAheadOfTheClockIsLeftOut(t *testing.T) {
	b := batchOf(oneQuery(sampleQuery(0, testOldest.Add(-time.Second))), oneQuery(sampleQuery(1, testNewest.Add(time.Second))),
		oneQuery(sampleQuery(2, testOldest.Add(time.Second))))
	if b.events() != 1 || b.rejected[reasonEndOutOfRange] != 2 {
		t.Errorf("%d rows, rejected %v; want the one within and two out of range", b.events(), b.rejected)
	}
}

func TestAnEventTwiceInOneBatchIsOneRow(t *testing.T) {
	ld := oneQuery(sampleQuery(3, testNow))
	b := batchOf(ld, ld)
	if b.events() != 1 || len(b.rejected) != 0 {
		t.Errorf("%d rows, rejected %v; want 1 and none", b.events(), b.rejected)
	}
	other := sampleQuery(3, testNow)
	other.CommandCount++
	if b := batchOf(ld, oneQuery(other)); b.events() != 2 {
		t.Errorf("two events of one session with different keys: %d rows, want 2", b.events())
	}
}

func TestRecordsThatAreNotEventsAreNotQueued(t *testing.T) {
	ld := workload(0, queriesPerSession, testNow)
	lrs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
	lrs.AppendEmpty().Body().SetStr("an ordinary log line")
	tables := historyTables(defaultSchema)
	events, all := countEvents(ld, tables)
	if events != queriesPerSession+1 || all != events+1 {
		t.Fatalf("counted %d events of %d records", events, all)
	}
	only := onlyEvents(ld, tables)
	if n, all := countEvents(only, tables); n != events || all != events {
		t.Errorf("onlyEvents kept %d records, %d events; want the %d events alone", all, n, events)
	}
}
