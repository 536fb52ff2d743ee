// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"math"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Reading attribute values, whatever type the writer chose.

// Null is a pg_stat_activity column that may be NULL: V is its value
// when Valid.
type Null[T any] struct {
	V     T
	Valid bool
}

// NullOf is the column of a nullable pointer.
func NullOf[T any](p *T) Null[T] {
	if p == nil {
		return Null[T]{}
	}
	return Null[T]{V: *p, Valid: true}
}

// StrOf is a value as text, not Valid when absent.
func StrOf(m pcommon.Map, key string) Null[string] {
	v, ok := m.Get(key)
	if !ok {
		return Null[string]{}
	}
	return Null[string]{V: v.AsString(), Valid: true}
}

// Str is a value as text; "" when absent.
func Str(m pcommon.Map, key string) string { return StrOf(m, key).V }

// IntOf also reads an integer written as a string or an integral double.
func IntOf(m pcommon.Map, key string) Null[int64] {
	v, ok := m.Get(key)
	if !ok {
		return Null[int64]{}
	}
	var n int64
	switch v.Type() {
	case pcommon.ValueTypeInt:
		n = v.Int()
	case pcommon.ValueTypeDouble:
		d := v.Double()
		if d != math.Trunc(d) || math.Abs(d) > 1<<53 {
			return Null[int64]{}
		}
		n = int64(d)
	case pcommon.ValueTypeStr:
		var err error
		if n, err = strconv.ParseInt(v.Str(), 10, 64); err != nil {
			return Null[int64]{}
		}
	default:
		return Null[int64]{}
	}
	return Null[int64]{V: n, Valid: true}
}

// BoolOf also reads a bool written as text.
func BoolOf(m pcommon.Map, key string) Null[bool] {
	v, ok := m.Get(key)
	if !ok {
		return Null[bool]{}
	}
	if v.Type() == pcommon.ValueTypeBool {
		return Null[bool]{V: v.Bool(), Valid: true}
	}
	b, _ := strconv.ParseBool(v.AsString())
	return Null[bool]{V: b, Valid: true}
}

// TimeOf reads an RFC 3339 timestamp; absent or unparsable is not Valid.
func TimeOf(m pcommon.Map, key string) Null[time.Time] {
	v, ok := m.Get(key)
	if !ok {
		return Null[time.Time]{}
	}
	t, err := time.Parse(time.RFC3339Nano, v.AsString())
	if err != nil {
		return Null[time.Time]{}
	}
	return Null[time.Time]{V: t, Valid: true}
}
