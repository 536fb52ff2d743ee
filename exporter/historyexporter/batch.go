// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"time"
)

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
