// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// Bounds on what an event may carry (an event may come from any OTLP
// sender, not only gpotel's connector).
const (
	// maxTextBytes cuts a longer string (a query text) at a character
	// boundary; the server's own names are far shorter.
	maxTextBytes = 1 << 20
	// maxFutureEnd: an event that ends further ahead of the collector's
	// clock would open a partition of a day that has not come.
	maxFutureEnd = 24 * time.Hour
)

// The times a column may hold: the server's timestamptz holds far more,
// but a year outside these is a broken clock or a hostile sender.
var (
	earliestTime = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
	latestTime   = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
)

// entry is the rows of one ConsumeLogs call, per table, in COPY's text
// format, as the queue keeps them: encoded once, when they arrive.
type entry struct {
	tables []entryTable // a version 1 entry has no rule_actions
	// payload is the entry as the queue keeps it (marshal); the tables'
	// data are slices of it.
	payload []byte
	// rejected counts the events left out, by reason; why is the first
	// explanation of each, for the log.
	rejected map[string]int64
	why      map[string]string
}

// entryTable is one table's rows of an entry, with the columns they were
// encoded for (a later version of the exporter may have more).
type entryTable struct {
	event          string
	columns        []string
	rows           int64
	minEnd, maxEnd int64   // unix ns
	days           []int64 // the UTC days the rows end on, unix s
	data           []byte
}

func (e *entry) events() (n int64) {
	for _, et := range e.tables {
		n += et.rows
	}
	return n
}

func (e *entry) reject(reason, why string) {
	if e.rejected == nil {
		e.rejected, e.why = map[string]int64{}, map[string]string{}
	}
	e.rejected[reason]++
	if _, ok := e.why[reason]; !ok {
		e.why[reason] = why
	}
}

// The queue's layout of an entry (little endian): a version byte, each
// table's rows (a 4-byte length, then the bytes), then per table its
// event name, its columns (comma-separated), rows, first and last end and
// days. The first table's rows are encoded in place, the others' (the
// sessions and rule firings, fewer) beside and copied after: a batch's
// rows are megabytes, which copying and growing again cost more than
// encoding them. Version 1 entries hold the queries and sessions only.
const (
	entryVersion = 2
	lengthSize   = 4
	// minRowRoom is the room left for the next row before the buffer grows.
	minRowRoom = 64 << 10
)

// entryTables is the number of tables an entry of each version holds.
var entryTables = map[byte]int{1: 2, entryVersion: tableCount}

// encodeEvents encodes every event of ld the history tables hold as a row
// of its table; other records are not the exporter's. An event must end
// within [oldest, newest].
func encodeEvents(ld plog.Logs, tables [tableCount]*historyTable, oldest, newest time.Time) *entry {
	e := &entry{tables: make([]entryTable, tableCount)}
	var days [tableCount]map[int64]struct{}
	for i, t := range tables {
		e.tables[i].event, e.tables[i].columns = t.event, t.columnNames
		days[i] = map[int64]struct{}{}
	}
	// bufs[0] is the entry itself, from the version byte on; bufs[i] the
	// other tables' rows.
	var bufs [tableCount][]byte
	bufs[0] = append(bufs[0], entryVersion, 0, 0, 0, 0)
	var r rowReader
	rls := ld.ResourceLogs()
	for i := range rls.Len() {
		sls := rls.At(i).ScopeLogs()
		for j := range sls.Len() {
			lrs := sls.At(j).LogRecords()
			for k := range lrs.Len() {
				lr := lrs.At(k)
				ti := slices.IndexFunc(tables[:], func(t *historyTable) bool { return t.event == lr.EventName() })
				if ti < 0 {
					continue
				}
				et, t, buf := &e.tables[ti], tables[ti], &bufs[ti]
				if cap(*buf)-len(*buf) < minRowRoom {
					// Doubling, by what was written: append's own growth
					// of a large slice (a quarter) copies the rows several
					// times over, and a guess from one row times the
					// records left is the sender's to choose.
					*buf = slices.Grow(*buf, max(len(*buf), minRowRoom))
				}
				before := len(*buf)
				var end time.Time
				var err error
				if *buf, end, err = r.encodeRow(*buf, t, lr); err != nil {
					*buf = (*buf)[:before]
					e.reject(reasonInvalid, fmt.Sprintf("%s event: %v", t.event, err))
					continue
				}
				if end.Before(oldest) || end.After(newest) {
					*buf = (*buf)[:before]
					e.reject(reasonEndOutOfRange, fmt.Sprintf("%s event ended %s, outside [%s, %s]", t.event,
						end.Format(time.RFC3339), oldest.Format(time.RFC3339), newest.Format(time.RFC3339)))
					continue
				}
				ns := end.UnixNano()
				if et.rows == 0 || ns < et.minEnd {
					et.minEnd = ns
				}
				if et.rows == 0 || ns > et.maxEnd {
					et.maxEnd = ns
				}
				et.rows++
				days[ti][end.UTC().Truncate(day).Unix()] = struct{}{}
			}
		}
	}
	out := bufs[0]
	binary.LittleEndian.PutUint32(out[1:], uint32(len(out)-1-lengthSize))
	var at [tableCount]int // where each table's rows start in out
	at[0] = 1 + lengthSize
	for i := 1; i < tableCount; i++ {
		at[i] = len(out) + lengthSize
		out = appendBytes(out, bufs[i])
	}
	for i := range e.tables {
		et := &e.tables[i]
		et.days = slices.Sorted(maps.Keys(days[i]))
		out = appendTableTrailer(out, et)
	}
	e.tables[0].data = out[at[0]:len(bufs[0])]
	for i := 1; i < tableCount; i++ {
		e.tables[i].data = out[at[i] : at[i]+len(bufs[i])]
	}
	e.payload = out
	return e
}

