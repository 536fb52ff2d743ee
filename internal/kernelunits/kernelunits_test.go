package kernelunits

import (
	"math"
	"strings"
	"testing"
	"time"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

func ptr(v int64) *int64 { return &v }

var host100 = Host{ClkTck: 100, PageSize: 4096, BootTime: time.Unix(1_700_000_000, 0).UTC()}

func TestHostFromProtoRejectsMissingOrNonPositiveConstants(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *yagpcc.ProcHost
		want string
	}{
		{"nil", nil, "no host constants"},
		{"zero clk_tck", &yagpcc.ProcHost{ClkTck: 0, PageSize: 4096, BootTimeUnix: 1}, "clk_tck 0"},
		{"negative page size", &yagpcc.ProcHost{ClkTck: 100, PageSize: -1, BootTimeUnix: 1}, "page_size -1"},
		{"no boot time", &yagpcc.ProcHost{ClkTck: 100, PageSize: 4096}, "boot_time_unix 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := HostFromProto(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestHostFromProtoKeepsTheHostsOwnConstants(t *testing.T) {
	h, err := HostFromProto(&yagpcc.ProcHost{Hostname: "sdw1", ClkTck: 250, PageSize: 65536, BootTimeUnix: 1_600_000_000})
	if err != nil {
		t.Fatal(err)
	}
	if h.ClkTck != 250 || h.PageSize != 65536 || !h.BootTime.Equal(time.Unix(1_600_000_000, 0)) {
		t.Fatalf("got %+v", h)
	}
}

func TestTickConversionUsesTheHostsClockRate(t *testing.T) {
	for _, tc := range []struct {
		clkTck, ticks int64
		want          float64
	}{
		{100, 250, 2.5},
		{250, 250, 1},
		{1000, 1, 0.001},
		{100, 0, 0},
	} {
		h := Host{ClkTck: tc.clkTck, PageSize: 4096}
		if got := h.Seconds(tc.ticks); got != tc.want {
			t.Errorf("%d ticks at %d Hz = %v s, want %v", tc.ticks, tc.clkTck, got, tc.want)
		}
	}
}

func TestCreationTimeIsBootTimePlusStartTicks(t *testing.T) {
	for _, tc := range []struct {
		clkTck, starttime int64
		want              time.Duration
	}{
		{100, 0, 0},
		{100, 12345, 123*time.Second + 450*time.Millisecond},
		{300, 1, time.Second / 300},        // a rate that does not divide 1e9 truncates to the ns
		{100, math.MaxInt64 / 1000, 0},     // checked below: no overflow
		{1000, 86_400_000, 24 * time.Hour}, // a day at 1000 Hz
	} {
		h := Host{ClkTck: tc.clkTck, PageSize: 4096, BootTime: host100.BootTime}
		got := h.SinceBoot(tc.starttime)
		if tc.starttime == math.MaxInt64/1000 {
			if !got.After(h.BootTime) {
				t.Errorf("huge starttime went backwards: %v", got)
			}
			continue
		}
		if want := h.BootTime.Add(tc.want); !got.Equal(want) {
			t.Errorf("starttime %d at %d Hz = %v, want %v", tc.starttime, tc.clkTck, got, want)
		}
	}
}

func TestSizeConversions(t *testing.T) {
	if got := KBToBytes(3); got != 3072 {
		t.Errorf("3 kB = %d B, want 3072", got)
	}
	if got := (Host{ClkTck: 100, PageSize: 16384}).PagesToBytes(3); got != 49152 {
		t.Errorf("3 pages of 16 KiB = %d B", got)
	}
	if got := NanosToSeconds(1_500_000_000); got != 1.5 {
		t.Errorf("1.5e9 ns = %v s", got)
	}
}

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

func TestConvertFullReading(t *testing.T) {
	p := Convert(fullReading(), host100)
	type check struct {
		name string
		got  any
		want any
	}
	for _, c := range []check{
		{"identity", [3]int64{p.SegmentID, p.SessionID, p.PID}, [3]int64{2, 77, 4242}},
		{"creation", p.CreationTime, host100.BootTime.Add(10 * time.Second)},
		{"user cpu", p.UserCPU, some(1.5)},
		{"system cpu", p.SystemCPU, some(0.5)},
		{"blkio delay", p.BlkioDelay, some(0.07)},
		{"minflt", p.MinorFaults, some[int64](11)},
		{"majflt", p.MajorFaults, some[int64](3)},
		{"vsize stays bytes", p.VirtualMemory, some[int64](1 << 30)},
		{"stat rss pages", p.StatRSS, some[int64](40960)},
		{"VmRSS kB", p.StatusRSS, some[int64](409600)},
		{"memory usage prefers VmRSS", p.MemoryUsage(), some[int64](409600)},
		{"rss anon", p.RSSAnon, some[int64](102400)},
		{"rss file", p.RSSFile, some[int64](204800)},
		{"rss shmem", p.RSSShmem, some[int64](102400)},
		{"VmHWM", p.PeakRSS, some[int64](524288)},
		{"VmPeak", p.PeakVirtual, some[int64](2097152)},
		{"swap present and zero", p.Swap, some[int64](0)},
		{"threads", p.ThreadCount(), some[int64](1)},
		{"voluntary", p.VoluntarySwitches, some[int64](9)},
		{"involuntary", p.InvoluntarySwitches, some[int64](4)},
		{"rchar", p.ReadChars, some[int64](1)},
		{"wchar", p.WriteChars, some[int64](2)},
		{"syscr", p.ReadSyscalls, some[int64](3)},
		{"syscw", p.WriteSyscalls, some[int64](4)},
		{"read_bytes", p.ReadBytes, some[int64](4096)},
		{"write_bytes", p.WriteBytes, some[int64](8192)},
		{"cancelled", p.CancelledWriteBytes, some[int64](512)},
		{"run delay ns", p.RunDelay, some(0.25)},
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
	p := Convert(in, host100)
	if p.HasIO || p.ReadBytes.OK || p.CancelledWriteBytes.OK {
		t.Error("io readings present although /proc/<pid>/io was not read")
	}
	if p.HasSchedstat || p.RunDelay.OK {
		t.Error("run delay present although schedstat was not read")
	}
	if p.RSSAnon.OK || p.RSSFile.OK || p.RSSShmem.OK {
		t.Error("RssAnon/File/Shmem present although the kernel did not print them")
	}
	if !p.HasStat || !p.UserCPU.OK {
		t.Error("stat readings lost")
	}
}

func TestMemoryUsageFallsBackToStatRSSWithoutVmRSS(t *testing.T) {
	in := fullReading()
	in.ProcStatus.VmRssKb = nil // kernel threads print no VmRSS
	p := Convert(in, Host{ClkTck: 100, PageSize: 65536, BootTime: host100.BootTime})
	if got := p.MemoryUsage(); got != some[int64](10*65536) {
		t.Fatalf("memory usage %v, want stat rss × the host's 64 KiB pages", got)
	}
}

func TestConvertWithoutStatHasNoCreationTime(t *testing.T) {
	in := fullReading()
	in.ProcStat = nil
	p := Convert(in, host100)
	if p.HasStat || !p.CreationTime.IsZero() || p.UserCPU.OK {
		t.Fatalf("stat-derived readings invented: %+v", p)
	}
	if got := p.ThreadCount(); got != some[int64](1) {
		t.Fatalf("threads from status lost: %v", got)
	}
}

func TestExitCPUIsTheRunTimeSplitLikeTheKernel(t *testing.T) {
	rec := &gpotelv1.ExitRecord{StartTimeUnixNano: 1_700_000_000_123_456_789, Stats: &gpotelv1.TaskStatsRecord{
		Pid: 42, UserUs: 30_000, SystemUs: 10_000, CpuRunVirtualNs: 50_000_000,
		ReadBytes: 4096, HiwaterRssKb: 2, Delays: &gpotelv1.TaskDelays{Cpu: &gpotelv1.Delay{TotalNs: 7_000_000}, Blkio: &gpotelv1.Delay{TotalNs: 3_000_000}},
	}}
	p := ConvertExit(rec, false)
	if math.Abs(p.UserCPU.V-0.0375) > 1e-12 || math.Abs(p.SystemCPU.V-0.0125) > 1e-12 {
		t.Errorf("cpu %v/%v, want 0.0375/0.0125 (50 ms split 3:1)", p.UserCPU.V, p.SystemCPU.V)
	}
	if p.CreationTime.UnixNano() != 1_700_000_000_123_456_789 || p.PID != 42 || p.ReadBytes.V != 4096 || p.PeakRSS.V != 2048 {
		t.Errorf("identity or counters: %+v", p)
	}
	if math.Abs(p.RunDelay.V-0.007) > 1e-12 || p.BlkioDelay.OK {
		t.Errorf("run delay %v, blkio %+v: blkio must be absent without delay accounting", p.RunDelay.V, p.BlkioDelay)
	}
	if p = ConvertExit(rec, true); math.Abs(p.BlkioDelay.V-0.003) > 1e-12 {
		t.Errorf("blkio with delay accounting: %+v", p.BlkioDelay)
	}
	if u, s := adjustCPU(1e9, 0, 0); u != 1 || s != 0 {
		t.Errorf("no samples: %v/%v, want all user as the kernel does", u, s)
	}
}

func TestTaskstatsRecordStandsInForIOAndSchedstat(t *testing.T) {
	host := Host{ClkTck: 100, PageSize: 4096, BootTime: time.Unix(1_700_000_000, 0)}
	info := &yagpcc.GpPidProcInfo{Pid: 7, ProcStat: &yagpcc.ProcStat{Starttime: 100}, Taskstats: &gpotelv1.TaskStatsRecord{
		ReadBytes: 8192, WriteChars: 3, Delays: &gpotelv1.TaskDelays{Cpu: &gpotelv1.Delay{TotalNs: 2e9}, Swapin: &gpotelv1.Delay{TotalNs: 1e9}},
	}}
	p := Convert(info, host)
	if !p.HasIO || p.ReadBytes.V != 8192 || p.WriteChars.V != 3 || p.RunDelay.V != 2 {
		t.Errorf("io/run delay from the record: %+v", p)
	}
	if p.Delays[DelaySwapin].OK {
		t.Error("swap-in delay without delay accounting must be absent, not 0")
	}
	host.Delayacct = true
	if p = Convert(info, host); p.Delays[DelaySwapin].V != 1 || p.Delays[DelayIRQ].OK {
		t.Errorf("delays with delay accounting: %+v (irq absent: the record has none)", p.Delays)
	}
	info.ProcIo = &yagpcc.ProcIO{ReadBytes: 1}
	if p = Convert(info, host); p.ReadBytes.V != 1 {
		t.Errorf("/proc io, when read, wins: %v", p.ReadBytes.V)
	}
}
