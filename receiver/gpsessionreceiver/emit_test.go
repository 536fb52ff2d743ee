package gpsessionreceiver

import (
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/gpotel/gpotel/internal/gpsemconv"
	"github.com/gpotel/gpotel/internal/kernelunits"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadata"
)

func kb(v int64) *int64 { return &v }

func testSnapshot(t *testing.T) *snapshot {
	t.Helper()
	boot := time.Unix(1_700_000_000, 0).UTC()
	consts := kernelunits.Host{ClkTck: 100, PageSize: 4096, BootTime: boot}
	started := time.Unix(1_700_000_100, 0)
	long := "select '" + string(make([]byte, 50)) + "'"
	return &snapshot{
		time:            time.Unix(1_700_000_500, 123),
		dialect:         DialectGP7,
		tmID:            1_699_999_999,
		coordinatorHost: "mdw",
		queryMaxLength:  16,
		sessions: []SessionRow{{
			PID: 4000, SessionID: 77, Datname: strp("postgres"), Usename: strp("gpadmin"),
			State: strp("active"), Query: &long, BackendStart: &started, ClientPort: i64p(5555),
			BackendType: strp("client backend"),
		}},
		queries: []hostQuery{
			{host: "mdw", procs: []Backend{{SegmentID: -1, PID: 4000, SessionID: 77, BackendType: "client backend"}}},
			{host: "sdw1", procs: []Backend{{SegmentID: 0, PID: 5000, SessionID: 77}, {SegmentID: 0, PID: 5001, SessionID: 77}}},
			{host: "sdw2", procs: []Backend{{SegmentID: 1, PID: 6000, SessionID: 77}}},
		},
		results: []hostResult{
			{host: "mdw", up: true, consts: consts, infos: []*yagpcc.GpPidProcInfo{{Pid: 4000,
				ProcStat:   &yagpcc.ProcStat{Utime: 250, Stime: 50, Starttime: 1000, Vsize: 1 << 20, Rss: 3},
				ProcStatus: &yagpcc.ProcStatus{VmRssKb: kb(8), Threads: 1, VoluntaryCtxtSwitches: 4},
				ProcIo:     &yagpcc.ProcIO{ReadBytes: 4096},
			}}},
			{host: "sdw1", up: true, consts: consts, infos: []*yagpcc.GpPidProcInfo{
				{Pid: 5000, ProcStat: &yagpcc.ProcStat{Utime: 1, Starttime: 2}},
				{Pid: 5001, ProcStatus: &yagpcc.ProcStatus{Threads: 1}}, // no stat: no identity
			}},
			{host: "sdw2", up: false},
		},
	}
}