// appendTableTrailer writes what the queue keeps of a table's rows
// beside them: its event, columns, count, end times and days.
func appendTableTrailer(out []byte, et *entryTable) []byte {
	out = appendBytes(out, []byte(et.event))
	out = appendBytes(out, []byte(strings.Join(et.columns, ",")))
	out = binary.LittleEndian.AppendUint64(out, uint64(et.rows))
	out = binary.LittleEndian.AppendUint64(out, uint64(et.minEnd))
	out = binary.LittleEndian.AppendUint64(out, uint64(et.maxEnd))
	out = binary.LittleEndian.AppendUint32(out, uint32(len(et.days)))
	for _, d := range et.days {
		out = binary.LittleEndian.AppendUint64(out, uint64(d))
	}
	return out
}

func appendBytes(out, b []byte) []byte {
	return append(binary.LittleEndian.AppendUint32(out, uint32(len(b))), b...)
}

// errEntry: a queued entry that does not decode (damaged storage, or
// written by a version that laid entries out otherwise).
var errEntry = errors.New("a queued entry does not decode")

// unmarshalEntry reads what encodeEvents wrote; the rows alias b.
func unmarshalEntry(b []byte) (*entry, error) {
	if len(b) < 1 || entryTables[b[0]] == 0 {
		return nil, errEntry
	}
	r := entryReader{b: b[1:]}
	e := &entry{payload: b, tables: make([]entryTable, entryTables[b[0]])}
	for i := range e.tables {
		e.tables[i].data = r.bytes()
	}
	for i := range e.tables {
		et := &e.tables[i]
		et.event = string(r.bytes())
		if cols := string(r.bytes()); cols != "" {
			et.columns = strings.Split(cols, ",")
		}
		et.rows, et.minEnd, et.maxEnd = int64(r.uint64()), int64(r.uint64()), int64(r.uint64())
		n := r.uint32()
		if uint64(n)*8 > uint64(len(r.b)) {
			return nil, errEntry
		}
		et.days = make([]int64, n)
		for j := range et.days {
			et.days[j] = int64(r.uint64())
		}
	}
	if r.bad || len(r.b) != 0 {
		return nil, errEntry
	}
	for i := range e.tables {
		if err := e.tables[i].check(); err != nil {
			return nil, fmt.Errorf("%w: %s rows: %w", errEntry, e.tables[i].event, err)
		}
	}
	return e, nil
}

