package gpsessionreceiver

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/filter"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"

	"github.com/gpotel/gpotel/internal/gpsemconv"
	"github.com/gpotel/gpotel/internal/kernelunits"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadata"
	"github.com/gpotel/gpotel/segmentagent"
	"github.com/gpotel/gpotel/segmentagent/procfixture"
)

// mixedSnapshot covers what the agents can answer: every file read, an old
// kernel (no RssAnon/RssFile/RssShmem, VmSwap or schedstat), io or status
// unreadable, status without Threads, no stat (dropped), a host that failed
// after one batch, a host that never answered, system processes with and
// without a backend type, sessions with NULL database and user.
func mixedSnapshot() *snapshot {
	boot := time.Unix(1_700_000_000, 0).UTC()
	consts := kernelunits.Host{ClkTck: 100, PageSize: 4096, BootTime: boot, Delayacct: true}
	slow := kernelunits.Host{ClkTck: 250, PageSize: 16384, BootTime: boot.Add(time.Hour)}
	full := func(pid int64) *yagpcc.GpPidProcInfo {
		return &yagpcc.GpPidProcInfo{Pid: pid,
			ProcStat: &yagpcc.ProcStat{Utime: 250 + pid%7, Stime: 50, Starttime: 1000 + pid, Vsize: 1 << 30, Rss: 3000,
				Majflt: 2, Minflt: 9000 + pid, NumThreads: 1, DelayacctBlkioTicks: 17},
			ProcStatus: &yagpcc.ProcStatus{VmRssKb: kb(12000), RssAnonKb: kb(4000), RssFileKb: kb(3000), RssShmemKb: kb(5000),
				VmHwmKb: kb(15000), VmPeakKb: kb(1 << 20), VmSwapKb: kb(0), Threads: 1, VoluntaryCtxtSwitches: 400 + pid, NonvoluntaryCtxtSwitches: 33},
			ProcIo:        &yagpcc.ProcIO{Rchar: 1 << 20, Wchar: 4096, Syscr: 300, Syscw: 20, ReadBytes: 8192, WriteBytes: 4096, CancelledWriteBytes: 512},
			ProcSchedstat: &yagpcc.ProcSchedstat{RunDelayNs: 123_456_789 + pid},
			// Every delay type, so the writer's point buffer meets its largest enum.
			Taskstats: &gpotelv1.TaskStatsRecord{Delays: &gpotelv1.TaskDelays{
				Swapin: &gpotelv1.Delay{TotalNs: 1e6}, Freepages: &gpotelv1.Delay{TotalNs: 2e6}, Thrashing: &gpotelv1.Delay{TotalNs: 3e6},
				Compact: &gpotelv1.Delay{TotalNs: 4e6}, Wpcopy: &gpotelv1.Delay{TotalNs: 5e6}, Irq: &gpotelv1.Delay{TotalNs: 6e6 + uint64(pid)}}},
		}
	}
	oldKernel := func(pid int64) *yagpcc.GpPidProcInfo {
		info := full(pid)
		info.ProcStatus.RssAnonKb, info.ProcStatus.RssFileKb, info.ProcStatus.RssShmemKb, info.ProcStatus.VmSwapKb = nil, nil, nil, nil
		info.ProcSchedstat = nil
		return info
	}
	noIO := full(5002)
	noIO.ProcIo = nil
	statOnly := full(5003)
	statOnly.ProcStatus, statOnly.ProcIo, statOnly.ProcSchedstat = nil, nil, nil
	noThreads := full(6001)
	noThreads.ProcStatus.Threads = 0
	noThreads.ProcStatus.VmRssKb = nil
	noStat := full(6002)
	noStat.ProcStat = nil

	return &snapshot{
		time:            time.Unix(1_700_000_500, 123),
		dialect:         DialectGP6,
		tmID:            1_699_999_999,
		coordinatorHost: "mdw",
		queryMaxLength:  10,
		sessions: []SessionRow{
			{PID: 4000, SessionID: 77, Datname: strp("postgres"), Usename: strp("gpadmin"), State: strp("active"),
				Query: strp("select * from lineitem"), Waiting: boolp(false)},
			{PID: 4001, SessionID: 78, State: strp("idle")},
		},
		queries: []hostQuery{
			{host: "mdw", procs: []Backend{{SegmentID: -1, PID: 4000, SessionID: 77, BackendType: "client backend"},
				{SegmentID: -1, PID: 4001, SessionID: 78, BackendType: "client backend"}, {SegmentID: -1, PID: 4002, BackendType: "checkpointer"}}},
			{host: "sdw1", procs: []Backend{{SegmentID: 0, PID: 5000, SessionID: 77}, {SegmentID: 0, PID: 5001, SessionID: 78},
				{SegmentID: 1, PID: 5002, SessionID: 77}, {SegmentID: 1, PID: 5003}}},
			{host: "sdw2", procs: []Backend{{SegmentID: 2, PID: 6000, SessionID: 77}, {SegmentID: 2, PID: 6001, SessionID: 78},
				{SegmentID: 3, PID: 6002, SessionID: 77}, {SegmentID: 3, PID: 6003, SessionID: 78}}},
			{host: "sdw3", procs: []Backend{{SegmentID: 4, PID: 7000, SessionID: 77}}},
		},
		results: []hostResult{
			{host: "mdw", up: true, consts: consts, infos: []*yagpcc.GpPidProcInfo{full(4000), oldKernel(4001), full(4002)}},
			{host: "sdw1", up: true, consts: consts, infos: []*yagpcc.GpPidProcInfo{oldKernel(5000), full(5001), noIO, statOnly}},
			// answered its first batch, then failed: host.up 0 with processes
			{host: "sdw2", up: false, consts: slow, infos: []*yagpcc.GpPidProcInfo{full(6000), noThreads, noStat}},
			{host: "sdw3", up: false},
		},
	}
}

