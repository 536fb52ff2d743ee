// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/filter"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/kernelunits"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/sparse"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadata"
)

func kb(v int64) *int64 { return &v }

// testStart is when the test receivers started: the closing batch's
// points' StartTimestamp.
var testStart = time.Unix(1_699_999_000, 0).UTC()

// emission is a scrape's worth of input to the emitter: what the hosts
// answered (per host query) and the closing snapshot.
type emission struct {
	snap    *scrapeResult
	answers [][]*yagpcc.GpPidProcInfo // per host query; nil for a host that did not answer
	consts  kernelunits.Host
}

func testEmission(t *testing.T) emission {
	t.Helper()
	boot := time.Unix(1_700_000_000, 0).UTC()
	started := time.Unix(1_700_000_100, 0)
	long := "select '" + string(make([]byte, 50)) + "'"
	return emission{
		consts: kernelunits.Host{ClkTck: 100, PageSize: 4096, BootTime: boot, Delayacct: true}, // delay accounting on: the golden file holds the block I/O wait
		snap: &scrapeResult{
			time:            time.Unix(1_700_000_500, 123),
			dialect:         dialect.GP7,
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
			results: []hostResult{{host: "mdw", up: true, cpus: 8}, {host: "sdw1", up: true, cpus: 64}, {host: "sdw2", up: false}},
		},
		answers: [][]*yagpcc.GpPidProcInfo{
			{{Pid: 4000,
				ProcStat:   &yagpcc.ProcStat{Utime: 250, Stime: 50, Starttime: 1000, Vsize: 1 << 20, Rss: 3},
				ProcStatus: &yagpcc.ProcStatus{VmRssKb: kb(8), Threads: 1, VoluntaryCtxtSwitches: 4},
				ProcIo:     &yagpcc.ProcIO{ReadBytes: 4096},
			}},
			{
				{Pid: 5000, ProcStat: &yagpcc.ProcStat{Utime: 1, Starttime: 2}, CommandCount: i64p(9)},
				{Pid: 5001, ProcStatus: &yagpcc.ProcStatus{Threads: 1}}, // no stat: no identity
			},
			nil,
		},
	}
}