// check holds what is recorded beside the rows to the rows: each column
// once (COPY refuses a column twice), a row per line, and the days, in
// order, from that of the first end to that of the last (a row of a day
// without its partition is refused for ever). batch.add holds each row to
// the end times and days.
func (et *entryTable) check() error {
	sorted := slices.Sorted(slices.Values(et.columns))
	if slices.Contains(sorted, "") {
		return errors.New("an empty column name")
	}
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return fmt.Errorf("column %s twice", sorted[i])
		}
	}
	lines := int64(bytes.Count(et.data, []byte{'\n'}))
	if lines != et.rows || len(et.data) > 0 && et.data[len(et.data)-1] != '\n' {
		return fmt.Errorf("%d rows recorded, %d lines", et.rows, lines)
	}
	if et.rows == 0 {
		if len(et.days) != 0 {
			return errors.New("days without rows")
		}
		return nil
	}
	dayOf := func(ns int64) int64 { return time.Unix(0, ns).UTC().Truncate(day).Unix() }
	switch {
	case et.minEnd > et.maxEnd || et.minEnd < earliestTime.UnixNano():
		return fmt.Errorf("ends from %d to %d ns", et.minEnd, et.maxEnd)
	case int64(len(et.days)) > et.rows || len(et.days) == 0:
		return fmt.Errorf("%d days for %d rows", len(et.days), et.rows)
	case et.days[0] != dayOf(et.minEnd) || et.days[len(et.days)-1] != dayOf(et.maxEnd):
		return errors.New("days that are not those of the first and last end")
	}
	for i := 1; i < len(et.days); i++ {
		if et.days[i] <= et.days[i-1] || et.days[i]%int64(day/time.Second) != 0 {
			return errors.New("days out of order")
		}
	}
	return nil
}

type entryReader struct {
	b   []byte
	bad bool
}

