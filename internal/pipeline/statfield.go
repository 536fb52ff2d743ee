// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import "github.com/gpotel/gpotel/proto/yagpcc"

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