func newTestEmitter(t testing.TB, mbc metadata.MetricsBuilderConfig) *snapshotEmitter {
	t.Helper()
	e, err := newSnapshotEmitter(mbc, receivertest.NewNopSettings(metadata.Type), testStart)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// emit runs the emission as a scrape does: one process batch per answer,
// then the closing batch. It returns them joined, closing batch first.
func (em emission) emit(t testing.TB, e *snapshotEmitter) (pmetric.Metrics, emitStats) {
	t.Helper()
	sink := new(consumertest.MetricsSink)
	return em.emitThrough(t, e, sparse.NewSender(e.procs, sink, false), sink)
}

// emitThrough is emit through a sender kept from scrape to scrape, which
// sends into sink.
func (em emission) emitThrough(t testing.TB, e *snapshotEmitter, s *sparse.Sender, sink *consumertest.MetricsSink) (pmetric.Metrics, emitStats) {
	t.Helper()
	sink.Reset()
	outgoing := s.Snapshot(em.snap.time, em.snap.tmID)
	for i, infos := range em.answers {
		if infos == nil {
			continue
		}
		byPID := map[int64]*Backend{}
		for j := range em.snap.queries[i].procs {
			byPID[em.snap.queries[i].procs[j].PID] = &em.snap.queries[i].procs[j]
		}
		sent, withoutStat, err := e.emitAnswer(context.Background(), outgoing,
			&answerWrite{host: em.snap.queries[i].host, consts: em.consts, infos: infos, byPID: byPID})
		if err != nil {
			t.Fatal(err)
		}
		em.snap.results[i].written, em.snap.results[i].withoutStat = sent.Written, withoutStat
	}
	md, st := e.emitSnapshot(em.snap, outgoing)
	for _, b := range sink.AllMetrics() {
		b.ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
	}
	return md, st
}

func emitTest(t *testing.T) (pmetric.Metrics, emitStats) {
	return testEmission(t).emit(t, newTestEmitter(t, metadata.NewDefaultMetricsBuilderConfig()))
}

func resourcesOfKind(md pmetric.Metrics, kind pipeline.ResourceKind) []pmetric.ResourceMetrics {
	var out []pmetric.ResourceMetrics
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		if k, ok := rm.Resource().Attributes().Get(pipeline.AttrResourceKind); ok && k.Str() == kind.String() {
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
	snaps := resourcesOfKind(md, pipeline.KindSnapshot)
	if len(snaps) != 1 {
		t.Fatalf("%d snapshot resources", len(snaps))
	}
	attrs := snaps[0].Resource().Attributes().AsRaw()
	if attrs[pipeline.AttrDialect] != string(dialect.GP7) || attrs[pipeline.AttrTmID] != int64(1_699_999_999) || attrs[pipeline.AttrHostName] != "mdw" {
		t.Errorf("snapshot attributes %v", attrs)
	}
	up, _ := metricNamed(snaps[0], pipeline.MetricHostUp)
	got := map[string]int64{}
	for i := 0; i < up.Gauge().DataPoints().Len(); i++ {
		dp := up.Gauge().DataPoints().At(i)
		h, _ := dp.Attributes().Get(pipeline.AttrHostName)
		got[h.Str()] = dp.IntValue()
	}
	if got["mdw"] != 1 || got["sdw1"] != 1 || got["sdw2"] != 0 || len(got) != 3 {
		t.Errorf("host.up %v", got)
	}
	procs, _ := metricNamed(snaps[0], pipeline.MetricHostProcesses)
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

// pointsOf returns the points of a process metric by pid, in order.
func pointsOf(t *testing.T, rm pmetric.ResourceMetrics, name string) map[int64][]pmetric.NumberDataPoint {
	t.Helper()
	m, ok := metricNamed(rm, name)
	if !ok {
		return nil
	}
	var dps pmetric.NumberDataPointSlice
	if m.Type() == pmetric.MetricTypeSum {
		dps = m.Sum().DataPoints()
	} else {
		dps = m.Gauge().DataPoints()
	}
	out := map[int64][]pmetric.NumberDataPoint{}
	for i := 0; i < dps.Len(); i++ {
		pid, ok := dps.At(i).Attributes().Get(pipeline.AttrProcessPID)
		if !ok {
			t.Fatalf("%s point %d has no %s", name, i, pipeline.AttrProcessPID)
		}
		out[pid.Int()] = append(out[pid.Int()], dps.At(i))
	}
	return out
}

func TestProcessResourcePerHostAndSessionWithIdentityOnPoints(t *testing.T) {
	md, _ := emitTest(t)
	procs := resourcesOfKind(md, pipeline.KindProcess)
	if len(procs) != 2 {
		t.Fatalf("%d process resources, want 2 (session 77 on mdw and on sdw1)", len(procs))
	}
	var coord pmetric.ResourceMetrics
	for _, rm := range procs {
		if h, _ := rm.Resource().Attributes().Get(pipeline.AttrHostName); h.Str() == "mdw" {
			coord = rm
		}
	}
	want := map[string]any{
		pipeline.AttrResourceKind: pipeline.KindProcess.String(), pipeline.AttrTmID: int64(1_699_999_999),
		pipeline.AttrHostName: "mdw", pipeline.AttrSessionID: int64(77),
	}
	if got := coord.Resource().Attributes().AsRaw(); len(got) != len(want) {
		t.Errorf("resource attributes %v, want exactly %v", got, want)
	}
	for k, v := range want {
		if got := coord.Resource().Attributes().AsRaw()[k]; got != v {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
	creation := pcommon.NewTimestampFromTime(time.Unix(1_700_000_010, 0))
	info := pointsOf(t, coord, pipeline.MetricProcessInfo)[4000]
	if len(info) != 1 || info[0].IntValue() != 1 || info[0].StartTimestamp() != creation {
		t.Fatalf("gpotel.process.info of pid 4000: %d points", len(info))
	}
	wantInfo := map[string]any{pipeline.AttrProcessPID: int64(4000), pipeline.AttrSegmentID: int64(-1),
		pipeline.AttrBackendType: "client backend", pipeline.AttrProcessSystem: false}
	for k, v := range wantInfo {
		if got := info[0].Attributes().AsRaw()[k]; got != v {
			t.Errorf("info %s = %v, want %v", k, got, v)
		}
	}
	cpu, ok := metricNamed(coord, pipeline.MetricProcessCPUTime)
	if !ok || !cpu.Sum().IsMonotonic() || cpu.Sum().AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
		t.Fatal("process.cpu.time is not a cumulative monotonic sum")
	}
	user := pointsOf(t, coord, pipeline.MetricProcessCPUTime)[4000][0]
	if mode, _ := user.Attributes().Get(pipeline.AttrCPUMode); mode.Str() != pipeline.CPUModeUser || user.DoubleValue() != 2.5 || user.Attributes().Len() != 2 {
		t.Errorf("user cpu %v %v, attributes %v", mode.Str(), user.DoubleValue(), user.Attributes().AsRaw())
	}
	if user.StartTimestamp() != creation {
		t.Errorf("start timestamp %v, want the creation time %v", user.StartTimestamp(), creation)
	}
	rss := pointsOf(t, coord, pipeline.MetricProcessMemoryUsage)[4000][0]
	if rss.IntValue() != 8*1024 || rss.StartTimestamp() != creation {
		t.Errorf("rss %d (start %v), want VmRSS × 1024 from the creation time", rss.IntValue(), rss.StartTimestamp())
	}
	if _, ok := metricNamed(coord, pipeline.MetricProcessRunDelay); ok {
		t.Error("run delay present without schedstat")
	}
	for _, rm := range procs {
		if h, _ := rm.Resource().Attributes().Get(pipeline.AttrHostName); h.Str() == "sdw1" {
			if _, ok := metricNamed(rm, pipeline.MetricProcessDiskIO); ok {
				t.Error("disk io present although io was not read")
			}
			if pids := pointsOf(t, rm, pipeline.MetricProcessInfo); len(pids) != 1 || pids[5000] == nil {
				t.Errorf("sdw1 lists %v, want only pid 5000 (5001 has no stat)", pids)
			}
		}
	}
}

func TestProcessesOfOneSessionShareAResourceInOneOrder(t *testing.T) {
	em := testEmission(t)
	em.snap.queries[1].procs[1].SessionID = 78 // 5001 moves to another session
	em.snap.queries[1].procs = append(em.snap.queries[1].procs, Backend{SegmentID: 0, PID: 5002, SessionID: 77})
	em.answers[1] = []*yagpcc.GpPidProcInfo{
		{Pid: 5002, ProcStat: &yagpcc.ProcStat{Utime: 7, Starttime: 3}, ProcIo: &yagpcc.ProcIO{ReadBytes: 1}},
		{Pid: 5001, ProcStat: &yagpcc.ProcStat{Utime: 5, Starttime: 4}},
		{Pid: 5000, ProcStat: &yagpcc.ProcStat{Utime: 1, Starttime: 2}},
	}
	md, _ := em.emit(t, newTestEmitter(t, metadata.NewDefaultMetricsBuilderConfig()))
	var sdw1 []pmetric.ResourceMetrics
	for _, rm := range resourcesOfKind(md, pipeline.KindProcess) {
		if h, _ := rm.Resource().Attributes().Get(pipeline.AttrHostName); h.Str() == "sdw1" {
			sdw1 = append(sdw1, rm)
		}
	}
	if len(sdw1) != 2 {
		t.Fatalf("%d process resources on sdw1, want one per session", len(sdw1))
	}
	for _, rm := range sdw1 {
		session, _ := rm.Resource().Attributes().Get(pipeline.AttrSessionID)
		if session.Int() != 77 {
			continue
		}
		var order []int64
		info, _ := metricNamed(rm, pipeline.MetricProcessInfo)
		for i := 0; i < info.Gauge().DataPoints().Len(); i++ {
			pid, _ := info.Gauge().DataPoints().At(i).Attributes().Get(pipeline.AttrProcessPID)
			order = append(order, pid.Int())
		}
		if len(order) != 2 || order[0] != 5002 || order[1] != 5000 {
			t.Fatalf("session 77 on sdw1 lists %v, want [5002 5000] (answer order)", order)
		}
		cpu, _ := metricNamed(rm, pipeline.MetricProcessCPUTime)
		for i, want := range []int64{5002, 5002, 5000, 5000} {
			pid, _ := cpu.Sum().DataPoints().At(i).Attributes().Get(pipeline.AttrProcessPID)
			if pid.Int() != want {
				t.Errorf("cpu point %d is pid %d, want %d (the info order, a process's points together)", i, pid.Int(), want)
			}
		}
		if io := pointsOf(t, rm, pipeline.MetricProcessDiskIO); len(io) != 1 || io[5002] == nil {
			t.Errorf("disk io points %v, want only pid 5002's (5000 has no io)", io)
		}
	}
}

func TestAttributeSwitchedOffMergesAProcessPointsOnly(t *testing.T) {
	mbc := metadata.NewDefaultMetricsBuilderConfig()
	mbc.Metrics.ProcessCPUTime.EnabledAttributes = []metadata.ProcessCPUTimeMetricAttributeKey{metadata.ProcessCPUTimeMetricAttributeKeyProcessPid}
	md, _ := testEmission(t).emit(t, newTestEmitter(t, mbc))
	for _, rm := range resourcesOfKind(md, pipeline.KindProcess) {
		for pid, pts := range pointsOf(t, rm, pipeline.MetricProcessCPUTime) {
			if len(pts) != 1 || pts[0].Attributes().Len() != 1 {
				t.Errorf("pid %d: %d cpu points, want one without cpu.mode", pid, len(pts))
			}
			if pid == 4000 && pts[0].DoubleValue() != 3 {
				t.Errorf("pid 4000 cpu %v, want user+system = 3", pts[0].DoubleValue())
			}
		}
	}
}

func TestResourceFilterDropsAWholeProcessResource(t *testing.T) {
	mbc := metadata.NewDefaultMetricsBuilderConfig()
	mbc.ResourceAttributes.HostName.MetricsExclude = []filter.Config{{Strict: "sdw1"}}
	md, st := testEmission(t).emit(t, newTestEmitter(t, mbc))
	for _, rm := range resourcesOfKind(md, pipeline.KindProcess) {
		if h, _ := rm.Resource().Attributes().Get(pipeline.AttrHostName); h.Str() == "sdw1" {
			t.Error("sdw1's process resource was written although excluded")
		}
	}
	if st.processes != 1 {
		t.Errorf("%d processes counted as written, want 1", st.processes)
	}
}

func TestSessionResourceCarriesStateInMetadataOnly(t *testing.T) {
	md, _ := emitTest(t)
	sessions := resourcesOfKind(md, pipeline.KindSession)
	if len(sessions) != 1 {
		t.Fatalf("%d session resources", len(sessions))
	}
	attrs := sessions[0].Resource().Attributes().AsRaw()
	if attrs[pipeline.AttrSessionID] != int64(77) || attrs[pipeline.AttrSessionPID] != int64(4000) ||
		attrs[pipeline.AttrDBNamespace] != "postgres" || attrs[pipeline.AttrSessionUser] != "gpadmin" || attrs[pipeline.AttrSessionSystem] != false {
		t.Errorf("session attributes %v", attrs)
	}
	if _, ok := attrs[pipeline.MetaState]; ok {
		t.Error("volatile state leaked into the resource")
	}
	info, ok := metricNamed(sessions[0], pipeline.MetricSessionInfo)
	if !ok || info.Gauge().DataPoints().At(0).IntValue() != 1 || info.Gauge().DataPoints().At(0).Attributes().Len() != 0 {
		t.Fatal("gpotel.session.info is not a bare 1")
	}
	meta := info.Metadata().AsRaw()
	if meta[pipeline.MetaState] != "active" || meta[pipeline.MetaClientPort] != int64(5555) ||
		meta[pipeline.MetaBackendStart] != "2023-11-14T22:15:00Z" || meta[pipeline.MetaQueryTruncated] != true {
		t.Errorf("metadata %v", meta)
	}
	if q := meta[pipeline.MetaQuery].(string); len(q) != 16 {
		t.Errorf("query %q not cut to 16 bytes", q)
	}
	if _, ok := meta[pipeline.MetaXactStart]; ok {
		t.Error("a NULL xact_start is present")
	}
}

func TestSessionInfoListsEveryBackendTheHostsWereAskedAbout(t *testing.T) {
	md, _ := emitTest(t)
	sessions := resourcesOfKind(md, pipeline.KindSession)
	if len(sessions) != 1 {
		t.Fatalf("%d session resources", len(sessions))
	}
	info, ok := metricNamed(sessions[0], pipeline.MetricSessionInfo)
	if !ok {
		t.Fatal("no gpotel.session.info")
	}
	v, ok := info.Metadata().Get(pipeline.MetaBackends)
	if !ok {
		t.Fatal("no backends in gpotel.session.info's metadata")
	}
	var got []string
	for i := 0; i < v.Slice().Len(); i++ {
		ref, err := pipeline.ParseBackendRef(v.Slice().At(i).Str())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ref.String())
	}
	// Every asked process, answered or not (sdw2 did not answer): the exporter asks them itself.
	want := []string{"mdw/-1/4000", "sdw1/0/5000", "sdw1/0/5001", "sdw2/1/6000"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("backends %v, want %v", got, want)
	}
}

func TestCommandCountOfTheTitleIsAPointOnlyWhereTheTitleHasOne(t *testing.T) {
	md, _ := emitTest(t)
	for _, rm := range resourcesOfKind(md, pipeline.KindProcess) {
		h, _ := rm.Resource().Attributes().Get(pipeline.AttrHostName)
		points := pointsOf(t, rm, pipeline.MetricProcessCommandCount)
		switch h.Str() {
		case "mdw":
			if len(points) != 0 {
				t.Errorf("mdw: %v, want no point for a title without cmd<N>", points)
			}
		case "sdw1":
			if p := points[5000]; len(p) != 1 || p[0].IntValue() != 9 {
				t.Errorf("sdw1 pid 5000: %v, want one point 9", p)
			}
		}
	}
}
