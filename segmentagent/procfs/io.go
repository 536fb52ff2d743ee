// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"github.com/gpotel/gpotel/segmentagent/internal/kerneltext"
)

// IO is /proc/<pid>/io: bytes and counts.
type IO struct {
	RChar               int64
	WChar               int64
	SyscR               int64
	SyscW               int64
	ReadBytes           int64
	WriteBytes          int64
	CancelledWriteBytes int64
}

var ioKeys = [...]string{"rchar", "wchar", "syscr", "syscw", "read_bytes", "write_bytes", "cancelled_write_bytes"}

// ParseIO parses the content of /proc/<pid>/io without allocating. All seven
// lines are required; unknown lines are ignored.
func ParseIO(b []byte) (IO, error) {
	var io IO
	if !kerneltext.EndsWithNewline(b) {
		return io, ErrTruncated
	}
	seen := 0
	for len(b) > 0 {
		var key, val []byte
		var hasColon bool
		key, val, b, hasColon = cutKeyLine(b)
		if !hasColon {
			return io, kerneltext.ShapeError("io: line %q has no colon", key)
		}
		var dst *int64
		var bit int
		switch string(key) {
		case "rchar":
			dst, bit = &io.RChar, 0
		case "wchar":
			dst, bit = &io.WChar, 1
		case "syscr":
			dst, bit = &io.SyscR, 2
		case "syscw":
			dst, bit = &io.SyscW, 3
		case "read_bytes":
			dst, bit = &io.ReadBytes, 4
		case "write_bytes":
			dst, bit = &io.WriteBytes, 5
		case "cancelled_write_bytes":
			dst, bit = &io.CancelledWriteBytes, 6
		default:
			continue
		}
		v, ok := parseInt(trimSpace(val))
		if !ok {
			return io, kerneltext.ShapeError("io: %s value %q is not a number", key, val)
		}
		*dst = v
		seen |= 1 << bit
	}
	for i, key := range ioKeys {
		if seen&(1<<i) == 0 {
			return io, kerneltext.ShapeError("io: no %s line", key)
		}
	}
	return io, nil
}
