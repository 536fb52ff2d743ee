// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gpotel/gpotel/internal/kernelunits"
	"github.com/gpotel/gpotel/segmentagent/internal/kerneltext"
)

// The host's online CPUs are what its processes can use at most: the
// ceiling gpotel-top checks a host's CPU figure against. They come from
// sysfs's devices/system/cpu/online, the list sysconf(_SC_NPROCESSORS_ONLN)
// reads: a few bytes the kernel formats from its online mask, cheap to read
// on every answer (a CPU may be brought online or taken off at any time).
// /proc/stat lists the same CPUs, but writing it sums every interrupt's
// count over every CPU, too dear per answer on a large host. Not the
// agent's own affinity (Go's NumCPU) or its cgroup's cpu.max: those bound
// the agent, not the database processes it reports on.
const onlineCPUsPath = "devices/system/cpu/online"

const (
	// maxCPUID bounds an id of the list: past any kernel's NR_CPUS.
	maxCPUID = kernelunits.MaxCPUs - 1
	// maxCPUListBytes bounds the file: every other CPU of maxCPUID online
	// ("1,3,5,…") takes about 190 KiB; the kernel's largest is smaller.
	maxCPUListBytes = 256 << 10
)

// ReadOnlineCPUs counts the CPUs online under sysRoot (sysfs's mount point).
func ReadOnlineCPUs(sysRoot string) (uint32, error) {
	path := filepath.Join(sysRoot, onlineCPUsPath)
	f, err := os.Open(path) // #nosec G304 -- under the configured sysfs root
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxCPUListBytes+1))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxCPUListBytes {
		return 0, kerneltext.ShapeError("%s: more than %d bytes", path, maxCPUListBytes)
	}
	n, err := ParseCPUList(b)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// ParseCPUList counts the CPUs of a kernel CPU list ("0-3,6\n"): ranges
// and single ids, ascending, comma-separated, one line.
func ParseCPUList(b []byte) (uint32, error) {
	line, ok := bytes.CutSuffix(b, []byte("\n"))
	if !ok {
		return 0, ErrTruncated
	}
	if len(line) == 0 {
		return 0, kerneltext.ShapeError("cpu list: empty")
	}
	var n uint32
	next := int64(0) // the least id the next item may start at
	for len(line) > 0 {
		item := line
		if i := bytes.IndexByte(line, ','); i >= 0 {
			item, line = line[:i], line[i+1:]
			if len(line) == 0 {
				return 0, kerneltext.ShapeError("cpu list: ends in a comma")
			}
		} else {
			line = nil
		}
		lo, hi, ok := cpuRange(item)
		if !ok || lo < next || hi > maxCPUID {
			return 0, kerneltext.ShapeError("cpu list: %q is not an ascending id or range of ids up to %d", item, maxCPUID)
		}
		n += uint32(hi - lo + 1) // #nosec G115 -- at most maxCPUID+1 in all
		next = hi + 1
	}
	return n, nil
}

// cpuRange reads "a" or "a-b" with a <= b.
func cpuRange(item []byte) (lo, hi int64, ok bool) {
	first, last, isRange := bytes.Cut(item, []byte("-"))
	if lo, ok = cpuID(first); !ok {
		return 0, 0, false
	}
	if !isRange {
		return lo, lo, true
	}
	if hi, ok = cpuID(last); !ok || hi < lo {
		return 0, 0, false
	}
	return lo, hi, true
}

// cpuID is one non-negative id; the bound leaves room past maxCPUID to
// refuse it by value.
func cpuID(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 10 || b[0] == '-' {
		return 0, false
	}
	return parseInt(b)
}