func newTestEmitter(t testing.TB, mbc metadata.MetricsBuilderConfig, workers int, opts ...metadata.MetricBuilderOption) *snapshotEmitter {
	t.Helper()
	e, err := newSnapshotEmitter(mbc, receivertest.NewNopSettings(metadata.Type), workers, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func emitTest(t *testing.T) (pmetric.Metrics, emitStats) {
	return newTestEmitter(t, metadata.NewDefaultMetricsBuilderConfig(), 1).emitSnapshot(testSnapshot(t))
}

func resourcesOfKind(md pmetric.Metrics, kind string) []pmetric.ResourceMetrics {
	var out []pmetric.ResourceMetrics
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		if k, ok := rm.Resource().Attributes().Get(gpsemconv.AttrResourceKind); ok && k.Str() == kind {
			out = append(out, rm)
		}
	}
	return out
}

func metricNamed(rm pmetric.ResourceMetrics, name string) (pmetric.Metric, bool) {
	ms := rm.ScopeMetrics().At(0).Metrics()
	for i := 0; i < ms.Len(); i++ {
		if ms.At(i).Name() == name {
			return ms.At(i), true
		}
	}
	return pmetric.Metric{}, false
}

func TestSnapshotHasOneSnapshotResourceWithHostStatus(t *testing.T) {
	md, st := emitTest(t)
	snaps := resourcesOfKind(md, gpsemconv.KindSnapshot)
	if len(snaps) != 1 {
		t.Fatalf("%d snapshot resources", len(snaps))
	}
	attrs := snaps[0].Resource().Attributes().AsRaw()
	if attrs[gpsemconv.AttrDialect] != DialectGP7 || attrs[gpsemconv.AttrTmID] != int64(1_699_999_999) || attrs[gpsemconv.AttrHostName] != "mdw" {
		t.Errorf("snapshot attributes %v", attrs)
	}
	up, _ := metricNamed(snaps[0], gpsemconv.MetricHostUp)
	got := map[string]int64{}
	for i := 0; i < up.Gauge().DataPoints().Len(); i++ {
		dp := up.Gauge().DataPoints().At(i)
		h, _ := dp.Attributes().Get(gpsemconv.AttrHostName)
		got[h.Str()] = dp.IntValue()
	}
	if got["mdw"] != 1 || got["sdw1"] != 1 || got["sdw2"] != 0 || len(got) != 3 {
		t.Errorf("host.up %v", got)
	}
	procs, _ := metricNamed(snaps[0], gpsemconv.MetricHostProcesses)
	if procs.Gauge().DataPoints().Len() != 3 {
		t.Errorf("host.processes has %d points", procs.Gauge().DataPoints().Len())
	}
	if st.answeredHosts != 2 || st.failedHosts != 1 || st.processes != 2 || st.withoutStat != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestEveryDataPointCarriesTheSnapshotTime(t *testing.T) {
	md, _ := emitTest(t)
	want := pcommon.NewTimestampFromTime(time.Unix(1_700_000_500, 123))
	n := 0
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		ms := md.ResourceMetrics().At(i).ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			var dps pmetric.NumberDataPointSlice
			if ms.At(j).Type() == pmetric.MetricTypeSum {
				dps = ms.At(j).Sum().DataPoints()
			} else {
				dps = ms.At(j).Gauge().DataPoints()
			}
			for k := 0; k < dps.Len(); k++ {
				n++
				if dps.At(k).Timestamp() != want {
					t.Fatalf("%s has timestamp %v", ms.At(j).Name(), dps.At(k).Timestamp())
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no data points")
	}
}

func TestProcessResourceIdentityAndSIUnits(t *testing.T) {
	md, _ := emitTest(t)
	procs := resourcesOfKind(md, gpsemconv.KindProcess)
	if len(procs) != 2 {
		t.Fatalf("%d process resources, want 2 (the one without stat has no identity)", len(procs))
	}
	coord := procs[0]
	attrs := coord.Resource().Attributes().AsRaw()
	want := map[string]any{
		gpsemconv.AttrResourceKind: gpsemconv.KindProcess, gpsemconv.AttrTmID: int64(1_699_999_999),
		gpsemconv.AttrHostName: "mdw", gpsemconv.AttrSegmentID: int64(-1), gpsemconv.AttrSessionID: int64(77),
		gpsemconv.AttrProcessPID: int64(4000), gpsemconv.AttrProcessCreationTime: "2023-11-14T22:13:30.000000000Z",
		gpsemconv.AttrBackendType: "client backend", gpsemconv.AttrProcessSystem: false,
	}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("%s = %v, want %v", k, attrs[k], v)
		}
	}
	cpu, ok := metricNamed(coord, gpsemconv.MetricProcessCPUTime)
	if !ok || !cpu.Sum().IsMonotonic() || cpu.Sum().AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
		t.Fatal("process.cpu.time is not a cumulative monotonic sum")
	}
	user := cpu.Sum().DataPoints().At(0)
	if mode, _ := user.Attributes().Get(gpsemconv.AttrCPUMode); mode.Str() != gpsemconv.CPUModeUser || user.DoubleValue() != 2.5 {
		t.Errorf("user cpu %v %v", mode.Str(), user.DoubleValue())
	}
	creation := pcommon.NewTimestampFromTime(time.Unix(1_700_000_010, 0))
	if user.StartTimestamp() != creation {
		t.Errorf("start timestamp %v, want the creation time %v", user.StartTimestamp(), creation)
	}
	rss, _ := metricNamed(coord, gpsemconv.MetricProcessMemoryUsage)
	if rss.Gauge().DataPoints().At(0).IntValue() != 8*1024 {
		t.Errorf("rss %d, want VmRSS × 1024", rss.Gauge().DataPoints().At(0).IntValue())
	}
	if _, ok := metricNamed(coord, gpsemconv.MetricProcessRunDelay); ok {
		t.Error("run delay present without schedstat")
	}
	if _, ok := metricNamed(procs[1], gpsemconv.MetricProcessDiskIO); ok {
		t.Error("disk io present although io was not read")
	}
}

