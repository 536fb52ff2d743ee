// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package events

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// FieldType is the type of an event field's value.
type FieldType uint8

// The value types: an attribute of that type, and a column of the
// matching SQL type in the history tables.
const (
	EventInt      FieldType = iota + 1 // int attribute; bigint
	EventDouble                        // double attribute; double precision
	EventString                        // string attribute; text
	EventBool                          // bool attribute; boolean
	EventTime                          // string attribute, RFC 3339 with nanoseconds, UTC; timestamptz
	EventSegments                      // slice attribute of maps (QueryEventSegment keys); json
	EventStrings                       // slice attribute of strings; text[]
	EventDoubles                       // slice attribute of doubles; double precision[]
)

// Field is one attribute of an event and one column of its history table.
type Field struct {
	Key    string // the log record attribute
	Column string // the history table's column
	Type   FieldType
	Unit   string // UCUM, as the metrics: s, By, 1, {fault}
	// Identity: the field is part of the event's key, the one a history
	// row is written under once (tm_id, session, and the query's or
	// session's start and command count).
	Identity bool
	// Optional: absent when not known (no text, not Greenplum, a figure
	// the host does not measure); every other field is always there.
	Optional bool
	Brief    string
	counter  pipeline.Figure // the Figures row a counter field carries
	counted  bool            // the field is a counter's
}

// Counter is the Figures row of a counter field; ok false for the others.
func (f Field) Counter() (fig pipeline.Figure, ok bool) { return f.counter, f.counted }

// eventValue are the Go types of the event types' values, as EventValue
// reads them.
type eventValue interface {
	int64 | float64 | string | bool | time.Time | []pipeline.SegmentUse | []string | []float64
}

// eventField is one field of events of Go type E: its declaration and its
// accessors. Every use of a field (writing, reading back, the history
// column, the API item) goes through the table of them; nothing else names
// a field.
type eventField[E any] struct {
	Field
	// put writes e's value of the field into attrs; nothing when it has none.
	put func(e *E, attrs pcommon.Map, key string)
	// set stores v, as EventValue read it, into e; nil for a field worked
	// out from others (a duration, a sum), which is not read back.
	set func(e *E, v any)
}

// field makes a field of values T: get says e's value and whether it has
// one, set stores one read back (nil: not read back). The field's Type is
// T's.
func field[E any, T eventValue](f Field, get func(*E) (T, bool), set func(*E, T)) eventField[E] {
	var zero T
	var put func(pcommon.Map, string, T)
	switch any(zero).(type) {
	case int64:
		f.Type, put = EventInt, any(pcommon.Map.PutInt).(func(pcommon.Map, string, T))
	case float64:
		f.Type, put = EventDouble, any(pcommon.Map.PutDouble).(func(pcommon.Map, string, T))
	case string:
		f.Type, put = EventString, any(pcommon.Map.PutStr).(func(pcommon.Map, string, T))
	case bool:
		f.Type, put = EventBool, any(pcommon.Map.PutBool).(func(pcommon.Map, string, T))
	case time.Time:
		f.Type, put = EventTime, any(putTime).(func(pcommon.Map, string, T))
	case []pipeline.SegmentUse:
		f.Type, put = EventSegments, any(putSegments).(func(pcommon.Map, string, T))
	case []string:
		f.Type, put = EventStrings, any(putSlice[string]).(func(pcommon.Map, string, T))
	case []float64:
		f.Type, put = EventDoubles, any(putSlice[float64]).(func(pcommon.Map, string, T))
	}
	out := eventField[E]{Field: f, put: func(e *E, attrs pcommon.Map, key string) {
		if v, ok := get(e); ok {
			put(attrs, key, v)
		}
	}}
	if set != nil {
		out.set = func(e *E, v any) { set(e, v.(T)) }
	}
	return out
}

// always is a field every event has, kept in *ref.
func always[E any, T eventValue](f Field, ref func(*E) *T) eventField[E] {
	return field(f, func(e *E) (T, bool) { return *ref(e), true }, func(e *E, v T) { *ref(e) = v })
}

