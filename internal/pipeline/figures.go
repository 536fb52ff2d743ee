// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"cmp"
	"math"
	"slices"

	"github.com/gpotel/gpotel/internal/kernelunits"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// ProcessMetric is one metric of a process resource (docs/pipeline.md,
// process resources): one data point per process and attribute value,
// process.pid first, then Attr when it has one.
type ProcessMetric struct {
	Name, Unit, Description string
	Sum                     bool   // a cumulative, monotonic sum; else a gauge
	Double                  bool   // seconds; else an int
	Attr                    string // its data-point attribute after process.pid; "" when none
	// Session is the processor's per-session figure of a counter metric;
	// its cluster, unattributed and query siblings follow from it
	// (ClusterMetric, UnattributedMetric, QueryMetric). "" for a gauge.
	Session string
	figures []Figure // its rows of Figures, in table order
}

// The metrics of a process resource. gpotel.process.info describes a
// process (always 1); every other one carries rows of Figures.
var (
	ProcessInfo = &ProcessMetric{Name: MetricProcessInfo, Unit: "1",
		Description: "Always 1: one point per process a process resource holds, with what describes the process."}
	ProcessCPUTime = &ProcessMetric{Name: MetricProcessCPUTime, Unit: "s", Sum: true, Double: true, Attr: AttrCPUMode, Session: MetricSessionCPUTime,
		Description: "CPU time of the process: stat utime and stime divided by the host clk_tck."}
	ProcessDiskIO = &ProcessMetric{Name: MetricProcessDiskIO, Unit: "By", Sum: true, Attr: AttrDirection, Session: MetricSessionDiskIO,
		Description: "Bytes the process made the storage layer fetch or send (io read_bytes, write_bytes)."}
	ProcessCancelledWrite = &ProcessMetric{Name: MetricProcessCancelledWrite, Unit: "By", Sum: true, Session: MetricSessionCancelledWrite,
		Description: "Bytes the process caused not to be written after all (io cancelled_write_bytes)."}
	ProcessDiskDelay = &ProcessMetric{Name: MetricProcessDiskDelay, Unit: "s", Sum: true, Double: true, Session: MetricSessionDiskDelay,
		Description: "Time the process waited for block I/O (stat delayacct_blkio_ticks divided by the host clk_tck). " +
			"Absent while the host's kernel.task_delayacct is 0: the kernel counts nothing then."}
	ProcessIOChars = &ProcessMetric{Name: MetricProcessIOChars, Unit: "By", Sum: true, Attr: AttrDirection, Session: MetricSessionIOChars,
		Description: "Bytes passed to read-like and write-like syscalls (io rchar, wchar)."}
	ProcessIOSyscalls = &ProcessMetric{Name: MetricProcessIOSyscalls, Unit: "{syscall}", Sum: true, Attr: AttrDirection, Session: MetricSessionIOSyscalls,
		Description: "Read-like and write-like syscalls (io syscr, syscw)."}
	ProcessPagingFaults = &ProcessMetric{Name: MetricProcessPagingFaults, Unit: "{fault}", Sum: true, Attr: AttrFaultType, Session: MetricSessionPagingFaults,
		Description: "Page faults (stat majflt, minflt)."}
	ProcessContextSwitches = &ProcessMetric{Name: MetricProcessContextSwitches, Unit: "{context_switch}", Sum: true,
		Attr: AttrContextSwitchType, Session: MetricSessionContextSwitches,
		Description: "Context switches (status voluntary_ctxt_switches, nonvoluntary_ctxt_switches)."}
	ProcessRunDelay = &ProcessMetric{Name: MetricProcessRunDelay, Unit: "s", Sum: true, Double: true, Session: MetricSessionRunDelay,
		Description: "Time the process was runnable but waited in a run queue (schedstat, ns divided by 1e9). Absent without schedstat."}
	ProcessDelay = &ProcessMetric{Name: MetricProcessDelay, Unit: "s", Sum: true, Double: true, Attr: AttrDelayType, Session: MetricSessionDelay,
		Description: "Time the process waited for a page to be swapped in, for memory reclaim (freepages), on thrashing, for memory compaction, copying " +
			"on write-protect faults and handling IRQs (taskstats delays, ns divided by 1e9). Present only when the agent reads taskstats and " +
			"kernel.task_delayacct is 1."}
	ProcessMemoryUsage = &ProcessMetric{Name: MetricProcessMemoryUsage, Unit: "By",
		Description: "Resident memory: status VmRSS times 1024, or stat rss times the host page size when VmRSS is absent."}
	ProcessMemoryVirtual = &ProcessMetric{Name: MetricProcessMemoryVirtual, Unit: "By",
		Description: "Virtual memory size (stat vsize)."}
	ProcessMemoryRSS = &ProcessMetric{Name: MetricProcessMemoryRSS, Unit: "By", Attr: AttrRSSType,
		Description: "Resident memory by kind (status RssAnon, RssFile, RssShmem times 1024). Absent before Linux 4.5."}
	ProcessMemoryPeak = &ProcessMetric{Name: MetricProcessMemoryPeak, Unit: "By",
		Description: "Peak resident memory (status VmHWM times 1024)."}
	ProcessMemoryVirtualPeak = &ProcessMetric{Name: MetricProcessMemoryVirtPeak, Unit: "By",
		Description: "Peak virtual memory (status VmPeak times 1024)."}
	ProcessMemorySwap = &ProcessMetric{Name: MetricProcessMemorySwap, Unit: "By",
		Description: "Swapped-out memory (status VmSwap times 1024)."}
	ProcessMemoryPageTables = &ProcessMetric{Name: MetricProcessMemoryPageTables, Unit: "By",
		Description: "Memory the kernel holds for the process's page tables (status VmPTE times 1024)."}
	ProcessThreadCount = &ProcessMetric{Name: MetricProcessThreadCount, Unit: "{thread}",
		Description: "Threads in the process (status Threads)."}
	ProcessCommandCount = &ProcessMetric{Name: MetricProcessCommandCount, Unit: "1",
		Description: "cmd<N> of a Greenplum process title: the gp_command_count of the command the process last ran. No point when the title has none (PostgreSQL)."}
)

