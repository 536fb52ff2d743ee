// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
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
