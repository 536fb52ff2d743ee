// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package events

import (
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// Value reads field f of an event's attributes as its type's Go
// value: int64, float64, string, bool, time.Time, []SegmentUse (CPU in
// ns), []string or []float64. ok is false when it is absent or of another type (the record was
// not written by this version).
func Value(attrs pcommon.Map, f Field) (v any, ok bool) {
	a, ok := attrs.Get(f.Key)
	if !ok {
		return nil, false
	}
	return ValueOf(a, f)
}

// ValueOf reads a, the attribute of field f, as EventValue does: a
// reader that walks the attributes in order (the writers put them in the
// fields' order) need not look each one up.
func ValueOf(a pcommon.Value, f Field) (v any, ok bool) {
	switch f.Type {
	case EventInt:
		if a.Type() == pcommon.ValueTypeInt {
			return a.Int(), true
		}
	case EventDouble:
		if a.Type() == pcommon.ValueTypeDouble && !math.IsNaN(a.Double()) && !math.IsInf(a.Double(), 0) {
			return a.Double(), true
		}
	case EventString:
		if a.Type() == pcommon.ValueTypeStr {
			return a.Str(), true
		}
	case EventBool:
		if a.Type() == pcommon.ValueTypeBool {
			return a.Bool(), true
		}
	case EventTime:
		if a.Type() == pcommon.ValueTypeStr {
			if t, err := time.Parse(time.RFC3339Nano, a.Str()); err == nil {
				return t, true
			}
		}
	case EventSegments:
		if a.Type() == pcommon.ValueTypeSlice {
			return readSegments(a.Slice()), true
		}
	case EventStrings:
		if a.Type() == pcommon.ValueTypeSlice {
			return readSlice(a.Slice(), stringOf)
		}
	case EventDoubles:
		if a.Type() == pcommon.ValueTypeSlice {
			return readSlice(a.Slice(), finiteDoubleOf)
		}
	}
	return nil, false
}

// readSlice reads a slice element by element; ok is false when one is not
// of the type read takes.
func readSlice[T any](sl pcommon.Slice, read func(pcommon.Value) (T, bool)) (v any, ok bool) {
	out := make([]T, sl.Len())
	for i := range sl.Len() {
		if out[i], ok = read(sl.At(i)); !ok {
			return nil, false
		}
	}
	return out, true
}

func stringOf(a pcommon.Value) (string, bool) { return a.Str(), a.Type() == pcommon.ValueTypeStr }

func finiteDoubleOf(a pcommon.Value) (float64, bool) {
	d := a.Double()
	return d, a.Type() == pcommon.ValueTypeDouble && !math.IsNaN(d) && !math.IsInf(d, 0)
}

// readSegments reads AttrSegments; an element that is not a map of
// the right types is left out.
func readSegments(sl pcommon.Slice) []pipeline.SegmentUse {
	out := make([]pipeline.SegmentUse, 0, sl.Len())
	for i := range sl.Len() {
		e := sl.At(i)
		if e.Type() != pcommon.ValueTypeMap {
			continue
		}
		m := e.Map()
		host, ok1 := m.Get(SegmentKeyHost)
		seg, ok2 := m.Get(SegmentKeySegment)
		cpu, ok3 := m.Get(SegmentKeyCPU)
		read, ok4 := m.Get(SegmentKeyRead)
		written, ok5 := m.Get(SegmentKeyWritten)
		if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || host.Type() != pcommon.ValueTypeStr || seg.Type() != pcommon.ValueTypeInt ||
			cpu.Type() != pcommon.ValueTypeDouble || read.Type() != pcommon.ValueTypeInt || written.Type() != pcommon.ValueTypeInt ||
			seg.Int() < math.MinInt32 || seg.Int() > math.MaxInt32 {
			continue
		}
		out = append(out, pipeline.SegmentUse{Host: host.Str(), Segment: int32(seg.Int()), CPU: int64(math.Round(cpu.Double() * 1e9)),
			Read: read.Int(), Written: written.Int()})
	}
	return out
}

// String names a value type in an error.
func (t FieldType) String() string {
	switch t {
	case EventInt:
		return "int"
	case EventDouble:
		return "double"
	case EventString:
		return "string"
	case EventBool:
		return "bool"
	case EventTime:
		return "RFC 3339 time string"
	case EventSegments:
		return "slice of segment maps"
	case EventStrings:
		return "slice of strings"
	case EventDoubles:
		return "slice of doubles"
	}
	return "value"
}