// Figure is one value a process reports: one row of Figures. The
// cumulative counters come first, so a counter's Figure is also its slot
// in the processor (Counters).
type Figure uint8

// The figures, in the order of Figures. Add a counter before MemoryUsage,
// a gauge before NumFigures.
const (
	CPUUser Figure = iota
	CPUSystem
	DiskRead
	DiskWrite
	CancelledWrite
	DiskDelay
	CharsRead
	CharsWrite
	SyscallsRead
	SyscallsWrite
	FaultsMajor
	FaultsMinor
	SwitchesVoluntary
	SwitchesInvoluntary
	RunDelay
	DelaySwapin
	DelayFreepages
	DelayThrashing
	DelayCompact
	DelayWpcopy
	DelayIRQ

	MemoryUsage // the first gauge
	MemoryVirtual
	RSSAnon
	RSSFile
	RSSShmem
	MemoryPeak
	MemoryVirtualPeak
	MemorySwap
	MemoryPageTables
	ThreadCount
	CommandCount

	NumFigures
)

// NumCounters is how many figures are cumulative counters (the processor
// diffs them); the rest are gauges.
const NumCounters = int(MemoryUsage)

// A process's counters fit one uint32 mask in the processor.
var _ [32 - NumCounters]struct{}

// EveryCounter is the mask (bit per Figure) of every counter.
const EveryCounter = uint32(1)<<NumCounters - 1

// RoundedAtExit is the mask of the counters an exit record gives rounded
// down to a multiple of 1024: an exited process's total of each is the
// larger of the record's and its last live (exact) reading.
var RoundedAtExit = roundedAtExit()

func roundedAtExit() uint32 {
	var mask uint32
	for f := range Figure(NumCounters) {
		if slices.ContainsFunc(Figures[f].Exit, func(s Source[*gpotelv1.TaskStatsRecord]) bool { return s.RoundedDown }) {
			mask |= 1 << f
		}
	}
	return mask
}

// Source is where an agent reports a figure: a field of its answer, in a
// kernel unit that kernelunits converts (the one place that does).
type Source[M any] struct {
	Field     string // the field, as docs/pipeline.md names it
	Unit      kernelunits.Unit
	Delayacct bool // read only while the host's delay accounting is on
	// RoundedDown: the kernel rounds it down to a multiple of 1024
	// (taskstats' xacct_add_tsk), where /proc/<pid>/io is exact.
	RoundedDown bool
	// Read returns the raw value, ok false when the answer has none.
	Read func(M) (raw int64, ok bool)
}