func TestSessionResourceCarriesStateInMetadataOnly(t *testing.T) {
	md, _ := emitTest(t)
	sessions := resourcesOfKind(md, gpsemconv.KindSession)
	if len(sessions) != 1 {
		t.Fatalf("%d session resources", len(sessions))
	}
	attrs := sessions[0].Resource().Attributes().AsRaw()
	if attrs[gpsemconv.AttrSessionID] != int64(77) || attrs[gpsemconv.AttrSessionPID] != int64(4000) ||
		attrs[gpsemconv.AttrDBNamespace] != "postgres" || attrs[gpsemconv.AttrSessionUser] != "gpadmin" || attrs[gpsemconv.AttrSessionSystem] != false {
		t.Errorf("session attributes %v", attrs)
	}
	if _, ok := attrs[gpsemconv.MetaState]; ok {
		t.Error("volatile state leaked into the resource")
	}
	info, ok := metricNamed(sessions[0], gpsemconv.MetricSessionInfo)
	if !ok || info.Gauge().DataPoints().At(0).IntValue() != 1 || info.Gauge().DataPoints().At(0).Attributes().Len() != 0 {
		t.Fatal("gpotel.session.info is not a bare 1")
	}
	meta := info.Metadata().AsRaw()
	if meta[gpsemconv.MetaState] != "active" || meta[gpsemconv.MetaClientPort] != int64(5555) ||
		meta[gpsemconv.MetaBackendStart] != "2023-11-14T22:15:00Z" || meta[gpsemconv.MetaQueryTruncated] != true {
		t.Errorf("metadata %v", meta)
	}
	if q := meta[gpsemconv.MetaQuery].(string); len(q) != 16 {
		t.Errorf("query %q not cut to 16 bytes", q)
	}
	if _, ok := meta[gpsemconv.MetaXactStart]; ok {
		t.Error("a NULL xact_start is present")
	}
}

func TestSplitProcessesKeepsOrderAndBalances(t *testing.T) {
	results := []hostResult{
		{infos: make([]*yagpcc.GpPidProcInfo, 5)},
		{infos: nil},
		{infos: make([]*yagpcc.GpPidProcInfo, 2)},
	}
	got := splitProcesses(results, 3)
	want := [][]infoSpan{{{0, 0, 3}}, {{0, 3, 5}, {2, 0, 1}}, {{2, 1, 2}}}
	if len(got) != len(want) {
		t.Fatalf("stretches %v, want %v", got, want)
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("stretch %d: %v, want %v", i, got[i], want[i])
		}
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("stretch %d: %v, want %v", i, got[i], want[i])
			}
		}
	}
	if s := splitProcesses(results, 100); len(s) != 7 {
		t.Errorf("7 processes over 100 workers: %d stretches, want one each", len(s))
	}
	if s := splitProcesses(nil, 4); s != nil {
		t.Errorf("no processes: %v", s)
	}
}

func TestParallelEmissionWritesTheSameSnapshot(t *testing.T) {
	one, _ := newTestEmitter(t, createDefaultConfig().MetricsBuilderConfig, 1).emitSnapshot(testSnapshot(t))
	many, st := newTestEmitter(t, createDefaultConfig().MetricsBuilderConfig, 4).emitSnapshot(testSnapshot(t))
	if st.processes != 2 || one.ResourceMetrics().Len() != many.ResourceMetrics().Len() {
		t.Fatalf("%d vs %d resources", one.ResourceMetrics().Len(), many.ResourceMetrics().Len())
	}
	for i := 0; i < one.ResourceMetrics().Len(); i++ {
		a, b := one.ResourceMetrics().At(i), many.ResourceMetrics().At(i)
		if !a.Resource().Attributes().Equal(b.Resource().Attributes()) {
			t.Errorf("resource %d differs: %v vs %v", i, a.Resource().Attributes().AsRaw(), b.Resource().Attributes().AsRaw())
		}
		if a.ScopeMetrics().At(0).Metrics().Len() != b.ScopeMetrics().At(0).Metrics().Len() {
			t.Errorf("resource %d: metric counts differ", i)
		}
	}
}

func TestSessionInfoListsEveryBackendTheHostsWereAskedAbout(t *testing.T) {
	md, _ := emitTest(t)
	sessions := resourcesOfKind(md, gpsemconv.KindSession)
	if len(sessions) != 1 {
		t.Fatalf("%d session resources", len(sessions))
	}
	info, ok := metricNamed(sessions[0], gpsemconv.MetricSessionInfo)
	if !ok {
		t.Fatal("no gpotel.session.info")
	}
	v, ok := info.Metadata().Get(gpsemconv.MetaBackends)
	if !ok {
		t.Fatal("no backends in gpotel.session.info's metadata")
	}
	var got []string
	for i := 0; i < v.Slice().Len(); i++ {
		ref, err := gpsemconv.ParseBackendRef(v.Slice().At(i).Str())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ref.String())
	}
	// Every asked process, answered or not (sdw2 did not answer; 5001 had no stat): the exporter asks them itself.
	want := "[mdw/-1/4000 sdw1/0/5000 sdw1/0/5001 sdw2/1/6000]"
	if fmt.Sprint(got) != want {
		t.Fatalf("backends %v, want %s", got, want)
	}
}
