// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import "github.com/gpotel/gpotel/proto/yagpcc"

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
