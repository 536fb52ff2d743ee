// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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

// batch is one write: the rows of each table in COPY's text format, and
// the events left out, by reason.
type batch struct {
	tables   [2]tableRows
	rejected map[string]int64
	// why is the first rejection's explanation per reason, for the log.
	why map[string]string
}

// tableRows are the rows of one table in a batch.
type tableRows struct {
	t    *historyTable
	data bytes.Buffer
	rows int
	// keys are the staged rows' keys: an event twice in one batch is one row.
	keys           map[string]struct{}
	minEnd, maxEnd time.Time
	days           map[time.Time]struct{}
}

func newBatch(tables [2]*historyTable) *batch {
	b := &batch{rejected: map[string]int64{}, why: map[string]string{}}
	for i, t := range tables {
		b.tables[i] = tableRows{t: t, keys: map[string]struct{}{}, days: map[time.Time]struct{}{}}
	}
	return b
}

func (b *batch) events() int { return b.tables[0].rows + b.tables[1].rows }

func (b *batch) reject(reason, why string) {
	b.rejected[reason]++
	if _, ok := b.why[reason]; !ok {
		b.why[reason] = why
	}
}

// addLogs adds every event of ld; records that are not finished-work
// events are not the exporter's and are skipped. Ends must fall within
// [oldest, newest].
func (b *batch) addLogs(ld plog.Logs, oldest, newest time.Time) {
	var row []byte
	rls := ld.ResourceLogs()
	for i := range rls.Len() {
		sls := rls.At(i).ScopeLogs()
		for j := range sls.Len() {
			lrs := sls.At(j).LogRecords()
			for k := range lrs.Len() {
				row = b.add(lrs.At(k), oldest, newest, row[:0])
			}
		}
	}
}

// add encodes one record as a row of its table; scratch is reused.
func (b *batch) add(lr plog.LogRecord, oldest, newest time.Time, scratch []byte) []byte {
	tr := b.tableOf(lr.EventName())
	if tr == nil {
		return scratch
	}
	row, key, end, err := encodeRow(scratch, tr.t, lr)
	if err != nil {
		b.reject(reasonInvalid, fmt.Sprintf("%s event: %v", tr.t.event, err))
		return row
	}
	if end.Before(oldest) || end.After(newest) {
		b.reject(reasonEndOutOfRange, fmt.Sprintf("%s event ended %s, outside [%s, %s]", tr.t.event,
			end.Format(time.RFC3339), oldest.Format(time.RFC3339), newest.Format(time.RFC3339)))
		return row
	}
	if _, dup := tr.keys[key]; dup {
		return row
	}
	tr.keys[key] = struct{}{}
	tr.data.Write(row)
	tr.rows++
	if tr.rows == 1 || end.Before(tr.minEnd) {
		tr.minEnd = end
	}
	if tr.rows == 1 || end.After(tr.maxEnd) {
		tr.maxEnd = end
	}
	tr.days[end.UTC().Truncate(24*time.Hour)] = struct{}{}
	return row
}

func (b *batch) tableOf(event string) *tableRows {
	for i := range b.tables {
		if b.tables[i].t.event == event {
			return &b.tables[i]
		}
	}
	return nil
}

// encodeRow appends lr's row in COPY's text format (tab between columns,
// \N for NULL, a newline at the end) to dst, and returns it with the
// row's key (its identity columns' text) and end time.
func encodeRow(dst []byte, t *historyTable, lr plog.LogRecord) (row []byte, key string, end time.Time, err error) {
	attrs := lr.Attributes()
	var keyText []byte
	for i, f := range t.fields {
		if i > 0 {
			dst = append(dst, '\t')
		}
		v, ok := pipeline.EventValue(attrs, f)
		if !ok {
			if _, present := attrs.Get(f.Key); present || !f.Optional {
				return dst, "", time.Time{}, fmt.Errorf("field %s is missing or not a %s", f.Key, sqlTypes[f.Type])
			}
			dst = append(dst, `\N`...)
			continue
		}
		start := len(dst)
		if dst, err = appendValue(dst, v); err != nil {
			return dst, "", time.Time{}, fmt.Errorf("field %s: %w", f.Key, err)
		}
		if f.Identity {
			keyText = append(append(keyText, dst[start:]...), '\t')
		}
		if i == t.end {
			end = v.(time.Time)
		}
	}
	dst = append(dst, '\n')
	return dst, string(keyText), end, nil
}

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
		return v.UTC().AppendFormat(dst, "2006-01-02 15:04:05.999999-07"), nil
	case []pipeline.SegmentUse:
		return appendCopyText(dst, string(segmentsJSON(v))), nil
	}
	return dst, fmt.Errorf("no column type for %T", v)
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
