// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"encoding/binary"
	"unsafe"

	"github.com/gpotel/gpotel/segmentagent/internal/kerneltext"
)

// Auxiliary vector entries the kernel hands every process (linux/auxvec.h).
const (
	atNull   = 0
	atPageSz = 6
	atClkTck = 17
)

// Auxv holds the host constants read from a process's auxiliary vector.
type Auxv struct {
	ClkTck   int64 // USER_HZ, clock ticks per second
	PageSize int64 // bytes
}

// ParseAuxv reads AT_CLKTCK and AT_PAGESZ from the content of
// /proc/self/auxv: pairs of native-endian machine words ending at AT_NULL.
func ParseAuxv(b []byte) (Auxv, error) {
	var a Auxv
	const word = int(unsafe.Sizeof(uintptr(0)))
	read := func(p []byte) uint64 {
		if word == 8 {
			return binary.NativeEndian.Uint64(p)
		}
		return uint64(binary.NativeEndian.Uint32(p))
	}
	for len(b) >= 2*word {
		key, val := read(b), read(b[word:])
		b = b[2*word:]
		switch key {
		case atNull:
			b = nil
		case atClkTck:
			a.ClkTck = int64(val)
		case atPageSz:
			a.PageSize = int64(val)
		}
	}
	if a.ClkTck <= 0 || a.PageSize <= 0 {
		return a, kerneltext.ShapeError("auxv: no AT_CLKTCK or AT_PAGESZ entry")
	}
	return a, nil
}