// FigureRow is one row of the contract table.
type FigureRow struct {
	Metric *ProcessMetric
	Value  string // its Metric.Attr value; "" when the metric has none
	// Live are the answer's fields that give it, the first present wins;
	// Exit the exit record's (none: an exited process has no such figure).
	Live []Source[*yagpcc.GpPidProcInfo]
	Exit []Source[*gpotelv1.TaskStatsRecord]
	// Stat is the SystemStat field the session figure of a counter fills;
	// the gauges reach SystemStat through MemoryTypes.
	Stat StatField
}

// Figures is the contract table: one row per figure.
var Figures = [NumFigures]FigureRow{
	CPUUser: {Metric: ProcessCPUTime, Value: CPUModeUser,
		Live: live(stat("stat utime", kernelunits.Ticks, (*yagpcc.ProcStat).GetUtime)),
		Exit: exit(exitCPU("cpu_run_virtual_ns × user_us share", true)),
		Stat: seconds("userTimeSeconds", func(s *yagpcc.SystemStat) *float64 { return &s.UserTimeSeconds })},
	CPUSystem: {Metric: ProcessCPUTime, Value: CPUModeSys,
		Live: live(stat("stat stime", kernelunits.Ticks, (*yagpcc.ProcStat).GetStime)),
		Exit: exit(exitCPU("cpu_run_virtual_ns × system_us share", false)),
		Stat: seconds("kernelTimeSeconds", func(s *yagpcc.SystemStat) *float64 { return &s.KernelTimeSeconds })},
	DiskRead: {Metric: ProcessDiskIO, Value: DirectionRead,
		Live: live(io("io read_bytes", (*yagpcc.ProcIO).GetReadBytes)),
		Exit: exit(roundedRecord("read_bytes", (*gpotelv1.TaskStatsRecord).GetReadBytes)),
		Stat: count("read_bytes", func(s *yagpcc.SystemStat) *uint64 { return &s.ReadBytes })},
	DiskWrite: {Metric: ProcessDiskIO, Value: DirectionWrite,
		Live: live(io("io write_bytes", (*yagpcc.ProcIO).GetWriteBytes)),
		Exit: exit(roundedRecord("write_bytes", (*gpotelv1.TaskStatsRecord).GetWriteBytes)),
		Stat: count("write_bytes", func(s *yagpcc.SystemStat) *uint64 { return &s.WriteBytes })},
	CancelledWrite: {Metric: ProcessCancelledWrite,
		Live: live(io("io cancelled_write_bytes", (*yagpcc.ProcIO).GetCancelledWriteBytes)),
		Exit: exit(roundedRecord("cancelled_write_bytes", (*gpotelv1.TaskStatsRecord).GetCancelledWriteBytes)),
		Stat: count("cancelled_write_bytes", func(s *yagpcc.SystemStat) *uint64 { return &s.CancelledWriteBytes })},
	DiskDelay: {Metric: ProcessDiskDelay,
		Live: live(delayacctStat("stat delayacct_blkio_ticks", kernelunits.Ticks, (*yagpcc.ProcStat).GetDelayacctBlkioTicks)),
		Exit: exit(delay("delays blkio", (*gpotelv1.TaskDelays).GetBlkio)),
		Stat: optionalSeconds("blkio_delay_seconds", func(s *yagpcc.SystemStat) **float64 { return &s.BlkioDelaySeconds })},
	CharsRead: {Metric: ProcessIOChars, Value: DirectionRead,
		Live: live(io("io rchar", (*yagpcc.ProcIO).GetRchar)),
		Exit: exit(roundedRecord("read_chars", (*gpotelv1.TaskStatsRecord).GetReadChars)),
		Stat: count("rchar", func(s *yagpcc.SystemStat) *uint64 { return &s.Rchar })},
	CharsWrite: {Metric: ProcessIOChars, Value: DirectionWrite,
		Live: live(io("io wchar", (*yagpcc.ProcIO).GetWchar)),
		Exit: exit(roundedRecord("write_chars", (*gpotelv1.TaskStatsRecord).GetWriteChars)),
		Stat: count("wchar", func(s *yagpcc.SystemStat) *uint64 { return &s.Wchar })},
	SyscallsRead: {Metric: ProcessIOSyscalls, Value: DirectionRead,
		Live: live(io("io syscr", (*yagpcc.ProcIO).GetSyscr)),
		Exit: exit(roundedRecord("read_syscalls", (*gpotelv1.TaskStatsRecord).GetReadSyscalls)),
		Stat: count("syscr", func(s *yagpcc.SystemStat) *uint64 { return &s.Syscr })},
	SyscallsWrite: {Metric: ProcessIOSyscalls, Value: DirectionWrite,
		Live: live(io("io syscw", (*yagpcc.ProcIO).GetSyscw)),
		Exit: exit(roundedRecord("write_syscalls", (*gpotelv1.TaskStatsRecord).GetWriteSyscalls)),
		Stat: count("syscw", func(s *yagpcc.SystemStat) *uint64 { return &s.Syscw })},
	FaultsMajor: {Metric: ProcessPagingFaults, Value: FaultTypeMajor,
		Live: live(stat("stat majflt", kernelunits.Count, (*yagpcc.ProcStat).GetMajflt)),
		Exit: exit(record("major_faults", kernelunits.Count, (*gpotelv1.TaskStatsRecord).GetMajorFaults)),
		Stat: count("major_faults", func(s *yagpcc.SystemStat) *uint64 { return &s.MajorFaults })},
	FaultsMinor: {Metric: ProcessPagingFaults, Value: FaultTypeMinor,
		Live: live(stat("stat minflt", kernelunits.Count, (*yagpcc.ProcStat).GetMinflt)),
		Exit: exit(record("minor_faults", kernelunits.Count, (*gpotelv1.TaskStatsRecord).GetMinorFaults)),
		Stat: count("minor_faults", func(s *yagpcc.SystemStat) *uint64 { return &s.MinorFaults })},
	SwitchesVoluntary: {Metric: ProcessContextSwitches, Value: ContextSwitchVol,
		Live: live(status("status voluntary_ctxt_switches", (*yagpcc.ProcStatus).GetVoluntaryCtxtSwitches)),
		Exit: exit(record("voluntary_ctxt_switches", kernelunits.Count, (*gpotelv1.TaskStatsRecord).GetVoluntaryCtxtSwitches)),
		Stat: count("voluntary_ctxt_switches", func(s *yagpcc.SystemStat) *uint64 { return &s.VoluntaryCtxtSwitches })},
	SwitchesInvoluntary: {Metric: ProcessContextSwitches, Value: ContextSwitchInvol,
		Live: live(status("status nonvoluntary_ctxt_switches", (*yagpcc.ProcStatus).GetNonvoluntaryCtxtSwitches)),
		Exit: exit(record("nonvoluntary_ctxt_switches", kernelunits.Count, (*gpotelv1.TaskStatsRecord).GetNonvoluntaryCtxtSwitches)),
		Stat: count("nonvoluntary_ctxt_switches", func(s *yagpcc.SystemStat) *uint64 { return &s.NonvoluntaryCtxtSwitches })},
	RunDelay: {Metric: ProcessRunDelay,
		Live: live(schedstat("schedstat run_delay", (*yagpcc.ProcSchedstat).GetRunDelayNs),
			taskstats("taskstats delays cpu", kernelunits.Nanoseconds, func(r *gpotelv1.TaskStatsRecord) uint64 { return r.GetDelays().GetCpu().GetTotalNs() })),
		Exit: exit(record("delays cpu", kernelunits.Nanoseconds, func(r *gpotelv1.TaskStatsRecord) uint64 { return r.GetDelays().GetCpu().GetTotalNs() })),
		Stat: optionalSeconds("run_delay_seconds", func(s *yagpcc.SystemStat) **float64 { return &s.RunDelaySeconds })},
	DelaySwapin: {Metric: ProcessDelay, Value: "swapin", // waiting for a page to be swapped in
		Live: live(taskDelay("taskstats delays swapin", (*gpotelv1.TaskDelays).GetSwapin)),
		Exit: exit(delay("delays swapin", (*gpotelv1.TaskDelays).GetSwapin)),
		Stat: optionalSeconds("swapin_delay_seconds", func(s *yagpcc.SystemStat) **float64 { return &s.SwapinDelaySeconds })},
	DelayFreepages: {Metric: ProcessDelay, Value: "freepages", // waiting for memory reclaim
		Live: live(taskDelay("taskstats delays freepages", (*gpotelv1.TaskDelays).GetFreepages)),
		Exit: exit(delay("delays freepages", (*gpotelv1.TaskDelays).GetFreepages)),
		Stat: optionalSeconds("freepages_delay_seconds", func(s *yagpcc.SystemStat) **float64 { return &s.FreepagesDelaySeconds })},
	DelayThrashing: {Metric: ProcessDelay, Value: "thrashing", // refaulting pages of the working set
		Live: live(taskDelay("taskstats delays thrashing", (*gpotelv1.TaskDelays).GetThrashing)),
		Exit: exit(delay("delays thrashing", (*gpotelv1.TaskDelays).GetThrashing)),
		Stat: optionalSeconds("thrashing_delay_seconds", func(s *yagpcc.SystemStat) **float64 { return &s.ThrashingDelaySeconds })},
	DelayCompact: {Metric: ProcessDelay, Value: "compact", // waiting for memory compaction
		Live: live(taskDelay("taskstats delays compact", (*gpotelv1.TaskDelays).GetCompact)),
		Exit: exit(delay("delays compact", (*gpotelv1.TaskDelays).GetCompact)),
		Stat: optionalSeconds("compact_delay_seconds", func(s *yagpcc.SystemStat) **float64 { return &s.CompactDelaySeconds })},
	DelayWpcopy: {Metric: ProcessDelay, Value: "wpcopy", // copying on a write-protect fault
		Live: live(taskDelay("taskstats delays wpcopy", (*gpotelv1.TaskDelays).GetWpcopy)),
		Exit: exit(delay("delays wpcopy", (*gpotelv1.TaskDelays).GetWpcopy)),
		Stat: optionalSeconds("wpcopy_delay_seconds", func(s *yagpcc.SystemStat) **float64 { return &s.WpcopyDelaySeconds })},
	DelayIRQ: {Metric: ProcessDelay, Value: "irq", // interrupts handled while the task ran
		Live: live(taskDelay("taskstats delays irq", (*gpotelv1.TaskDelays).GetIrq)),
		Exit: exit(delay("delays irq", (*gpotelv1.TaskDelays).GetIrq)),
		Stat: optionalSeconds("irq_delay_seconds", func(s *yagpcc.SystemStat) **float64 { return &s.IrqDelaySeconds })},

	MemoryUsage: {Metric: ProcessMemoryUsage,
		Live: live(statusKiB("status VmRSS", func(s *yagpcc.ProcStatus) *int64 { return s.VmRssKb }),
			stat("stat rss", kernelunits.Pages, (*yagpcc.ProcStat).GetRss))},
	MemoryVirtual: {Metric: ProcessMemoryVirtual,
		Live: live(stat("stat vsize", kernelunits.Count, (*yagpcc.ProcStat).GetVsize))},
	RSSAnon: {Metric: ProcessMemoryRSS, Value: RSSTypeAnon,
		Live: live(statusKiB("status RssAnon", func(s *yagpcc.ProcStatus) *int64 { return s.RssAnonKb }))},
	RSSFile: {Metric: ProcessMemoryRSS, Value: RSSTypeFile,
		Live: live(statusKiB("status RssFile", func(s *yagpcc.ProcStatus) *int64 { return s.RssFileKb }))},
	RSSShmem: {Metric: ProcessMemoryRSS, Value: RSSTypeShmem,
		Live: live(statusKiB("status RssShmem", func(s *yagpcc.ProcStatus) *int64 { return s.RssShmemKb }))},
	MemoryPeak: {Metric: ProcessMemoryPeak,
		Live: live(statusKiB("status VmHWM", func(s *yagpcc.ProcStatus) *int64 { return s.VmHwmKb })),
		Exit: exit(record("hiwater_rss_kb", kernelunits.KiB, (*gpotelv1.TaskStatsRecord).GetHiwaterRssKb))},
	MemoryVirtualPeak: {Metric: ProcessMemoryVirtualPeak,
		Live: live(statusKiB("status VmPeak", func(s *yagpcc.ProcStatus) *int64 { return s.VmPeakKb })),
		Exit: exit(record("hiwater_vm_kb", kernelunits.KiB, (*gpotelv1.TaskStatsRecord).GetHiwaterVmKb))},
	MemorySwap: {Metric: ProcessMemorySwap,
		Live: live(statusKiB("status VmSwap", func(s *yagpcc.ProcStatus) *int64 { return s.VmSwapKb }))},
	MemoryPageTables: {Metric: ProcessMemoryPageTables,
		Live: live(statusKiB("status VmPTE", func(s *yagpcc.ProcStatus) *int64 { return s.VmPteKb }))},
	ThreadCount: {Metric: ProcessThreadCount,
		Live: live(statusThreads(), stat("stat num_threads", kernelunits.Count, (*yagpcc.ProcStat).GetNumThreads))},
	CommandCount: {Metric: ProcessCommandCount,
		Live: live(Source[*yagpcc.GpPidProcInfo]{Field: "cmdline title cmd<N>", Read: func(i *yagpcc.GpPidProcInfo) (int64, bool) {
			return i.GetCommandCount(), i.CommandCount != nil
		}})},
}

