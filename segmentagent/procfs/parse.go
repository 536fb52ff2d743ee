// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package procfs reads the per-process files of Linux procfs
// (/proc/<pid>/{stat,status,io,schedstat,cmdline}) for the segment agent.
//
// The hot path is built for hosts with thousands of backends: a Reader owns
// one reused buffer, opens files with raw syscalls relative to the pid's
// directory, and the Parse* functions read the bytes without allocating.
// Kernel units (clock ticks, pages, kB, ns) are kept as the kernel prints them.
package procfs

import (
	"bytes"

	"github.com/gpotel/gpotel/segmentagent/internal/kerneltext"
)

// The parse errors, the same values as cgroup's.
var (
	ErrTruncated = kerneltext.ErrTruncated
	ErrShape     = kerneltext.ErrShape
)

// maxUint64Div10 and maxUint64Mod10 bound a decimal accumulation without a division per digit.
const (
	maxUint64Div10 = (1<<64 - 1) / 10
	maxUint64Mod10 = (1<<64 - 1) % 10
)

// cutKeyLine cuts the first line off b, a "key: value" kernel file (io,
// status) that ends with a newline, and splits it at its first colon;
// without a colon, key is the whole line.
func cutKeyLine(b []byte) (key, val, rest []byte, hasColon bool) {
	line, rest, _ := bytes.Cut(b, []byte{'\n'})
	key, val, hasColon = bytes.Cut(line, []byte{':'})
	return key, val, rest, hasColon
}

// parseInt reads an optionally negative decimal integer. Values above
// MaxInt64 keep their bits: the kernel prints some u64 fields (rsslim is
// RLIM_INFINITY when unlimited), which then read as negative numbers.
func parseInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg = true
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		d := uint64(c - '0')
		if d > 9 {
			return 0, false
		}
		if v > maxUint64Div10 || (v == maxUint64Div10 && d > maxUint64Mod10) {
			return 0, false
		}
		v = v*10 + d
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v), true
	}
	return int64(v), true
}

// trimSpace drops the blanks and tabs procfs uses to align values.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}