func (r *entryReader) take(n uint64) []byte {
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *entryReader) uint32() uint32 {
	if b := r.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *entryReader) uint64() uint64 {
	if b := r.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (r *entryReader) bytes() []byte { return r.take(uint64(r.uint32())) }

// batch is one write: per table, its rows grouped by the columns they
// were encoded for (one COPY each).
type batch struct {
	tables [tableCount]tableRows
	// rejected counts rows left out at the write, by reason.
	rejected map[string]int64
	why      map[string]string
}

// tableRows are the rows of one table in a batch.
type tableRows struct {
	t     *historyTable
	parts []*copyPart
	rows  int64
	// keys are the staged rows' keys: an event twice in one batch is one row.
	keys           map[string]struct{}
	minEnd, maxEnd time.Time
	days           map[time.Time]struct{}
}

// copyPart is rows encoded for the same columns: one COPY.
type copyPart struct {
	columns []string
	keyAt   []int // where the key columns are among columns, ascending
	endAt   int   // where the end time is among columns
	chunks  [][]byte
	rows    int64
}

// reader reads the part's rows.
func (p *copyPart) reader() io.Reader {
	readers := make([]io.Reader, len(p.chunks))
	for i, c := range p.chunks {
		readers[i] = bytes.NewReader(c)
	}
	return io.MultiReader(readers...)
}

// each yields each row of the part.
func (p *copyPart) each(yield func([]byte) bool) {
	for _, c := range p.chunks {
		for line := range rowsOf(c) {
			if !yield(line) {
				return
			}
		}
	}
}

func newBatch(tables [tableCount]*historyTable) *batch {
	b := &batch{rejected: map[string]int64{}, why: map[string]string{}}
	for i, t := range tables {
		b.tables[i] = tableRows{t: t, keys: map[string]struct{}{}, days: map[time.Time]struct{}{}}
	}
	return b
}

func (b *batch) events() (n int64) {
	for _, tr := range b.tables {
		n += tr.rows
	}
	return n
}

func (b *batch) reject(reason string, n int64, why string) {
	b.rejected[reason] += n
	if _, ok := b.why[reason]; !ok {
		b.why[reason] = why
	}
}

// add adds an entry's rows, leaving out those whose key the batch has.
// Rows for columns the table does not have (an entry of an exporter that
// knew other fields) are left out, counted as invalid.
func (b *batch) add(e *entry) {
	for _, et := range e.tables {
		ti := slices.IndexFunc(b.tables[:], func(tr tableRows) bool { return tr.t.event == et.event })
		if ti < 0 {
			if et.rows > 0 {
				b.reject(reasonInvalid, et.rows, fmt.Sprintf("queued rows of an unknown event %q", et.event))
			}
			continue
		}
		if et.rows == 0 {
			continue
		}
		tr := &b.tables[ti]
		part, err := tr.part(et.columns)
		if err != nil {
			b.reject(reasonInvalid, et.rows, err.Error())
			continue
		}
		// The rows stay where the entry holds them unless one is left out.
		kept, copied := et.data, false
		for off := 0; off < len(et.data); {
			end := bytes.IndexByte(et.data[off:], '\n') + 1
			if end == 0 {
				end = len(et.data) - off
			}
			line := et.data[off : off+end]
			key := part.key(line)
			_, dup := tr.keys[key]
			if why := part.rowError(line, &et); why != "" {
				b.reject(reasonDamaged, 1, fmt.Sprintf("a queued %s row: %s", tr.t.Name, why))
				dup = true
			}
			if dup {
				if !copied {
					kept, copied = append([]byte(nil), et.data[:off]...), true
				}
			} else {
				tr.keys[key] = struct{}{}
				part.rows++
				tr.rows++
				if copied {
					kept = append(kept, line...)
				}
			}
			off += end
		}
		part.chunks = append(part.chunks, kept)
		minEnd, maxEnd := time.Unix(0, et.minEnd).UTC(), time.Unix(0, et.maxEnd).UTC()
		if tr.minEnd.IsZero() || minEnd.Before(tr.minEnd) {
			tr.minEnd = minEnd
		}
		if maxEnd.After(tr.maxEnd) {
			tr.maxEnd = maxEnd
		}
		for _, d := range et.days {
			tr.days[time.Unix(d, 0).UTC()] = struct{}{}
		}
	}
}

// fit replaces, in every row, the characters cs does not hold by '?'
// (charset.fit) and returns how many it replaced.
func (b *batch) fit(cs *charset) int64 {
	var replaced int64
	for i := range b.tables {
		for _, p := range b.tables[i].parts {
			for j, c := range p.chunks {
				var n int64
				p.chunks[j], n = cs.fit(c)
				replaced += n
			}
		}
	}
	return replaced
}

// queuedRow is one row of a batch and the part it belongs to.
type queuedRow struct {
	part *copyPart
	line []byte
}

// all are the table's rows in the order they are written.
func (tr *tableRows) all() []queuedRow {
	rows := make([]queuedRow, 0, tr.rows)
	for _, p := range tr.parts {
		for line := range p.each {
			rows = append(rows, queuedRow{part: p, line: line})
		}
	}
	return rows
}

// only is a batch of rows of b's table i (in that order, rows of a part
// together), with b's end times: a look-up for rows already written
// covers the whole batch.
func (b *batch) only(i int, rows []queuedRow) *batch {
	one := &batch{}
	for j := range b.tables {
		one.tables[j].t = b.tables[j].t
	}
	tr, otr := &b.tables[i], &one.tables[i]
	otr.minEnd, otr.maxEnd, otr.days, otr.rows = tr.minEnd, tr.maxEnd, tr.days, int64(len(rows))
	var last *copyPart
	for _, r := range rows {
		if last == nil || r.part != last {
			otr.parts = append(otr.parts, &copyPart{columns: r.part.columns, keyAt: r.part.keyAt, endAt: r.part.endAt})
			last = r.part
		}
		p := otr.parts[len(otr.parts)-1]
		p.chunks = append(p.chunks, r.line)
		p.rows++
	}
	return one
}

// part is the batch's part for rows of these columns.
func (tr *tableRows) part(columns []string) (*copyPart, error) {
	for _, p := range tr.parts {
		if slices.Equal(p.columns, columns) {
			return p, nil
		}
	}
	for _, c := range columns {
		if !slices.Contains(tr.t.columnNames, c) {
			return nil, fmt.Errorf("queued %s rows have column %s, which the table's fields do not", tr.t.Name, c)
		}
	}
	p := &copyPart{columns: columns, endAt: slices.Index(columns, tr.t.End)}
	if p.endAt < 0 {
		return nil, fmt.Errorf("queued %s rows lack the end column %s", tr.t.Name, tr.t.End)
	}
	for _, k := range tr.t.Key {
		i := slices.Index(columns, k)
		if i < 0 {
			return nil, fmt.Errorf("queued %s rows lack the key column %s", tr.t.Name, k)
		}
		p.keyAt = append(p.keyAt, i)
	}
	slices.Sort(p.keyAt)
	tr.parts = append(tr.parts, p)
	return p, nil
}

// rowError says why a queued row disagrees with its entry, or "": its
// column count, or its end outside the entry's end times (which the
// exactly-once look-up reads) or days (which have partitions).
func (p *copyPart) rowError(line []byte, et *entryTable) string {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	if n := bytes.Count(line, []byte{'\t'}) + 1; n != len(p.columns) {
		return fmt.Sprintf("%d columns, not %d", n, len(p.columns))
	}
	field := line
	for range p.endAt {
		field = field[bytes.IndexByte(field, '\t')+1:]
	}
	if i := bytes.IndexByte(field, '\t'); i >= 0 {
		field = field[:i]
	}
	end, err := time.Parse(copyTimeLayout, string(field))
	if err != nil {
		return fmt.Sprintf("end %q: %v", field, err)
	}
	// The row keeps microseconds, the recorded ends nanoseconds.
	if end.Before(time.Unix(0, et.minEnd).Truncate(time.Microsecond)) || end.After(time.Unix(0, et.maxEnd)) {
		return fmt.Sprintf("end %s outside the entry's", field)
	}
	if _, ok := slices.BinarySearch(et.days, end.UTC().Truncate(day).Unix()); !ok {
		return fmt.Sprintf("end %s on a day not the entry's", field)
	}
	return ""
}

// key is a row's key columns' text.
func (p *copyPart) key(line []byte) string {
	var key []byte
	next, col, start := 0, 0, 0
	for i := 0; i <= len(line) && next < len(p.keyAt); i++ {
		if i < len(line) && line[i] != '\t' && line[i] != '\n' {
			continue
		}
		if col == p.keyAt[next] {
			key = append(append(key, line[start:i]...), '\t')
			next++
		}
		col, start = col+1, i+1
	}
	return string(key)
}

// rowsOf yields each row of COPY text (a newline inside a value is
// escaped, so every newline ends a row).
func rowsOf(data []byte) func(func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for len(data) > 0 {
			end := bytes.IndexByte(data, '\n') + 1
			if end == 0 {
				end = len(data)
			}
			if !yield(data[:end]) {
				return
			}
			data = data[end:]
		}
	}
}