// unlessZero is an optional field kept in *ref; its zero value: none.
func unlessZero[E any, T interface {
	int64 | string
}](f Field, ref func(*E) *T) eventField[E] {
	f.Optional = true
	return field(f, func(e *E) (T, bool) {
		var zero T
		return *ref(e), *ref(e) != zero
	}, func(e *E, v T) { *ref(e) = v })
}

// positive is an optional count kept in *ref; none unless above 0 (a
// figure the server does not keep, or a command count it does not number).
func positive[E any](f Field, ref func(*E) *int64) eventField[E] {
	f.Optional = true
	return field(f, func(e *E) (int64, bool) { return *ref(e), *ref(e) > 0 }, func(e *E, v int64) { *ref(e) = v })
}

// nullable is an optional field kept in *ref.
func nullable[E any, T eventValue](f Field, ref func(*E) *pipeline.Null[T]) eventField[E] {
	f.Optional = true
	return field(f, func(e *E) (T, bool) { return ref(e).V, ref(e).Valid }, func(e *E, v T) { *ref(e) = pipeline.Null[T]{V: v, Valid: true} })
}

// timeAt is a time kept in *ref as unix ns; optional ones are none at 0.
func timeAt[E any](f Field, ref func(*E) *int64) eventField[E] {
	return field(f, func(e *E) (time.Time, bool) { return time.Unix(0, *ref(e)), !f.Optional || *ref(e) != 0 },
		func(e *E, v time.Time) { *ref(e) = v.UnixNano() })
}

// secondsAt is a duration kept in *ref as ns, written in seconds.
func secondsAt[E any](f Field, ref func(*E) *int64) eventField[E] {
	f.Unit = "s"
	return field(f, func(e *E) (float64, bool) { return nsSeconds(*ref(e)), true }, func(e *E, v float64) { *ref(e) = secondsNs(v) })
}

// derived is a field worked out from others: written, not read back.
func derived[E any, T eventValue](f Field, get func(*E) T) eventField[E] {
	return field(f, func(e *E) (T, bool) { return get(e), true }, nil)
}

// eventTable is the fields of one event, in the order of its history
// table's columns (and of its attributes).
type eventTable[E any] []eventField[E]

// put writes every field e has into attrs.
func (t eventTable[E]) put(attrs pcommon.Map, e *E) {
	for i := range t {
		t[i].put(e, attrs, t[i].Key)
	}
}

// decode reads an event's attributes back; an error names the first field
// that is required and missing or of another type.
func (t eventTable[E]) decode(attrs pcommon.Map) (E, error) {
	var e E
	for _, f := range t {
		v, ok := Value(attrs, f.Field)
		switch {
		case !ok && !f.Optional:
			return e, fmt.Errorf("event field %s is missing or not a %s", f.Key, f.Type)
		case ok && f.set != nil:
			f.set(&e, v)
		}
	}
	return e, nil
}

// fields are the table's declarations, as the exporters read them.
func (t eventTable[E]) fields() []Field {
	out := make([]Field, len(t))
	for i := range t {
		out[i] = t[i].Field
	}
	return out
}

// sessionKeyFields are the fields that name the session.
func sessionKeyFields[E any](key func(*E) *pipeline.SessionKey, whose string) eventTable[E] {
	return eventTable[E]{
		always(Field{Key: pipeline.AttrTmID, Column: "tm_id", Identity: true, Brief: "the coordinator's start (yagpcc's tm_id)"},
			func(e *E) *int64 { return &key(e).TmID }),
		always(Field{Key: pipeline.AttrSessionID, Column: "sess_id", Identity: true, Brief: "sess_id of " + whose + " (the leader's pid on PostgreSQL)"},
			func(e *E) *int64 { return &key(e).ID }),
	}
}

