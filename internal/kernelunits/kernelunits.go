// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package kernelunits converts readings in the kernel's own units (clock
// ticks, pages, KiB, ns, µs) into seconds and bytes. It is the only place in
// gpotel that divides by a tick rate or multiplies by a page size: every
// conversion uses the answering host's own constants (yagpcc.ProcHost),
// never assumed ones. Which unit each figure arrives in is the pipeline
// contract's table (internal/pipeline).
package kernelunits

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/gpotel/gpotel/proto/yagpcc"
)

// bytesPerKB is the unit /proc/<pid>/status prints sizes in ("kB" means KiB).
const bytesPerKB = 1024

// MaxCPUs bounds a host's CPU count: above any kernel's NR_CPUS (8192 on
// x86_64 with CONFIG_MAXSMP), so a larger count is a broken or hostile
// answer, never a host.
const MaxCPUs = 1 << 16

// Host holds the constants of one host that its kernel units depend on.
type Host struct {
	ClkTck   int64     // USER_HZ, ticks per second
	PageSize int64     // bytes per page
	BootTime time.Time // /proc/stat btime
	// Delayacct: kernel.task_delayacct was on when the host answered, so
	// its delays (but the run-queue wait, always kept) were measured.
	Delayacct bool
	// CPUs the host had online when it answered (ProcHost.cpus): what
	// its processes can use at most. 0: the agent did not say (an older
	// agent, or it could not read them).
	CPUs uint32
}

// HostFromProto checks and copies the constants an agent reported. A host
// whose constants are missing or absurd cannot have its readings converted.
func HostFromProto(h *yagpcc.ProcHost) (Host, error) {
	if h == nil {
		return Host{}, errors.New("kernelunits: the answer carries no host constants")
	}
	var errs []error
	if h.GetClkTck() <= 0 {
		errs = append(errs, fmt.Errorf("clk_tck %d is not positive", h.GetClkTck()))
	}
	if h.GetPageSize() <= 0 {
		errs = append(errs, fmt.Errorf("page_size %d is not positive", h.GetPageSize()))
	}
	if h.GetBootTimeUnix() <= 0 {
		errs = append(errs, fmt.Errorf("boot_time_unix %d is not positive", h.GetBootTimeUnix()))
	}
	if h.Cpus != nil && (h.GetCpus() == 0 || h.GetCpus() > MaxCPUs) {
		errs = append(errs, fmt.Errorf("cpus %d is not between 1 and %d", h.GetCpus(), MaxCPUs))
	}
	if len(errs) > 0 {
		return Host{}, fmt.Errorf("kernelunits: bad host constants for %q: %w", h.GetHostname(), errors.Join(errs...))
	}
	return Host{
		ClkTck:    h.GetClkTck(),
		PageSize:  h.GetPageSize(),
		BootTime:  time.Unix(h.GetBootTimeUnix(), 0).UTC(),
		Delayacct: h.GetAccounting().GetDelayacctEnabled(),
		CPUs:      h.GetCpus(),
	}, nil
}

// Seconds converts clock ticks to seconds.
func (h Host) Seconds(ticks int64) float64 {
	return float64(ticks) / float64(h.ClkTck)
}

// SinceBoot converts a tick count since boot to a wall-clock time, exact to
// the nanosecond without overflowing for any int64 tick count.
func (h Host) SinceBoot(ticks int64) time.Time {
	whole := ticks / h.ClkTck
	rest := ticks % h.ClkTck
	return time.Unix(h.BootTime.Unix()+whole, rest*int64(time.Second)/h.ClkTck).UTC()
}

// PagesToBytes converts a page count to bytes.
func (h Host) PagesToBytes(pages int64) int64 { return pages * h.PageSize }

// KBToBytes converts a /proc status size in kB to bytes.
func KBToBytes(kb int64) int64 { return kb * bytesPerKB }

// NanosToSeconds converts nanoseconds to seconds.
func NanosToSeconds(ns int64) float64 { return float64(ns) / 1e9 }

// Unit is the unit an agent reports a figure in. ToSeconds and ToInt are
// its one conversion to seconds, bytes or a count.
type Unit uint8

// The units agents report figures in.
const (
	Count        Unit = iota // a count, or bytes: nothing to convert
	Ticks                    // clock ticks (USER_HZ) → seconds
	Pages                    // pages → bytes
	KiB                      // /proc status "kB" and taskstats KiB → bytes
	Nanoseconds              // → seconds
	Microseconds             // → seconds
)

// IsTime tells the units that convert to seconds.
func (u Unit) IsTime() bool { return u == Ticks || u == Nanoseconds || u == Microseconds }

// ToSeconds converts a reading in a time unit to seconds.
func (h Host) ToSeconds(u Unit, raw int64) float64 {
	switch u {
	case Ticks:
		return h.Seconds(raw)
	case Nanoseconds:
		return NanosToSeconds(raw)
	case Microseconds:
		return MicrosToSeconds(raw)
	}
	return float64(raw)
}

// ToInt converts a reading in a size or count unit to bytes or a count.
func (h Host) ToInt(u Unit, raw int64) int64 {
	switch u {
	case Pages:
		return h.PagesToBytes(raw)
	case KiB:
		return KBToBytes(raw)
	}
	return raw
}

// ClampInt keeps a kernel u64 inside int64: no real counter reaches 2^63.
func ClampInt(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}
