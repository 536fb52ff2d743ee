// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
)

var (
	testNow    = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	testOldest = testNow.Add(-defaultRetention)
	testNewest = testNow.Add(maxFutureEnd)
)

func oneQuery(q *events.FinishedQuery) plog.Logs {
	ld := plog.NewLogs()
	pipelinetest.AppendQueryEvent(ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords(), q, 1)
	return ld
}

// batchOf is what the writer makes of lds, each queued by one
// ConsumeLogs call, and what encoding them left out.
func batchOf(t *testing.T, lds ...plog.Logs) (*batch, map[string]int64) {
	t.Helper()
	tables := historyTables(defaultSchema)
	b := newBatch(tables)
	rejected := map[string]int64{}
	for _, ld := range lds {
		en := encodeEvents(ld, tables, testOldest, testNewest)
		for reason, n := range en.rejected {
			rejected[reason] += n
		}
		queued, err := unmarshalEntry(en.payload)
		if err != nil {
			t.Fatal(err)
		}
		b.add(queued)
	}
	return b, rejected
}

// rowsText is a table's rows in a batch, every part's.
func rowsText(tr *tableRows) []byte {
	var out []byte
	for _, p := range tr.parts {
		for _, c := range p.chunks {
			out = append(out, c...)
		}
	}
	return out
}

func columnsOf(t *testing.T, row []byte) []string {
	t.Helper()
	if !bytes.HasSuffix(row, []byte("\n")) || bytes.Count(row, []byte("\n")) != 1 {
		t.Fatalf("a row is not one line: %q", row)
	}
	return strings.Split(strings.TrimSuffix(string(row), "\n"), "\t")
}

func TestEveryFieldIsAColumnOfItsRow(t *testing.T) {
	b, _ := batchOf(t, workload(0, queriesPerSession, testNow), ruleWorkload(0, 3, testNow))
	for _, tr := range b.tables {
		if tr.rows == 0 {
			t.Fatalf("%s: no row", tr.t.Name)
		}
		row, _, _ := bytes.Cut(rowsText(&tr), []byte("\n"))
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
	b, _ := batchOf(t, oneQuery(q))
	cols := columnsOf(t, rowsText(&b.tables[0]))
	if len(cols) != len(events.QueryEventFields) {
		t.Fatalf("%d columns, want %d", len(cols), len(events.QueryEventFields))
	}
	at := func(key string) string {
		for i, f := range events.QueryEventFields {
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
	if got, want := at(events.AttrApplication), `\\.\n\\N`; got != want {
		t.Errorf("application column %q, want %q (an escaped end marker and NULL)", got, want)
	}
	text := at(pipeline.AttrDBQueryText)
	if len(text) > maxTextBytes || !utf8.ValidString(text) || len(text) < maxTextBytes-1 {
		t.Errorf("query text of %d bytes (valid UTF-8: %v), want cut at a character boundary within %d", len(text), utf8.ValidString(text), maxTextBytes)
	}
	if got := at(events.AttrSegments); !strings.Contains(got, `"host":"sdw\\"1\\\\\\u0001"`) {
		t.Errorf("segments column %s: the host is not one escaped JSON string", got)
	}
}

func TestAnEventWithoutAFieldItMustHaveIsLeftOut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(plog.LogRecord)
	}{
		{"status missing", func(lr plog.LogRecord) { lr.Attributes().Remove(events.AttrQueryStatus) }},
		{"key of another type", func(lr plog.LogRecord) { lr.Attributes().PutStr(pipeline.AttrSessionID, "42") }},
		{"optional of another type", func(lr plog.LogRecord) { lr.Attributes().PutStr(events.AttrClientPort, "5432") }},
		{"start in year 1", func(lr plog.LogRecord) { lr.Attributes().PutStr(pipeline.AttrQueryStart, "0001-01-01T00:00:00Z") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ld := oneQuery(sampleQuery(0, testNow))
			tc.spoil(ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0))
			b, rejected := batchOf(t, ld)
			if b.events() != 0 || rejected[reasonInvalid] != 1 {
				t.Errorf("%d rows, rejected %v; want none and one invalid", b.events(), rejected)
			}
		})
	}
}