// MemoryType is one gpotel.memory.type of the session figures: the sum of
// some process gauges, summed per host, then over hosts (Cluster) or
// their largest host (MaxHost).
type MemoryType struct {
	Name             string
	From             []Figure
	Cluster, MaxHost StatField // zero: not in SystemStat
}

// The memory types, in the order of MemoryTypes.
const (
	MemRSS = iota
	MemRSSAnon
	MemRSSShared
	MemVirtual
	MemPeak
	MemVirtualPeak
	NumMemory
)

// MemoryTypes are the session figures' memory types.
var MemoryTypes = [NumMemory]MemoryType{
	MemRSS: {Name: MemoryTypeRSS, From: []Figure{MemoryUsage},
		Cluster: count("rss", func(s *yagpcc.SystemStat) *uint64 { return &s.Rss }),
		MaxHost: count("rss_max_host", func(s *yagpcc.SystemStat) *uint64 { return &s.RssMaxHost })},
	MemRSSAnon: {Name: MemoryTypeRSSAnon, From: []Figure{RSSAnon},
		Cluster: count("rss_anon", func(s *yagpcc.SystemStat) *uint64 { return &s.RssAnon }),
		MaxHost: count("rss_anon_max_host", func(s *yagpcc.SystemStat) *uint64 { return &s.RssAnonMaxHost })},
	MemRSSShared: {Name: MemoryTypeRSSShared, From: []Figure{RSSFile, RSSShmem},
		Cluster: count("rss_shared", func(s *yagpcc.SystemStat) *uint64 { return &s.RssShared })},
	MemVirtual: {Name: MemoryTypeVirtual, From: []Figure{MemoryVirtual},
		Cluster: count("vsize", func(s *yagpcc.SystemStat) *uint64 { return &s.Vsize })},
	MemPeak: {Name: MemoryTypePeak, From: []Figure{MemoryPeak}},
	MemVirtualPeak: {Name: MemoryTypeVirtualPeak, From: []Figure{MemoryVirtualPeak},
		Cluster: kib("VmPeakKb", func(s *yagpcc.SystemStat) *uint64 { return &s.VmPeakKb })},
}

