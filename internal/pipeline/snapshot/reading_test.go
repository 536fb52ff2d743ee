// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshot

import (
	"math"
	"testing"
	"time"

	"github.com/gpotel/gpotel/internal/kernelunits"
	"github.com/gpotel/gpotel/internal/pipeline"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

func ptr(v int64) *int64 { return &v }

// testHost's constants differ from the agent's fallbacks (CLK_TCK 100, a
// 4096-byte page), so a conversion that assumed them instead of the host's
// would be caught.
var testHost = kernelunits.Host{ClkTck: 250, PageSize: 16384, BootTime: time.Unix(1_700_000_000, 0).UTC()}

func seconds0(v float64) Value { return Value{Float: v, OK: true} }
func bytes0(v int64) Value     { return Value{Int: v, OK: true} }

func fullReading() *yagpcc.GpPidProcInfo {
	return &yagpcc.GpPidProcInfo{
		GpSegmentId: 2, SessId: 77, Pid: 4242,
		ProcStat: &yagpcc.ProcStat{
			Utime: 150, Stime: 50, Starttime: 1000, DelayacctBlkioTicks: 7,
			Minflt: 11, Majflt: 3, Vsize: 1 << 30, Rss: 10, NumThreads: 1,
		},
		ProcStatus: &yagpcc.ProcStatus{
			VmPeakKb: ptr(2048), VmHwmKb: ptr(512), VmRssKb: ptr(400),
			RssAnonKb: ptr(100), RssFileKb: ptr(200), RssShmemKb: ptr(100), VmSwapKb: ptr(0),
			Threads: 1, VoluntaryCtxtSwitches: 9, NonvoluntaryCtxtSwitches: 4,
		},
		ProcIo:        &yagpcc.ProcIO{Rchar: 1, Wchar: 2, Syscr: 3, Syscw: 4, ReadBytes: 4096, WriteBytes: 8192, CancelledWriteBytes: 512},
		ProcSchedstat: &yagpcc.ProcSchedstat{RunTimeNs: 9, RunDelayNs: 250_000_000},
	}
}

// source converts what one of a figure's sources reads, alone.
func source(t *testing.T, f pipeline.Figure, i int, info *yagpcc.GpPidProcInfo, h kernelunits.Host) Value {
	t.Helper()
	src := pipeline.Figures[f].Live[i]
	raw, ok := src.Read(info)
	if !ok {
		return Value{}
	}
	var p Process
	p.setRaw(f, h, src.Unit, raw)
	return p.Values[f]
}

func TestConvertFullReading(t *testing.T) {
	info := fullReading()
	host := testHost
	host.Delayacct = true
	p := ProcessFromAnswer(info, host)
	for _, c := range []struct {
		name string
		got  any
		want any
	}{
		{"identity", p.PID, int64(4242)},
		{"creation", p.CreationTime, testHost.BootTime.Add(4 * time.Second)},
		{"user cpu", p.Values[pipeline.CPUUser], seconds0(0.6)},
		{"system cpu", p.Values[pipeline.CPUSystem], seconds0(0.2)},
		{"blkio delay", p.Values[pipeline.DiskDelay], seconds0(0.028)},
		{"minflt", p.Values[pipeline.FaultsMinor], bytes0(11)},
		{"majflt", p.Values[pipeline.FaultsMajor], bytes0(3)},
		{"vsize stays bytes", p.Values[pipeline.MemoryVirtual], bytes0(1 << 30)},
		{"stat rss pages", source(t, pipeline.MemoryUsage, 1, info, testHost), bytes0(163840)},
		{"VmRSS kB", source(t, pipeline.MemoryUsage, 0, info, testHost), bytes0(409600)},
		{"memory usage prefers VmRSS", p.Values[pipeline.MemoryUsage], bytes0(409600)},
		{"rss anon", p.Values[pipeline.RSSAnon], bytes0(102400)},
		{"rss file", p.Values[pipeline.RSSFile], bytes0(204800)},
		{"rss shmem", p.Values[pipeline.RSSShmem], bytes0(102400)},
		{"VmHWM", p.Values[pipeline.MemoryPeak], bytes0(524288)},
		{"VmPeak", p.Values[pipeline.MemoryVirtualPeak], bytes0(2097152)},
		{"swap present and zero", p.Values[pipeline.MemorySwap], bytes0(0)},
		{"threads", p.Values[pipeline.ThreadCount], bytes0(1)},
		{"voluntary", p.Values[pipeline.SwitchesVoluntary], bytes0(9)},
		{"involuntary", p.Values[pipeline.SwitchesInvoluntary], bytes0(4)},
		{"rchar", p.Values[pipeline.CharsRead], bytes0(1)},
		{"wchar", p.Values[pipeline.CharsWrite], bytes0(2)},
		{"syscr", p.Values[pipeline.SyscallsRead], bytes0(3)},
		{"syscw", p.Values[pipeline.SyscallsWrite], bytes0(4)},
		{"read_bytes", p.Values[pipeline.DiskRead], bytes0(4096)},
		{"write_bytes", p.Values[pipeline.DiskWrite], bytes0(8192)},
		{"cancelled", p.Values[pipeline.CancelledWrite], bytes0(512)},
		{"run delay ns", p.Values[pipeline.RunDelay], seconds0(0.25)},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestConvertLeavesUnreadFilesMissingNotZero(t *testing.T) {
	in := fullReading()
	in.ProcIo = nil
	in.ProcSchedstat = nil
	in.ProcStatus.RssAnonKb, in.ProcStatus.RssFileKb, in.ProcStatus.RssShmemKb = nil, nil, nil
	p := ProcessFromAnswer(in, testHost)
	if p.Values[pipeline.DiskRead].OK || p.Values[pipeline.CancelledWrite].OK {
		t.Error("io readings present although /proc/<pid>/io was not read")
	}
	if p.Values[pipeline.RunDelay].OK {
		t.Error("run delay present although schedstat was not read")
	}
	if p.Values[pipeline.RSSAnon].OK || p.Values[pipeline.RSSFile].OK || p.Values[pipeline.RSSShmem].OK {
		t.Error("RssAnon/File/Shmem present although the kernel did not print them")
	}
	if !p.HasStat || !p.Values[pipeline.CPUUser].OK {
		t.Error("stat readings lost")
	}
}

func TestMemoryUsageFallsBackToStatRSSWithoutVmRSS(t *testing.T) {
	in := fullReading()
	in.ProcStatus.VmRssKb = nil // kernel threads print no VmRSS
	p := ProcessFromAnswer(in, kernelunits.Host{ClkTck: 100, PageSize: 65536, BootTime: testHost.BootTime})
	if got := p.Values[pipeline.MemoryUsage]; got != bytes0(10*65536) {
		t.Fatalf("memory usage %v, want stat rss × the host's 64 KiB pages", got)
	}
}

func TestConvertWithoutStatHasNoCreationTime(t *testing.T) {
	in := fullReading()
	in.ProcStat = nil
	p := ProcessFromAnswer(in, testHost)
	if p.HasStat || !p.CreationTime.IsZero() || p.Values[pipeline.CPUUser].OK {
		t.Fatalf("stat-derived readings invented: %+v", p)
	}
	if got := p.Values[pipeline.ThreadCount]; got != bytes0(1) {
		t.Fatalf("threads from status lost: %v", got)
	}
}

func TestExitCPUIsTheRunTimeSplitLikeTheKernel(t *testing.T) {
	rec := &gpotelv1.ExitRecord{StartTimeUnixNano: 1_700_000_000_123_456_789, Stats: &gpotelv1.TaskStatsRecord{
		Pid: 42, UserUs: 30_000, SystemUs: 10_000, CpuRunVirtualNs: 50_000_000,
		ReadBytes: 4096, HiwaterRssKb: 2, Delays: &gpotelv1.TaskDelays{Cpu: &gpotelv1.Delay{TotalNs: 7_000_000}, Blkio: &gpotelv1.Delay{TotalNs: 3_000_000}},
	}}
	p := ProcessFromExit(rec, false)
	if u, s := p.Values[pipeline.CPUUser].Float, p.Values[pipeline.CPUSystem].Float; math.Abs(u-0.0375) > 1e-12 || math.Abs(s-0.0125) > 1e-12 {
		t.Errorf("cpu %v/%v, want 0.0375/0.0125 (50 ms split 3:1)", u, s)
	}
	if p.CreationTime.UnixNano() != 1_700_000_000_123_456_789 || p.PID != 42 || p.Values[pipeline.DiskRead].Int != 4096 || p.Values[pipeline.MemoryPeak].Int != 2048 {
		t.Errorf("identity or counters: %+v", p)
	}
	if math.Abs(p.Values[pipeline.RunDelay].Float-0.007) > 1e-12 || p.Values[pipeline.DiskDelay].OK {
		t.Errorf("run delay %v, blkio %+v: blkio must be absent without delay accounting", p.Values[pipeline.RunDelay], p.Values[pipeline.DiskDelay])
	}
	if p = ProcessFromExit(rec, true); math.Abs(p.Values[pipeline.DiskDelay].Float-0.003) > 1e-12 {
		t.Errorf("blkio with delay accounting: %+v", p.Values[pipeline.DiskDelay])
	}
}

// stat's delayacct_blkio_ticks counts only while kernel.task_delayacct is
// on: with it off, the block I/O wait is not measured and is absent, as the
// taskstats delays are, never a 0.
func TestBlockIOWaitNeedsDelayAccounting(t *testing.T) {
	host := testHost
	if p := ProcessFromAnswer(fullReading(), host); p.Values[pipeline.DiskDelay].OK {
		t.Errorf("block I/O wait without delay accounting: %+v, want absent", p.Values[pipeline.DiskDelay])
	}
	host.Delayacct = true
	if p := ProcessFromAnswer(fullReading(), host); p.Values[pipeline.DiskDelay] != seconds0(7.0/250) {
		t.Errorf("block I/O wait with delay accounting: %+v, want 7 ticks at 250 Hz", p.Values[pipeline.DiskDelay])
	}
}

// The record of a live process stands in for schedstat, never for io:
// the kernel rounds its I/O counts down to a multiple of 1024.
func TestTaskstatsRecordStandsInForSchedstatOnly(t *testing.T) {
	host := kernelunits.Host{ClkTck: 100, PageSize: 4096, BootTime: time.Unix(1_700_000_000, 0)}
	info := &yagpcc.GpPidProcInfo{Pid: 7, ProcStat: &yagpcc.ProcStat{Starttime: 100}, Taskstats: &gpotelv1.TaskStatsRecord{
		ReadBytes: 8192, WriteChars: 3, Delays: &gpotelv1.TaskDelays{Cpu: &gpotelv1.Delay{TotalNs: 2e9}, Swapin: &gpotelv1.Delay{TotalNs: 1e9}},
	}}
	p := ProcessFromAnswer(info, host)
	if p.Values[pipeline.RunDelay].Float != 2 {
		t.Errorf("run delay from the record: %+v", p.Values[pipeline.RunDelay])
	}
	if p.Values[pipeline.DiskRead].OK || p.Values[pipeline.CharsWrite].OK {
		t.Errorf("I/O counts from the record: %+v %+v, want absent without io", p.Values[pipeline.DiskRead], p.Values[pipeline.CharsWrite])
	}
	if p.Values[pipeline.DelaySwapin].OK {
		t.Error("swap-in delay without delay accounting must be absent, not 0")
	}
	host.Delayacct = true
	if p = ProcessFromAnswer(info, host); p.Values[pipeline.DelaySwapin].Float != 1 || p.Values[pipeline.DelayIRQ].OK {
		t.Errorf("delays with delay accounting: %+v (irq absent: the record has none)", p.Values[pipeline.DelaySwapin:pipeline.DelayIRQ+1])
	}
	info.ProcIo = &yagpcc.ProcIO{ReadBytes: 1, Wchar: 1027}
	if p = ProcessFromAnswer(info, host); p.Values[pipeline.DiskRead].Int != 1 || p.Values[pipeline.CharsWrite].Int != 1027 {
		t.Errorf("I/O counts from io: %+v %+v, want 1 and 1027", p.Values[pipeline.DiskRead], p.Values[pipeline.CharsWrite])
	}
}

// Converting an answer allocates nothing: it runs once per process per
// scrape.
func TestConvertAllocatesNothing(t *testing.T) {
	kb, cmd := int64(8), int64(3)
	info := &yagpcc.GpPidProcInfo{Pid: 4000, ProcStat: &yagpcc.ProcStat{Utime: 250, Stime: 50, Starttime: 1000, Vsize: 1 << 20, Rss: 3},
		ProcStatus: &yagpcc.ProcStatus{VmRssKb: &kb, Threads: 1, VoluntaryCtxtSwitches: 4},
		ProcIo:     &yagpcc.ProcIO{ReadBytes: 4096}, CommandCount: &cmd}
	h := kernelunits.Host{ClkTck: 100, PageSize: 4096}
	if n := testing.AllocsPerRun(100, func() { _ = ProcessFromAnswer(info, h) }); n != 0 {
		t.Errorf("%v allocations per process, want 0", n)
	}
}