// whoFields are the fields that say whose work it was; a database user
// chooses every one of them.
func whoFields[E any](who func(*E) *SessionWho) eventTable[E] {
	return eventTable[E]{
		always(Field{Key: pipeline.AttrDBNamespace, Column: "database", Brief: "datname"}, func(e *E) *string { return &who(e).Database }),
		always(Field{Key: pipeline.AttrSessionUser, Column: "username", Brief: "usename"}, func(e *E) *string { return &who(e).User }),
		nullable(Field{Key: AttrApplication, Column: "application", Brief: "application_name, as last seen"},
			func(e *E) *pipeline.Null[string] { return &who(e).Application }),
		nullable(Field{Key: AttrClientAddress, Column: "client_address", Brief: "client_addr; absent for a local socket"},
			func(e *E) *pipeline.Null[string] { return &who(e).ClientAddress }),
		nullable(Field{Key: AttrClientPort, Column: "client_port", Brief: "client_port"}, func(e *E) *pipeline.Null[int64] { return &who(e).ClientPort }),
		nullable(Field{Key: AttrResourceGroup, Column: "resource_group", Brief: "rsgname (Greenplum), as last seen"},
			func(e *E) *pipeline.Null[string] { return &who(e).ResourceGroup }),
	}
}

// counterFields are one field per counter of Figures: the query's or the
// session's total, named after the session figure and its attribute value
// (gpotel.session.cpu.time, user → gpotel.cpu.time.user, cpu_time_user);
// absent when no process of it reported the counter.
func counterFields[E any](totals func(*E) (*pipeline.Counters, *uint32)) eventTable[E] {
	var out eventTable[E]
	for c := range pipeline.Figure(pipeline.NumCounters) {
		row := &pipeline.Figures[c]
		key := eventCounterPrefix + strings.TrimPrefix(row.Metric.Session, eventColumnSessionFigures)
		if row.Value != "" {
			key += "." + row.Value
		}
		brief := "its total of " + row.Metric.Session
		if row.Value != "" {
			brief += " " + row.Value
		}
		f := Field{Key: key, Column: columnOf(key), Unit: row.Metric.Unit, Optional: true, counter: c, counted: true,
			Brief: brief + ", over every process it had"}
		ns := func(e *E) (int64, bool) {
			t, known := totals(e)
			return t[c], *known&(1<<c) != 0
		}
		store := func(e *E, v int64) {
			t, known := totals(e)
			t[c], *known = v, *known|1<<c
		}
		if row.Metric.Double {
			out = append(out, field(f, func(e *E) (float64, bool) {
				v, ok := ns(e)
				return nsSeconds(v), ok
			}, func(e *E, v float64) { store(e, secondsNs(v)) }))
		} else {
			out = append(out, field(f, ns, store))
		}
	}
	return out
}

// skewFields are the skew figures of one figure over the segments; all
// absent when it has none.
func skewFields[E any](keyPrefix, columnPrefix, what string, skew func(*E) *pipeline.Skew) eventTable[E] {
	opt := func(key, brief, unit string) Field {
		return Field{Key: keyPrefix + key, Column: columnPrefix + key, Unit: unit, Optional: true, Brief: brief}
	}
	// known marks a skew read back: any field present makes it OK.
	known := func(e *E) *pipeline.Skew {
		sk := skew(e)
		sk.OK = true
		return sk
	}
	return eventTable[E]{
		field(opt("ratio", "1 - avg/max of "+what+" over the segments that took part", "1"),
			func(e *E) (float64, bool) { return skew(e).Ratio, skew(e).OK }, func(e *E, v float64) { known(e).Ratio = v }),
		field(opt("max_over_avg", "max/avg of "+what+" over the segments", "1"),
			func(e *E) (float64, bool) { return skew(e).MaxOverAvg, skew(e).OK }, func(e *E, v float64) { known(e).MaxOverAvg = v }),
		field(opt("hottest_segment", "the segment that used the most "+what, ""),
			func(e *E) (int64, bool) { return int64(skew(e).Hottest), skew(e).OK },
			func(e *E, v int64) { known(e).Hottest = int32(max(min(v, math.MaxInt32), math.MinInt32)) }),
		field(opt("segments", "segments that took part", "{segment}"),
			func(e *E) (int64, bool) { return int64(skew(e).Segments), skew(e).OK }, func(e *E, v int64) { known(e).Segments = int(max(v, 0)) }),
	}
}