func TestAnEventEndingOutsideTheRetentionOrAheadOfTheClockIsLeftOut(t *testing.T) {
	b, rejected := batchOf(t, oneQuery(sampleQuery(0, testOldest.Add(-time.Second))), oneQuery(sampleQuery(1, testNewest.Add(time.Second))),
		oneQuery(sampleQuery(2, testOldest.Add(time.Second))))
	if b.events() != 1 || rejected[reasonEndOutOfRange] != 2 {
		t.Errorf("%d rows, rejected %v; want the one within and two out of range", b.events(), rejected)
	}
}

func TestAnEventTwiceInOneBatchIsOneRow(t *testing.T) {
	ld := oneQuery(sampleQuery(3, testNow))
	b, rejected := batchOf(t, ld, ld)
	if b.events() != 1 || len(rejected) != 0 {
		t.Errorf("%d rows, rejected %v; want 1 and none", b.events(), rejected)
	}
	other := sampleQuery(3, testNow)
	other.CommandCount++
	if b, _ := batchOf(t, ld, oneQuery(other)); b.events() != 2 {
		t.Errorf("two events of one session with different keys: %d rows, want 2", b.events())
	}
}

func TestRecordsThatAreNotEventsAreNotQueued(t *testing.T) {
	ld := workload(0, queriesPerSession, testNow)
	ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().AppendEmpty().Body().SetStr("an ordinary log line")
	en := encodeEvents(ld, historyTables(defaultSchema), testOldest, testNewest)
	if en.events() != queriesPerSession+1 || len(en.rejected) != 0 {
		t.Errorf("%d rows, rejected %v; want the %d events and nothing else", en.events(), en.rejected, queriesPerSession+1)
	}
}

func TestAnEntryReadsBackAsItWasQueued(t *testing.T) {
	ld := workload(0, 2*queriesPerSession, testNow)
	ruleWorkload(0, 3, testNow).ResourceLogs().MoveAndAppendTo(ld.ResourceLogs())
	en := encodeEvents(ld, historyTables(defaultSchema), testOldest, testNewest)
	back, err := unmarshalEntry(en.payload)
	if err != nil {
		t.Fatal(err)
	}
	en.rejected, en.why = nil, nil
	if !reflect.DeepEqual(back, en) {
		t.Errorf("read back %+v\nwant %+v", back, en)
	}
}

// A damaged entry (cut anywhere, or a byte changed) is an error, never a
// panic or a huge allocation.
func TestADamagedEntryIsRefused(t *testing.T) {
	raw := encodeEvents(workload(0, queriesPerSession, testNow), historyTables(defaultSchema), testOldest, testNewest).payload
	for n := range len(raw) {
		if _, err := unmarshalEntry(raw[:n]); err == nil {
			t.Fatalf("an entry cut at %d of %d bytes read back", n, len(raw))
		}
	}
}

