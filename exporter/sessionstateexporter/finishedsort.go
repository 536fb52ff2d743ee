// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"github.com/gpotel/gpotel/internal/pipeline/events"
)

// sortColumn is how rows compare by one item field.
type sortColumn struct {
	kind valueKind
	get  func(*eventRow) sortValue
}

// fieldColumn sorts by field i: numbers, times and bools as integers,
// doubles as floats, strings bytewise; absent before present.
func fieldColumn(i int, f events.Field) sortColumn {
	present := func(get func(*eventRow) sortValue) func(*eventRow) sortValue {
		return func(r *eventRow) sortValue {
			if !r.has(i) {
				return sortValue{}
			}
			return get(r)
		}
	}
	switch f.Type {
	case events.EventDouble:
		return sortColumn{kindFloat, present(func(r *eventRow) sortValue { return float(r.double(i)) })}
	case events.EventString:
		return sortColumn{kindString, present(func(r *eventRow) sortValue { return str(r.str(i)) })}
	default:
		return sortColumn{kindInt, present(func(r *eventRow) sortValue { return num(r.num(i)) })}
	}
}