// ProcessMetrics are the process metrics in the order a resource lists
// them: by name, as mdatagen's builder emits them.
var ProcessMetrics []*ProcessMetric

// memoryOf is, per figure, the memory type it adds to; -1 for none.
var memoryOf [NumFigures]int8

// CounterMetrics are the process metrics with a session figure, in table
// order: the ones the processor diffs.
var CounterMetrics []*ProcessMetric

var processMetricByName, counterMetricBySession map[string]*ProcessMetric

func init() {
	seen := map[*ProcessMetric]bool{ProcessInfo: true}
	ProcessMetrics = append(ProcessMetrics, ProcessInfo)
	for f := range NumFigures {
		m := Figures[f].Metric
		m.figures = append(m.figures, f)
		if !seen[m] {
			seen[m] = true
			ProcessMetrics = append(ProcessMetrics, m)
			if m.Session != "" {
				CounterMetrics = append(CounterMetrics, m)
			}
		}
	}
	slices.SortFunc(ProcessMetrics, func(a, b *ProcessMetric) int { return cmp.Compare(a.Name, b.Name) })
	processMetricByName = map[string]*ProcessMetric{}
	for _, m := range ProcessMetrics {
		processMetricByName[m.Name] = m
	}
	counterMetricBySession = map[string]*ProcessMetric{}
	for _, m := range CounterMetrics {
		counterMetricBySession[m.Session] = m
	}
	for f := range memoryOf {
		memoryOf[f] = -1
	}
	for mt := range MemoryTypes {
		for _, f := range MemoryTypes[mt].From {
			memoryOf[f] = int8(mt)
		}
	}
}