func boolp(v bool) *bool { return &v }

// agentSnapshot is read by a real agent service from a fixture procfs: three
// hosts, every third process from an old kernel, and some processes whose
// io, schedstat or status file is gone.
func agentSnapshot(t *testing.T) *snapshot {
	t.Helper()
	root := procfixture.TempRoot(t)
	procs := make([]procfixture.Process, 40)
	for i := range procs {
		pid := 20_000 + i
		procs[i] = procfixture.Process{PID: pid, UID: os.Getuid(), Comm: "postgres", OldKernel: i%3 == 0,
			Cmdline: fmt.Sprintf("postgres:  5432, gpadmin tpch 10.0.0.1(%d) con%d seg0 cmd3 SELECT", 40000+i, 100+i%4)}
	}
	if err := procfixture.WriteProcesses(root, procs); err != nil {
		t.Fatal(err)
	}
	for i, gone := range map[int]string{5: "io", 7: "schedstat", 11: "status", 13: "io", 17: "stat"} {
		if err := os.Remove(filepath.Join(root, strconv.Itoa(20_000+i), gone)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := segmentagent.NewDefaultServiceConfig()
	cfg.ProcRoot = root
	cfg.AllowedUsers = []string{strconv.Itoa(os.Getuid())}
	svc, err := segmentagent.NewService(cfg, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &snapshot{time: time.Unix(1_795_300_000, 987654321), dialect: DialectGP7, tmID: 1_795_246_400, coordinatorHost: "mdw", queryMaxLength: 4096}
	for sess := int64(0); sess < 4; sess++ {
		s.sessions = append(s.sessions, SessionRow{PID: 30_000 + sess, SessionID: 100 + sess, Datname: strp("tpch"), Usename: strp("gpadmin"), Query: strp("SELECT 1")})
	}
	for h := 0; h < 3; h++ {
		q := hostQuery{host: fmt.Sprintf("sdw%d", h+1)}
		req := &yagpcc.GetPidProcInfoReq{}
		for i := range procs {
			b := Backend{SegmentID: int64(h), PID: int64(procs[i].PID), SessionID: 100 + int64(i%4), BackendType: "client backend"}
			if i%10 == 9 {
				b.SessionID, b.BackendType = 0, "" // a system process on a server without backend_type
			}
			q.procs = append(q.procs, b)
			req.SegmentProcess = append(req.SegmentProcess, &yagpcc.SegmentProcess{GpSegmentId: b.SegmentID, SessId: b.SessionID, Pid: b.PID})
		}
		resp, err := svc.GetPidProcStat(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		consts, err := kernelunits.HostFromProto(resp.GetHost())
		if err != nil {
			t.Fatal(err)
		}
		s.queries = append(s.queries, q)
		s.results = append(s.results, hostResult{host: q.host, asked: len(q.procs), up: true, consts: consts, infos: resp.GetPidProcData()})
	}
	return s
}

// equivalenceConfigs are the mdatagen switches the direct writer must honour
// exactly as the builder does.
func equivalenceConfigs() map[string]metadata.MetricsBuilderConfig {
	configs := map[string]metadata.MetricsBuilderConfig{}
	configs["default"] = metadata.NewDefaultMetricsBuilderConfig()

	c := metadata.NewDefaultMetricsBuilderConfig()
	c.Metrics.ProcessCPUTime.Enabled = false
	c.Metrics.GpotelProcessMemoryRss.Enabled = false
	c.Metrics.GpotelProcessCPURunDelay.Enabled = false
	c.Metrics.ProcessThreadCount.Enabled = false
	configs["some metrics disabled"] = c

	c = metadata.NewDefaultMetricsBuilderConfig()
	c.Metrics.ProcessCPUTime.EnabledAttributes = nil // sum
	c.Metrics.GpotelProcessMemoryRss.EnabledAttributes = nil
	c.Metrics.GpotelProcessMemoryRss.AggregationStrategy = metadata.AggregationStrategyAvg
	c.Metrics.ProcessPagingFaults.EnabledAttributes = nil
	c.Metrics.ProcessPagingFaults.AggregationStrategy = metadata.AggregationStrategyMin
	c.Metrics.ProcessContextSwitches.EnabledAttributes = nil
	c.Metrics.ProcessContextSwitches.AggregationStrategy = metadata.AggregationStrategyMax
	c.Metrics.ProcessDiskIo.EnabledAttributes = nil
	c.Metrics.ProcessDiskIo.AggregationStrategy = metadata.AggregationStrategyAvg
	c.Metrics.GpotelProcessIoChars.EnabledAttributes = nil
	c.Metrics.GpotelProcessIoSyscalls.EnabledAttributes = nil
	c.Metrics.GpotelProcessIoSyscalls.AggregationStrategy = "" // not valid in a config; the builder then keeps points apart
	configs["data-point attributes off"] = c

	for _, agg := range []string{metadata.AggregationStrategyAvg, metadata.AggregationStrategyMin, metadata.AggregationStrategyMax} {
		c = metadata.NewDefaultMetricsBuilderConfig()
		c.Metrics.ProcessCPUTime.EnabledAttributes = nil
		c.Metrics.ProcessCPUTime.AggregationStrategy = agg
		configs["cpu.mode off, "+agg] = c
	}

	c = metadata.NewDefaultMetricsBuilderConfig()
	c.ResourceAttributes.ProcessCreationTime.Enabled = false
	c.ResourceAttributes.GpotelBackendType.Enabled = false
	c.ResourceAttributes.HostName.Enabled = false
	c.ResourceAttributes.GpotelSegmentID.Enabled = false
	c.ResourceAttributes.GpotelProcessSystem.Enabled = false
	configs["resource attributes off"] = c

	c = metadata.NewDefaultMetricsBuilderConfig()
	c.ResourceAttributes.HostName.MetricsExclude = []filter.Config{{Strict: "sdw2"}}
	c.ResourceAttributes.GpotelBackendType.MetricsInclude = []filter.Config{{Regex: "^client"}}
	c.ResourceAttributes.GpotelSessionID.MetricsExclude = []filter.Config{{Strict: "101"}}
	configs["resource attribute filters"] = c

	c = metadata.NewDefaultMetricsBuilderConfig()
	m := &c.Metrics
	for _, on := range []*bool{&m.ProcessCPUTime.Enabled, &m.GpotelProcessCPURunDelay.Enabled, &m.GpotelProcessDiskDelay.Enabled,
		&m.ProcessPagingFaults.Enabled, &m.ProcessContextSwitches.Enabled, &m.ProcessMemoryUsage.Enabled, &m.ProcessMemoryVirtual.Enabled,
		&m.GpotelProcessMemoryRss.Enabled, &m.GpotelProcessMemoryPeak.Enabled, &m.GpotelProcessMemoryVirtualPeak.Enabled,
		&m.GpotelProcessMemorySwap.Enabled, &m.ProcessThreadCount.Enabled, &m.ProcessDiskIo.Enabled,
		&m.GpotelProcessDiskCancelledWrite.Enabled, &m.GpotelProcessIoChars.Enabled, &m.GpotelProcessIoSyscalls.Enabled, &m.GpotelProcessDelay.Enabled} {
		*on = false
	}
	configs["every process metric disabled"] = c
	return configs
}

// TestDirectProcessWriterMatchesTheBuilder: the pdata written by the direct
// process writer is byte for byte the pdata the MetricsBuilder path wrote,
// for every snapshot shape, config switch and worker count.
func TestDirectProcessWriterMatchesTheBuilder(t *testing.T) {
	snapshots := map[string]*snapshot{"mixed": mixedSnapshot(), "agent": agentSnapshot(t)}
	start := metadata.WithStartTime(pcommon.NewTimestampFromTime(time.Unix(1_700_000_321, 0)))
	set := receivertest.NewNopSettings(metadata.Type)
	set.BuildInfo.Version = "v9.9.9-test"
	for cfgName, mbc := range equivalenceConfigs() {
		for snapName, snap := range snapshots {
			for _, workers := range []int{1, 3} {
				t.Run(fmt.Sprintf("%s/%s/workers=%d", cfgName, snapName, workers), func(t *testing.T) {
					mbs := make([]*metadata.MetricsBuilder, workers)
					for i := range mbs {
						mbs[i] = metadata.NewMetricsBuilder(mbc, set, start)
					}
					want, wantStats := builderEmitSnapshot(mbs, snap)
					e, err := newSnapshotEmitter(mbc, set, workers, start)
					if err != nil {
						t.Fatal(err)
					}
					got, gotStats := e.emitSnapshot(snap)
					if gotStats != wantStats {
						t.Errorf("stats %+v, builder %+v", gotStats, wantStats)
					}
					requireSamePdata(t, got, want)
					procs := len(resourcesOfKind(want, gpsemconv.KindProcess))
					if cfgName == "every process metric disabled" {
						if procs != 0 || got.ResourceMetrics().Len() != 1+len(snap.sessions) {
							t.Fatalf("%d process resources with every process metric off", procs)
						}
					} else if procs == 0 && cfgName != "resource attributes off" {
						t.Fatal("no process resource: the case checks nothing")
					}
				})
			}
		}
	}
}

// requireSamePdata compares the OTLP JSON of two snapshots, order included,
// and names the first resource that differs.
func requireSamePdata(t *testing.T, got, want pmetric.Metrics) {
	t.Helper()
	var m pmetric.JSONMarshaler
	gotJSON, err := m.MarshalMetrics(got)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, err := m.MarshalMetrics(want)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(gotJSON, wantJSON) {
		return
	}
	if got.ResourceMetrics().Len() != want.ResourceMetrics().Len() {
		t.Fatalf("%d resources, builder wrote %d", got.ResourceMetrics().Len(), want.ResourceMetrics().Len())
	}
	for i := 0; i < want.ResourceMetrics().Len(); i++ {
		g, w := resourceJSON(t, got.ResourceMetrics().At(i)), resourceJSON(t, want.ResourceMetrics().At(i))
		if !bytes.Equal(g, w) {
			t.Fatalf("resource %d differs:\ngot     %s\nbuilder %s", i, g, w)
		}
	}
	t.Fatal("the snapshots differ outside their resources")
}

func resourceJSON(t *testing.T, rm pmetric.ResourceMetrics) []byte {
	md := pmetric.NewMetrics()
	rm.CopyTo(md.ResourceMetrics().AppendEmpty())
	var m pmetric.JSONMarshaler
	b, err := m.MarshalMetrics(md)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The cases above only prove something if their switches change the output.
func TestEquivalenceCasesExerciseTheSwitches(t *testing.T) {
	snap := mixedSnapshot()
	md, _ := newTestEmitter(t, equivalenceConfigs()["data-point attributes off"], 1).emitSnapshot(snap)
	coord := resourcesOfKind(md, gpsemconv.KindProcess)[0]
	cpu, _ := metricNamed(coord, gpsemconv.MetricProcessCPUTime)
	if dps := cpu.Sum().DataPoints(); dps.Len() != 1 || dps.At(0).Attributes().Len() != 0 || dps.At(0).DoubleValue() != (250+4000%7+50)/100.0 {
		t.Errorf("cpu.mode off: %d points, first %v", dps.Len(), dps.At(0).DoubleValue())
	}
	rss, _ := metricNamed(coord, gpsemconv.MetricProcessMemoryRSS)
	if v := rss.Gauge().DataPoints().At(0).IntValue(); v != (4000+3000+5000)*1024/3 {
		t.Errorf("rss avg %d", v)
	}
	syscalls, _ := metricNamed(coord, gpsemconv.MetricProcessIOSyscalls)
	if syscalls.Sum().DataPoints().Len() != 2 {
		t.Errorf("unknown strategy merged io.syscalls into %d points", syscalls.Sum().DataPoints().Len())
	}

	md, _ = newTestEmitter(t, equivalenceConfigs()["resource attribute filters"], 1).emitSnapshot(snap)
	for _, rm := range resourcesOfKind(md, gpsemconv.KindProcess) {
		attrs := rm.Resource().Attributes().AsRaw()
		if attrs[gpsemconv.AttrHostName] == "sdw2" || attrs[gpsemconv.AttrSessionID] == int64(101) {
			t.Errorf("excluded process written: %v", attrs)
		}
		if bt, ok := attrs[gpsemconv.AttrBackendType]; ok && bt != "client backend" {
			t.Errorf("process outside the include filter written: %v", attrs)
		}
	}
	if n := len(resourcesOfKind(md, gpsemconv.KindProcess)); n != 6 {
		t.Errorf("%d processes pass the filters, want 6 (sdw1's four, mdw's two clients)", n)
	}
}
