// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package finishedwork

import (
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/paging"
	"github.com/gpotel/gpotel/internal/pipeline/events"
)

// sortColumn is how rows compare by one item field.
type sortColumn struct {
	kind paging.Kind
	get  func(*eventRow) paging.Value
}

// fieldColumn sorts by field i: numbers, times and bools as integers,
// doubles as floats, strings bytewise; absent before present.
func fieldColumn(i int, f events.Field) sortColumn {
	present := func(get func(*eventRow) paging.Value) func(*eventRow) paging.Value {
		return func(r *eventRow) paging.Value {
			if !r.has(i) {
				return paging.Value{}
			}
			return get(r)
		}
	}
	switch f.Type {
	case events.EventDouble:
		return sortColumn{paging.KindFloat, present(func(r *eventRow) paging.Value { return paging.Float(r.double(i)) })}
	case events.EventString:
		return sortColumn{paging.KindString, present(func(r *eventRow) paging.Value { return paging.Str(r.str(i)) })}
	default:
		return sortColumn{paging.KindInt, present(func(r *eventRow) paging.Value { return paging.Num(r.num(i)) })}
	}
}