// Figures returns the metric's rows, in table order.
func (m *ProcessMetric) Figures() []Figure { return m.figures }

// ProcessMetricNamed is the process metric of that name.
func ProcessMetricNamed(name string) (*ProcessMetric, bool) {
	m, ok := processMetricByName[name]
	return m, ok
}

// CounterMetricOfSession is the process metric whose session figure has that name.
func CounterMetricOfSession(name string) (*ProcessMetric, bool) {
	m, ok := counterMetricBySession[name]
	return m, ok
}

// MemoryTypeOf is the index in MemoryTypes of the memory type the figure
// adds to; not ok for none.
func MemoryTypeOf(f Figure) (int, bool) {
	return int(memoryOf[f]), memoryOf[f] >= 0
}

// FigureOf finds the metric's row with attribute value v.
func (m *ProcessMetric) FigureOf(v string) (Figure, bool) {
	for _, f := range m.figures {
		if Figures[f].Value == v {
			return f, true
		}
	}
	return 0, false
}

// StatField is a yagpcc SystemStat field a figure fills.
type StatField struct {
	Name    string // as metrics.proto spells it
	seconds func(*yagpcc.SystemStat) *float64
	// optional is a field with presence (gpotel's waits): unset where no
	// process reported the figure, never 0.
	optional func(*yagpcc.SystemStat) **float64
	count    func(*yagpcc.SystemStat) *uint64
	perKiB   bool // the field is in KiB and the figure in bytes
}

