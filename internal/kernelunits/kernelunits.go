// Package kernelunits turns one process's raw /proc readings, in the kernel's
// own units, into seconds and bytes. It is the only place in gpotel that
// divides by a tick rate or multiplies by a page size: every conversion uses
// the answering host's own constants (yagpcc.ProcHost), never assumed ones.
package kernelunits

import (
	"errors"
	"fmt"
	"math"
	"time"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// bytesPerKB is the unit /proc/<pid>/status prints sizes in ("kB" means KiB).
const bytesPerKB = 1024

// Host holds the constants of one host that its kernel units depend on.
type Host struct {
	ClkTck   int64     // USER_HZ, ticks per second
	PageSize int64     // bytes per page
	BootTime time.Time // /proc/stat btime
	// Delayacct: kernel.task_delayacct was on when the host answered, so
	// its delays (but the run-queue wait, always kept) were measured.
	Delayacct bool
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
	if len(errs) > 0 {
		return Host{}, fmt.Errorf("kernelunits: bad host constants for %q: %w", h.GetHostname(), errors.Join(errs...))
	}
	return Host{
		ClkTck:    h.GetClkTck(),
		PageSize:  h.GetPageSize(),
		BootTime:  time.Unix(h.GetBootTimeUnix(), 0).UTC(),
		Delayacct: h.GetAccounting().GetDelayacctEnabled(),
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

// Value is a reading that may be missing (a file or a line the kernel did not
// give); a missing reading is never reported as zero.
type Value[T int64 | float64] struct {
	V  T
	OK bool
}

func some[T int64 | float64](v T) Value[T] { return Value[T]{V: v, OK: true} }

func optionalKB(kb *int64) Value[int64] {
	if kb == nil {
		return Value[int64]{}
	}
	return some(KBToBytes(*kb))
}

// Process is one process's readings in seconds and bytes. Fields are grouped
// by the file they come from; a group whose file was not read is all missing.
type Process struct {
	SegmentID int64
	SessionID int64
	PID       int64
	// CreationTime is boot time + stat starttime; zero when stat was unread.
	CreationTime time.Time
	// CommandCount is cmd<N> of a Greenplum process title (no unit to
	// convert; carried here so the writer reads one struct).
	CommandCount Value[int64]

	HasStat, HasStatus, HasIO, HasSchedstat bool

	// /proc/<pid>/stat
	UserCPU       Value[float64] // s
	SystemCPU     Value[float64] // s
	BlkioDelay    Value[float64] // s
	MinorFaults   Value[int64]
	MajorFaults   Value[int64]
	VirtualMemory Value[int64] // By
	StatRSS       Value[int64] // By: rss pages × page size
	StatThreads   Value[int64]

	// /proc/<pid>/status
	VoluntarySwitches   Value[int64]
	InvoluntarySwitches Value[int64]
	StatusRSS           Value[int64] // By: VmRSS
	RSSAnon             Value[int64] // By
	RSSFile             Value[int64] // By
	RSSShmem            Value[int64] // By
	PeakRSS             Value[int64] // By: VmHWM
	PeakVirtual         Value[int64] // By: VmPeak
	Swap                Value[int64] // By: VmSwap
	Threads             Value[int64]

	// /proc/<pid>/io
	ReadChars           Value[int64] // By
	WriteChars          Value[int64] // By
	ReadSyscalls        Value[int64]
	WriteSyscalls       Value[int64]
	ReadBytes           Value[int64] // By
	WriteBytes          Value[int64] // By
	CancelledWriteBytes Value[int64] // By

	// /proc/<pid>/schedstat
	RunDelay Value[float64] // s

	// taskstats delays /proc has no file for, by Delay* index; absent
	// without a taskstats record or while delay accounting is off.
	Delays [NumDelays]Value[float64] // s
}

// Indexes of Process.Delays.
const (
	DelaySwapin = iota
	DelayFreepages
	DelayThrashing
	DelayCompact
	DelayWpcopy
	DelayIRQ
	NumDelays
)

// taskDelays reads a taskstats record's delays; one the kernel's struct has
// not (an older version) stays absent.
func taskDelays(d *gpotelv1.TaskDelays) [NumDelays]Value[float64] {
	var out [NumDelays]Value[float64]
	for i, x := range [NumDelays]*gpotelv1.Delay{d.GetSwapin(), d.GetFreepages(), d.GetThrashing(), d.GetCompact(), d.GetWpcopy(), d.GetIrq()} {
		if x != nil {
			out[i] = some(NanosToSeconds(clampInt(x.GetTotalNs())))
		}
	}
	return out
}

// MemoryUsage is the resident size: status VmRSS, or stat rss × page size
// when status has no VmRSS line (kernel threads) or was not read.
func (p *Process) MemoryUsage() Value[int64] {
	if p.StatusRSS.OK {
		return p.StatusRSS
	}
	return p.StatRSS
}

// ThreadCount prefers status Threads and falls back to stat num_threads.
func (p *Process) ThreadCount() Value[int64] {
	if p.Threads.OK {
		return p.Threads
	}
	return p.StatThreads
}

// Convert turns one agent reading into seconds and bytes with the answering
// host's constants.
func Convert(info *yagpcc.GpPidProcInfo, host Host) Process {
	p := Process{
		SegmentID: info.GetGpSegmentId(),
		SessionID: info.GetSessId(),
		PID:       info.GetPid(),
	}
	if info.CommandCount != nil {
		p.CommandCount = some(info.GetCommandCount())
	}
	if st := info.GetProcStat(); st != nil {
		p.HasStat = true
		p.CreationTime = host.SinceBoot(st.GetStarttime())
		p.UserCPU = some(host.Seconds(st.GetUtime()))
		p.SystemCPU = some(host.Seconds(st.GetStime()))
		p.BlkioDelay = some(host.Seconds(st.GetDelayacctBlkioTicks()))
		p.MinorFaults = some(st.GetMinflt())
		p.MajorFaults = some(st.GetMajflt())
		p.VirtualMemory = some(st.GetVsize())
		p.StatRSS = some(host.PagesToBytes(st.GetRss()))
		p.StatThreads = some(st.GetNumThreads())
	}
	if s := info.GetProcStatus(); s != nil {
		p.HasStatus = true
		p.VoluntarySwitches = some(s.GetVoluntaryCtxtSwitches())
		p.InvoluntarySwitches = some(s.GetNonvoluntaryCtxtSwitches())
		p.StatusRSS = optionalKB(s.VmRssKb)
		p.RSSAnon = optionalKB(s.RssAnonKb)
		p.RSSFile = optionalKB(s.RssFileKb)
		p.RSSShmem = optionalKB(s.RssShmemKb)
		p.PeakRSS = optionalKB(s.VmHwmKb)
		p.PeakVirtual = optionalKB(s.VmPeakKb)
		p.Swap = optionalKB(s.VmSwapKb)
		if s.GetThreads() > 0 {
			p.Threads = some(s.GetThreads())
		}
	}
	if io := info.GetProcIo(); io != nil {
		p.HasIO = true
		p.ReadChars = some(io.GetRchar())
		p.WriteChars = some(io.GetWchar())
		p.ReadSyscalls = some(io.GetSyscr())
		p.WriteSyscalls = some(io.GetSyscw())
		p.ReadBytes = some(io.GetReadBytes())
		p.WriteBytes = some(io.GetWriteBytes())
		p.CancelledWriteBytes = some(io.GetCancelledWriteBytes())
	}
	if ss := info.GetProcSchedstat(); ss != nil {
		p.HasSchedstat = true
		p.RunDelay = some(NanosToSeconds(ss.GetRunDelayNs()))
	}
	if ts := info.GetTaskstats(); ts != nil {
		// The agent reads io and schedstat from the record when it has one.
		if !p.HasIO {
			p.HasIO = true
			p.ReadChars, p.WriteChars = some(clampInt(ts.GetReadChars())), some(clampInt(ts.GetWriteChars()))
			p.ReadSyscalls, p.WriteSyscalls = some(clampInt(ts.GetReadSyscalls())), some(clampInt(ts.GetWriteSyscalls()))
			p.ReadBytes, p.WriteBytes = some(clampInt(ts.GetReadBytes())), some(clampInt(ts.GetWriteBytes()))
			p.CancelledWriteBytes = some(clampInt(ts.GetCancelledWriteBytes()))
		}
		if !p.HasSchedstat {
			p.HasSchedstat = true
			p.RunDelay = some(NanosToSeconds(clampInt(ts.GetDelays().GetCpu().GetTotalNs())))
		}
		if host.Delayacct {
			p.Delays = taskDelays(ts.GetDelays())
		}
	}
	return p
}

// ConvertExit turns one taskstats exit record (µs, ns, KiB) into a Process
// holding the exited process's final totals. Its CPU time is the time it
// actually ran (cpu_run_virtual_total, ns) split in the ratio of the sampled
// utime and stime, as the kernel's cputime_adjust does for /proc and for the
// parent's cutime and cstime. Delays other than the run-queue wait are read
// only when delay accounting was on (delayacct): otherwise they are 0, not measured.
func ConvertExit(r *gpotelv1.ExitRecord, delayacct bool) Process {
	s := r.GetStats()
	p := Process{
		PID:          s.GetPid(),
		CreationTime: time.Unix(0, r.GetStartTimeUnixNano()).UTC(),
		HasStat:      true, HasStatus: true, HasIO: true, HasSchedstat: true,
	}
	user, system := adjustCPU(s.GetCpuRunVirtualNs(), s.GetUserUs(), s.GetSystemUs())
	p.UserCPU, p.SystemCPU = some(user), some(system)
	p.MinorFaults = some(clampInt(s.GetMinorFaults()))
	p.MajorFaults = some(clampInt(s.GetMajorFaults()))
	p.VoluntarySwitches = some(clampInt(s.GetVoluntaryCtxtSwitches()))
	p.InvoluntarySwitches = some(clampInt(s.GetNonvoluntaryCtxtSwitches()))
	p.PeakRSS = some(KBToBytes(clampInt(s.GetHiwaterRssKb())))
	p.PeakVirtual = some(KBToBytes(clampInt(s.GetHiwaterVmKb())))
	p.ReadChars, p.WriteChars = some(clampInt(s.GetReadChars())), some(clampInt(s.GetWriteChars()))
	p.ReadSyscalls, p.WriteSyscalls = some(clampInt(s.GetReadSyscalls())), some(clampInt(s.GetWriteSyscalls()))
	p.ReadBytes, p.WriteBytes = some(clampInt(s.GetReadBytes())), some(clampInt(s.GetWriteBytes()))
	p.CancelledWriteBytes = some(clampInt(s.GetCancelledWriteBytes()))
	p.RunDelay = some(NanosToSeconds(clampInt(s.GetDelays().GetCpu().GetTotalNs())))
	if delayacct {
		p.BlkioDelay = some(NanosToSeconds(clampInt(s.GetDelays().GetBlkio().GetTotalNs())))
		p.Delays = taskDelays(s.GetDelays())
	}
	return p
}

// adjustCPU splits rtime (ns) between user and system in the ratio of the
// tick-sampled utime and stime (µs), in seconds.
func adjustCPU(rtimeNs, userUs, systemUs uint64) (user, system float64) {
	rtime := float64(rtimeNs) / 1e9
	switch {
	case systemUs == 0:
		return rtime, 0
	case userUs == 0:
		return 0, rtime
	}
	system = rtime * float64(systemUs) / float64(userUs+systemUs)
	return rtime - system, system
}

// clampInt keeps a kernel u64 inside int64: no real counter reaches 2^63.
func clampInt(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}