func FuzzUnmarshalEntry(f *testing.F) {
	f.Add(encodeEvents(workload(0, queriesPerSession, testNow), historyTables(defaultSchema), testOldest, testNewest).payload)
	f.Add([]byte{entryVersion, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(_ *testing.T, b []byte) {
		e, err := unmarshalEntry(b)
		if err != nil {
			return
		}
		// Whatever decodes is added to a batch without a panic.
		newBatch(historyTables(defaultSchema)).add(e)
	})
}

// Rows queued by an exporter that knew fewer fields are written into the
// columns they have; rows naming a column the table's fields lack are
// left out, counted.
func TestRowsQueuedForOtherColumns(t *testing.T) {
	tables := historyTables(defaultSchema)
	fewer := historyTables(defaultSchema)
	fewer[0] = newHistoryTable(defaultSchema, tableQueries, events.EventQueryEnd,
		slices.DeleteFunc(slices.Clone(events.QueryEventFields), func(f events.Field) bool { return f.Key == events.AttrVmemPeak }),
		events.AttrQueryEnd)
	old := encodeEvents(oneQuery(sampleQuery(0, testNow)), fewer, testOldest, testNewest)
	b := newBatch(tables)
	b.add(old)
	b.add(encodeEvents(oneQuery(sampleQuery(1, testNow)), tables, testOldest, testNewest))
	if len(b.tables[0].parts) != 2 || b.tables[0].rows != 2 {
		t.Errorf("%d parts with %d rows; want the old columns' and the new, a row each", len(b.tables[0].parts), b.tables[0].rows)
	}
	unknown := encodeEvents(oneQuery(sampleQuery(2, testNow)), tables, testOldest, testNewest)
	unknown.tables[0].columns = append(slices.Clone(unknown.tables[0].columns[:len(unknown.tables[0].columns)-1]), "a_field_gone")
	b.add(unknown)
	if b.rejected[reasonInvalid] != 1 || b.tables[0].rows != 2 {
		t.Errorf("rows for an unknown column: rejected %v, %d rows; want 1 invalid and 2 rows", b.rejected, b.tables[0].rows)
	}
}

// An entry queued by a version without rule_actions (version 1: the
// queries and sessions only) is still read and written after an upgrade.
func TestAnEntryQueuedBeforeRuleActionsIsStillWritten(t *testing.T) {
	tables := historyTables(defaultSchema)
	en := encodeEvents(workload(0, queriesPerSession, testNow), tables, testOldest, testNewest)
	en.tables = en.tables[:2]
	v1 := remarshal(en)
	v1[0] = 1
	back, err := unmarshalEntry(v1)
	if err != nil {
		t.Fatalf("a version 1 entry: %v", err)
	}
	b := newBatch(tables)
	b.add(back)
	if got := [tableCount]int64{b.tables[0].rows, b.tables[1].rows, b.tables[2].rows}; got != [tableCount]int64{queriesPerSession, 1, 0} || len(b.rejected) != 0 {
		t.Errorf("a version 1 entry's rows: %v, rejected %v; want %d queries and a session", got, b.rejected, queriesPerSession)
	}
}

// A rule event's lists come from any sender: more than maxArrayElements,
// a list longer than maxTextBytes, or an element of another type leaves
// the event out, counted as invalid, never a cut array literal.
func TestARuleEventsListsAreBounded(t *testing.T) {
	for name, change := range map[string]func(a *events.RuleAction){
		"too many predicates": func(a *events.RuleAction) { a.Predicates = make([]string, maxArrayElements+1) },
		"too long a list": func(a *events.RuleAction) {
			a.Predicates = []string{strings.Repeat("x", maxTextBytes/2), strings.Repeat("y", maxTextBytes/2)}
		},
	} {
		t.Run(name, func(t *testing.T) {
			a := sampleRuleAction(0, testNow)
			change(a)
			ld := plog.NewLogs()
			events.AppendRuleAction(ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords(), a, 1)
			en := encodeEvents(ld, historyTables(defaultSchema), testOldest, testNewest)
			if en.events() != 0 || en.rejected[reasonInvalid] != 1 {
				t.Errorf("%d rows, rejected %v; want the event invalid", en.events(), en.rejected)
			}
		})
	}
	ld := plog.NewLogs()
	lr := events.AppendRuleAction(ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords(), sampleRuleAction(0, testNow), 1)
	values, _ := lr.Attributes().Get(events.AttrRuleValues)
	values.Slice().AppendEmpty().SetStr("NaN")
	if en := encodeEvents(ld, historyTables(defaultSchema), testOldest, testNewest); en.events() != 0 || en.rejected[reasonInvalid] != 1 {
		t.Errorf("a value that is a string: %d rows, rejected %v; want the event invalid", en.events(), en.rejected)
	}
}