// StatValues is where the optional fields of one SystemStat point, one
// slot per figure: a decoder keeps it in the stat's own allocation, so
// that a field present costs no allocation of its own.
type StatValues [NumCounters]float64

func seconds(name string, field func(*yagpcc.SystemStat) *float64) StatField {
	return StatField{Name: name, seconds: field}
}

func optionalSeconds(name string, field func(*yagpcc.SystemStat) **float64) StatField {
	return StatField{Name: name, optional: field}
}

func count(name string, field func(*yagpcc.SystemStat) *uint64) StatField {
	return StatField{Name: name, count: field}
}

func kib(name string, field func(*yagpcc.SystemStat) *uint64) StatField {
	return StatField{Name: name, count: field, perKiB: true}
}

// The sources' constructors: one per kind of agent field.

func live(s ...Source[*yagpcc.GpPidProcInfo]) []Source[*yagpcc.GpPidProcInfo] { return s }

func exit(s ...Source[*gpotelv1.TaskStatsRecord]) []Source[*gpotelv1.TaskStatsRecord] { return s }

func stat(field string, u kernelunits.Unit, get func(*yagpcc.ProcStat) int64) Source[*yagpcc.GpPidProcInfo] {
	return Source[*yagpcc.GpPidProcInfo]{Field: field, Unit: u, Read: func(i *yagpcc.GpPidProcInfo) (int64, bool) {
		s := i.GetProcStat()
		return get(s), s != nil
	}}
}

// delayacctStat is a stat field the kernel counts only while delay
// accounting is on.
func delayacctStat(field string, u kernelunits.Unit, get func(*yagpcc.ProcStat) int64) Source[*yagpcc.GpPidProcInfo] {
	src := stat(field, u, get)
	src.Delayacct = true
	return src
}

func status(field string, get func(*yagpcc.ProcStatus) int64) Source[*yagpcc.GpPidProcInfo] {
	return Source[*yagpcc.GpPidProcInfo]{Field: field, Read: func(i *yagpcc.GpPidProcInfo) (int64, bool) {
		s := i.GetProcStatus()
		return get(s), s != nil
	}}
}

// statusKiB reads a status line the kernel may not print (nil).
func statusKiB(field string, get func(*yagpcc.ProcStatus) *int64) Source[*yagpcc.GpPidProcInfo] {
	return Source[*yagpcc.GpPidProcInfo]{Field: field, Unit: kernelunits.KiB, Read: func(i *yagpcc.GpPidProcInfo) (int64, bool) {
		s := i.GetProcStatus()
		if s == nil {
			return 0, false
		}
		v := get(s)
		if v == nil {
			return 0, false
		}
		return *v, true
	}}
}

// statusThreads reads status Threads; 0 means the line was missing.
func statusThreads() Source[*yagpcc.GpPidProcInfo] {
	return Source[*yagpcc.GpPidProcInfo]{Field: "status Threads", Read: func(i *yagpcc.GpPidProcInfo) (int64, bool) {
		n := i.GetProcStatus().GetThreads()
		return n, n > 0
	}}
}