// partialCauseFields are the fields that say why an event is partial; all
// absent when it is not.
func partialCauseFields[E any](cause func(*E) *PartialCause) eventTable[E] {
	return eventTable[E]{
		field(Field{Key: AttrPartialReason, Column: "partial_reason", Optional: true,
			Brief: "why it is partial, comma-separated: " + PartialStartedBefore + " (it started before gpotel first saw it), " +
				PartialHostSilent + " (a host of its processes did not answer)"},
			func(e *E) (string, bool) { return cause(e).Reason(), cause(e).Partial() },
			func(e *E, v string) {
				cause(e).StartedBefore = slices.Contains(strings.Split(v, ","), PartialStartedBefore)
			}),
		field(Field{Key: AttrPartialHosts, Column: "partial_hosts", Optional: true,
			Brief: fmt.Sprintf("the hosts that did not answer, comma-separated, at most %d, then +N for the others", MaxPartialHosts)},
			func(e *E) (string, bool) { return cause(e).HostList(), cause(e).Partial() && len(cause(e).Hosts) > 0 },
			func(e *E, v string) { cause(e).readHostList(v) }),
		field(Field{Key: AttrPartialSince, Column: "partial_since", Optional: true,
			Brief: "when what it lacks began: the first snapshot in which a host of it did not answer, else the first snapshot that saw it"},
			func(e *E) (time.Time, bool) {
				return time.Unix(0, cause(e).Since), cause(e).Partial() && cause(e).Since != 0
			},
			func(e *E, v time.Time) { cause(e).Since = v.UnixNano() }),
	}
}

// readHostList reads HostList's value back.
func (c *PartialCause) readHostList(s string) {
	for _, h := range strings.Split(s, ",") {
		if n, ok := strings.CutPrefix(h, "+"); ok {
			c.MoreHosts, _ = strconv.Atoi(n)
		} else {
			c.Hosts = append(c.Hosts, h)
		}
	}
}

// columnOf is the history column of an attribute key: without the gpotel.
// prefix, dots as underscores.
func columnOf(key string) string {
	return strings.ReplaceAll(strings.TrimPrefix(key, eventCounterPrefix), ".", "_")
}

// TimeValue writes a time as an EventTime attribute holds it.
func TimeValue(unixNano int64) string {
	return time.Unix(0, unixNano).UTC().Format(time.RFC3339Nano)
}

func putTime(attrs pcommon.Map, key string, t time.Time) {
	attrs.PutStr(key, t.UTC().Format(time.RFC3339Nano))
}

func putSlice[T string | float64](attrs pcommon.Map, key string, elems []T) {
	sl := attrs.PutEmptySlice(key)
	sl.EnsureCapacity(len(elems))
	for _, v := range elems {
		switch v := any(v).(type) {
		case string:
			sl.AppendEmpty().SetStr(v)
		case float64:
			sl.AppendEmpty().SetDouble(v)
		}
	}
}

func putSegments(attrs pcommon.Map, key string, segs []pipeline.SegmentUse) {
	sl := attrs.PutEmptySlice(key)
	sl.EnsureCapacity(len(segs))
	for _, u := range segs {
		m := sl.AppendEmpty().SetEmptyMap()
		m.PutStr(SegmentKeyHost, u.Host)
		m.PutInt(SegmentKeySegment, int64(u.Segment))
		m.PutDouble(SegmentKeyCPU, nsSeconds(u.CPU))
		m.PutInt(SegmentKeyRead, u.Read)
		m.PutInt(SegmentKeyWritten, u.Written)
	}
}

// deref is *p, or the zero value for nil.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

func nsSeconds(ns int64) float64 { return float64(ns) / 1e9 }

// secondsNs is seconds as integer ns, saturating.
func secondsNs(s float64) int64 {
	ns := math.Round(s * 1e9)
	switch {
	case ns >= math.MaxInt64:
		return math.MaxInt64
	case ns <= math.MinInt64:
		return math.MinInt64
	}
	return int64(ns)
}