// rowReader reads an event's attributes by field, each once: a look-up
// per field would search the fifty-odd attributes every time.
type rowReader struct {
	values  []pcommon.Value
	present []bool
}

// encodeRow appends lr's row in COPY's text format (tab between columns,
// \N for NULL, a newline at the end) to dst, and returns it with the
// row's end time.
func (r *rowReader) encodeRow(dst []byte, t *historyTable, lr plog.LogRecord) (row []byte, end time.Time, err error) {
	n := len(t.fields)
	r.values, r.present = slices.Grow(r.values[:0], n)[:n], slices.Grow(r.present[:0], n)[:n]
	clear(r.present)
	for k, v := range lr.Attributes().All() {
		if i, ok := t.fieldIndex[k]; ok {
			r.values[i], r.present[i] = v, true
		}
	}
	for i, f := range t.fields {
		if i > 0 {
			dst = append(dst, '\t')
		}
		if !r.present[i] {
			if !f.Optional {
				return dst, time.Time{}, fmt.Errorf("field %s is missing", f.Key)
			}
			dst = append(dst, `\N`...)
			continue
		}
		v, ok := pipeline.EventValueOf(r.values[i], f)
		if !ok {
			return dst, time.Time{}, fmt.Errorf("field %s is not a %s", f.Key, sqlTypes[f.Type])
		}
		if dst, err = appendValue(dst, v); err != nil {
			return dst, time.Time{}, fmt.Errorf("field %s: %w", f.Key, err)
		}
		if i == t.end {
			end = v.(time.Time)
		}
	}
	return append(dst, '\n'), end, nil
}

// copyTimeLayout is a time column's text in a row.
const copyTimeLayout = "2006-01-02 15:04:05.999999-07"

