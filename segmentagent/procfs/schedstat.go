// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"bytes"

	"github.com/gpotel/gpotel/segmentagent/internal/kerneltext"
)

// Schedstat is /proc/<pid>/schedstat.
type Schedstat struct {
	RunTimeNS  int64 // on a CPU, nanoseconds
	RunDelayNS int64 // runnable but waiting in a run queue, nanoseconds
	Timeslices int64 // times run on a CPU
}

// ParseSchedstat parses "run_ns delay_ns timeslices\n" without allocating.
func ParseSchedstat(b []byte) (Schedstat, error) {
	var s Schedstat
	if !kerneltext.EndsWithNewline(b) {
		return s, ErrTruncated
	}
	rest := b[:len(b)-1]
	var f [3]int64
	for i := range f {
		end := bytes.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		v, ok := parseInt(rest[:end])
		if !ok {
			return s, kerneltext.ShapeError("schedstat: field %d %q is not a number", i+1, rest[:end])
		}
		f[i] = v
		rest = rest[end:]
		if i < len(f)-1 {
			if len(rest) == 0 {
				return s, kerneltext.ShapeError("schedstat: %d fields, want 3", i+1)
			}
			rest = rest[1:]
		}
	}
	if len(rest) != 0 {
		return s, kerneltext.ShapeError("schedstat: more than 3 fields")
	}
	s.RunTimeNS, s.RunDelayNS, s.Timeslices = f[0], f[1], f[2]
	return s, nil
}