func io(field string, get func(*yagpcc.ProcIO) int64) Source[*yagpcc.GpPidProcInfo] {
	return Source[*yagpcc.GpPidProcInfo]{Field: field, Read: func(i *yagpcc.GpPidProcInfo) (int64, bool) {
		s := i.GetProcIo()
		return get(s), s != nil
	}}
}

func schedstat(field string, get func(*yagpcc.ProcSchedstat) int64) Source[*yagpcc.GpPidProcInfo] {
	return Source[*yagpcc.GpPidProcInfo]{Field: field, Unit: kernelunits.Nanoseconds, Read: func(i *yagpcc.GpPidProcInfo) (int64, bool) {
		s := i.GetProcSchedstat()
		return get(s), s != nil
	}}
}

// taskstats reads the answer's taskstats record, which stands in for
// schedstat when the agent read the process through it.
func taskstats(field string, u kernelunits.Unit, get func(*gpotelv1.TaskStatsRecord) uint64) Source[*yagpcc.GpPidProcInfo] {
	return Source[*yagpcc.GpPidProcInfo]{Field: field, Unit: u, Read: func(i *yagpcc.GpPidProcInfo) (int64, bool) {
		r := i.GetTaskstats()
		return kernelunits.ClampInt(get(r)), r != nil
	}}
}

// taskDelay reads a delay of the answer's taskstats record; the kernel's
// struct of an older version may not have it.
func taskDelay(field string, get func(*gpotelv1.TaskDelays) *gpotelv1.Delay) Source[*yagpcc.GpPidProcInfo] {
	return Source[*yagpcc.GpPidProcInfo]{Field: field, Unit: kernelunits.Nanoseconds, Delayacct: true, Read: func(i *yagpcc.GpPidProcInfo) (int64, bool) {
		d := get(i.GetTaskstats().GetDelays())
		return kernelunits.ClampInt(d.GetTotalNs()), d != nil
	}}
}

func record(field string, u kernelunits.Unit, get func(*gpotelv1.TaskStatsRecord) uint64) Source[*gpotelv1.TaskStatsRecord] {
	return Source[*gpotelv1.TaskStatsRecord]{Field: field, Unit: u, Read: func(r *gpotelv1.TaskStatsRecord) (int64, bool) {
		return kernelunits.ClampInt(get(r)), true
	}}
}

// roundedRecord is an exit record's I/O count, which the kernel rounds
// down to a multiple of 1024.
func roundedRecord(field string, get func(*gpotelv1.TaskStatsRecord) uint64) Source[*gpotelv1.TaskStatsRecord] {
	src := record(field, kernelunits.Count, get)
	src.RoundedDown = true
	return src
}

func delay(field string, get func(*gpotelv1.TaskDelays) *gpotelv1.Delay) Source[*gpotelv1.TaskStatsRecord] {
	return Source[*gpotelv1.TaskStatsRecord]{Field: field, Unit: kernelunits.Nanoseconds, Delayacct: true, Read: func(r *gpotelv1.TaskStatsRecord) (int64, bool) {
		d := get(r.GetDelays())
		return kernelunits.ClampInt(d.GetTotalNs()), d != nil
	}}
}

// exitCPU is the time the process actually ran (cpu_run_virtual_total)
// split between user and system in the ratio of the sampled utime and
// stime, as the kernel's cputime_adjust does for /proc and for the
// parent's cutime and cstime.
func exitCPU(field string, user bool) Source[*gpotelv1.TaskStatsRecord] {
	return Source[*gpotelv1.TaskStatsRecord]{Field: field, Unit: kernelunits.Nanoseconds, Read: func(r *gpotelv1.TaskStatsRecord) (int64, bool) {
		u, s := adjustCPU(r.GetCpuRunVirtualNs(), r.GetUserUs(), r.GetSystemUs())
		if user {
			return u, true
		}
		return s, true
	}}
}

// adjustCPU splits rtime (ns) between user and system in the ratio of the
// tick-sampled utime and stime (µs); all user when neither was sampled,
// as the kernel does.
func adjustCPU(rtimeNs, userUs, systemUs uint64) (user, system int64) {
	rtime := kernelunits.ClampInt(rtimeNs)
	switch {
	case systemUs == 0:
		return rtime, 0
	case userUs == 0:
		return 0, rtime
	}
	system = int64(math.Round(float64(rtime) * float64(systemUs) / float64(userUs+systemUs)))
	return rtime - system, system
}