// appendValue appends one value as COPY's text format spells it.
func appendValue(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case float64:
		return strconv.AppendFloat(dst, v, 'g', -1, 64), nil
	case string:
		return appendCopyText(dst, v), nil
	case bool:
		if v {
			return append(dst, 't'), nil
		}
		return append(dst, 'f'), nil
	case time.Time:
		if v.Before(earliestTime) || v.After(latestTime) {
			return dst, fmt.Errorf("time %s outside [%d, %d]", v.Format(time.RFC3339), earliestTime.Year(), latestTime.Year())
		}
		// Microseconds, as the server keeps them.
		return v.UTC().AppendFormat(dst, copyTimeLayout), nil
	case []pipeline.SegmentUse:
		return appendCopyText(dst, string(segmentsJSON(v))), nil
	case []string:
		return appendCopyArray(dst, v, func(b []byte, s string) []byte { return appendArrayString(b, clean(s)) })
	case []float64:
		return appendCopyArray(dst, v, func(b []byte, f float64) []byte { return strconv.AppendFloat(b, f, 'g', -1, 64) })
	}
	return dst, fmt.Errorf("no column type for %T", v)
}

// maxArrayElements bounds an array column: a rule has at most three
// predicates, a sender may send any number.
const maxArrayElements = 64

// appendCopyArray appends elems as an array literal in a COPY field; an
// array of more than maxArrayElements, or longer than maxTextBytes, is
// refused rather than cut (a cut literal would not parse).
func appendCopyArray[T any](dst []byte, elems []T, appendElem func([]byte, T) []byte) ([]byte, error) {
	if len(elems) > maxArrayElements {
		return dst, fmt.Errorf("%d elements, more than %d", len(elems), maxArrayElements)
	}
	lit := []byte{'{'}
	for i, v := range elems {
		if i > 0 {
			lit = append(lit, ',')
		}
		lit = appendElem(lit, v)
	}
	lit = append(lit, '}')
	if len(lit) > maxTextBytes {
		return dst, fmt.Errorf("an array of %d bytes, more than %d", len(lit), maxTextBytes)
	}
	return appendCopyText(dst, string(lit)), nil
}

// appendArrayString appends s as a quoted element of an array literal:
// quotes and backslashes escaped, invalid UTF-8 as U+FFFD.
func appendArrayString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for _, r := range s {
		if r == '"' || r == '\\' {
			dst = append(dst, '\\')
		}
		dst = utf8.AppendRune(dst, r)
	}
	return append(dst, '"')
}

// segmentsJSON writes the per-segment figures as the event carries them:
// CPU in seconds, bytes read and written.
func segmentsJSON(segs []pipeline.SegmentUse) []byte {
	out := []byte{'['}
	for i, u := range segs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"`+pipeline.SegmentKeyHost+`":`...)
		out = appendJSONString(out, u.Host)
		out = append(out, `,"`+pipeline.SegmentKeySegment+`":`...)
		out = strconv.AppendInt(out, int64(u.Segment), 10)
		out = append(out, `,"`+pipeline.SegmentKeyCPU+`":`...)
		out = strconv.AppendFloat(out, float64(u.CPU)/1e9, 'g', -1, 64)
		out = append(out, `,"`+pipeline.SegmentKeyRead+`":`...)
		out = strconv.AppendInt(out, u.Read, 10)
		out = append(out, `,"`+pipeline.SegmentKeyWritten+`":`...)
		out = strconv.AppendInt(out, u.Written, 10)
		out = append(out, '}')
	}
	return append(out, ']')
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 as U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, r := range clean(s) {
		switch {
		case r == '"' || r == '\\':
			dst = append(dst, '\\', byte(r))
		case r < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
		default:
			dst = utf8.AppendRune(dst, r)
		}
	}
	return append(dst, '"')
}

// appendCopyText appends s as a text-format COPY field: backslash,
// newline, carriage return and tab escaped. A server's text holds no NUL
// and only valid characters of its encoding, so both are replaced (by
// U+FFFD), and a string longer than maxTextBytes is cut.
func appendCopyText(dst []byte, s string) []byte {
	if len(s) <= maxTextBytes && !strings.ContainsAny(s, "\\\n\r\t\x00") && utf8.ValidString(s) {
		return append(dst, s...)
	}
	for _, r := range clean(s) {
		switch r {
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case 0:
			dst = utf8.AppendRune(dst, utf8.RuneError)
		default:
			dst = utf8.AppendRune(dst, r)
		}
	}
	return dst
}

// clean cuts s at maxTextBytes on a character boundary; ranging over the
// result yields U+FFFD for every invalid byte.
func clean(s string) string {
	if len(s) <= maxTextBytes {
		return s
	}
	cut := maxTextBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
