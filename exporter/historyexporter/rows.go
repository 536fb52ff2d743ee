// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
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
		v, ok := events.ValueOf(r.values[i], f)
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
		out = append(out, `{"`+events.SegmentKeyHost+`":`...)
		out = appendJSONString(out, u.Host)
		out = append(out, `,"`+events.SegmentKeySegment+`":`...)
		out = strconv.AppendInt(out, int64(u.Segment), 10)
		out = append(out, `,"`+events.SegmentKeyCPU+`":`...)
		out = strconv.AppendFloat(out, float64(u.CPU)/1e9, 'g', -1, 64)
		out = append(out, `,"`+events.SegmentKeyRead+`":`...)
		out = strconv.AppendInt(out, u.Read, 10)
		out = append(out, `,"`+events.SegmentKeyWritten+`":`...)
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
