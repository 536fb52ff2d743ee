// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package paging holds what the sessionstate exporter's list services
// share: sort values and their order, the page tokens that carry them, the
// MAC that binds a token to its request, and the bounds on a request.
package paging

import (
	"cmp"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// Kind says how a sort field's values compare.
type Kind uint8

// The kinds: strings compare bytewise, numbers by value, pairs by their
// first then their second number.
const (
	KindString Kind = iota
	KindInt
	KindUint
	KindFloat
	KindPair // (seconds or tm_id, nanos or sess_id)
)

// Value is one item's value of one sort field. An absent value (no
// last_metrics, a NULL timestamp) sorts before every present one.
type Value struct {
	Present bool
	S       string
	I, I2   int64
	U       uint64
	F       float64
}

// Str is a present string value.
func Str(v string) Value { return Value{Present: true, S: v} }

// Num is a present integer value.
func Num(v int64) Value { return Value{Present: true, I: v} }

// Unsigned is a present unsigned value.
func Unsigned(v uint64) Value { return Value{Present: true, U: v} }

// Float is a present double value.
func Float(v float64) Value { return Value{Present: true, F: v} }

// Bool is a present bool value, an integer: false before true.
func Bool(v bool) Value {
	if v {
		return Num(1)
	}
	return Num(0)
}

// Stamp is a timestamp's value; absent for nil.
func Stamp(t *timestamppb.Timestamp) Value {
	if t == nil {
		return Value{}
	}
	return Value{Present: true, I: t.GetSeconds(), I2: int64(t.GetNanos())}
}

// Compare orders two values of one kind.
func Compare(kind Kind, a, b *Value) int {
	if a.Present != b.Present {
		if a.Present {
			return 1
		}
		return -1
	}
	switch kind {
	case KindString:
		return strings.Compare(a.S, b.S)
	case KindInt:
		return cmp.Compare(a.I, b.I)
	case KindUint:
		return cmp.Compare(a.U, b.U)
	case KindFloat:
		// cmp.Compare orders NaN first: a total order, as paging needs.
		return cmp.Compare(a.F, b.F)
	default:
		if c := cmp.Compare(a.I, b.I); c != 0 {
			return c
		}
		return cmp.Compare(a.I2, b.I2)
	}
}
