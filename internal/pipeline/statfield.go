// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/proto/yagpcc"
)

// IsSeconds tells a field of seconds (a double) from one of counts or bytes.
func (f StatField) IsSeconds() bool { return f.seconds != nil || f.optional != nil }

// InKiB tells a field the exporter fills in KiB from a figure in bytes.
func (f StatField) InKiB() bool { return f.perKiB }

// Seconds reads a field of seconds from st; an unset optional one (a wait
// nothing measured) reads 0, as its generated getter does.
func (f StatField) Seconds(st *yagpcc.SystemStat) float64 {
	if f.optional != nil {
		if v := *f.optional(st); v != nil {
			return *v
		}
		return 0
	}
	return *f.seconds(st)
}

// Count reads a field of counts or bytes from st.
func (f StatField) Count(st *yagpcc.SystemStat) uint64 { return *f.count(st) }

// StatFields are every SystemStat field the figures fill, in table order:
// the counters' (Figures) then the memory types' (MemoryTypes, cluster
// before max_host).
func StatFields() []StatField {
	var out []StatField
	for f := range Figure(NumCounters) {
		if s := Figures[f].Stat; !s.IsZero() {
			out = append(out, s)
		}
	}
	for _, mt := range MemoryTypes {
		for _, s := range []StatField{mt.Cluster, mt.MaxHost} {
			if !s.IsZero() {
				out = append(out, s)
			}
		}
	}
	return out
}

// IsZero tells a figure that fills no SystemStat field.
func (f StatField) IsZero() bool { return f.seconds == nil && f.optional == nil && f.count == nil }

// SetPoint writes one data point's value into st: seconds as they are, counts
// and bytes clamped to what a uint64 holds (a negative count is bad input);
// an optional field points at its slot of room.
func (f StatField) SetPoint(st *yagpcc.SystemStat, room *float64, dp pmetric.NumberDataPoint) {
	switch {
	case f.seconds != nil:
		*f.seconds(st) = PointFloat(dp)
	case f.optional != nil:
		*room = PointFloat(dp)
		*f.optional(st) = room
	case f.count != nil && f.perKiB:
		*f.count(st) = PointUint(dp) / 1024
	case f.count != nil:
		*f.count(st) = PointUint(dp)
	}
}

// SetSeconds writes a figure's seconds into st, when its field holds seconds.
func (f StatField) SetSeconds(st *yagpcc.SystemStat, v float64) {
	switch {
	case f.seconds != nil:
		*f.seconds(st) = v
	case f.optional != nil:
		*f.optional(st) = &v
	}
}

// SetCount writes a figure's count (bytes, syscalls, faults) into st, when
// its field holds a count; a negative count is bad input and reads 0.
func (f StatField) SetCount(st *yagpcc.SystemStat, v int64) {
	if f.count == nil {
		return
	}
	n := uint64(max(v, 0))
	if f.perKiB {
		n /= 1024
	}
	*f.count(st) = n
}
