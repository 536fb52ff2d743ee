package sessionstateexporter

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"google.golang.org/protobuf/proto"

	"github.com/gpotel/gpotel/internal/gpsemconv"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// receiverProcess is one process as the gpsession receiver reports it.
type receiverProcess struct {
	session          int64 // 0: session 7
	host             string
	segment, pid     int64
	created          time.Time
	cpuUser, cpuSys  float64
	readBytes, rchar int64
	writeBytes       int64
	rss              int64
}

// receiverSnapshot builds the receiver's shape (docs/pipeline.md): snapshot,
// one session resource for sess_id 7, its processes (one process resource
// each, as one agent answer per process would give).
func receiverSnapshot(at time.Time, procs []receiverProcess) pmetric.Metrics {
	return receiverSnapshotOf(at, []int64{7}, procs)
}

// receiverSnapshotOf is receiverSnapshot with a session resource for each of
// sessions (user alice, query "select <id>").
func receiverSnapshotOf(at time.Time, sessions []int64, procs []receiverProcess) pmetric.Metrics {
	md := pmetric.NewMetrics()
	ts := pcommon.NewTimestampFromTime(at)
	snap := md.ResourceMetrics().AppendEmpty()
	snap.Resource().Attributes().PutStr(gpsemconv.AttrResourceKind, gpsemconv.KindSnapshot)
	snap.Resource().Attributes().PutInt(gpsemconv.AttrTmID, testTmID)
	snap.Resource().Attributes().PutStr(gpsemconv.AttrDialect, "gp6")
	snap.Resource().Attributes().PutStr(gpsemconv.AttrHostName, testCoordinator)
	up := snap.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	up.SetName(gpsemconv.MetricHostUp)
	hosts := []string{testCoordinator, "sdw1"}
	for _, p := range procs {
		if !slices.Contains(hosts, p.host) {
			hosts = append(hosts, p.host)
		}
	}
	upPoints := up.SetEmptyGauge().DataPoints()
	asked := snap.ScopeMetrics().At(0).Metrics().AppendEmpty()
	asked.SetName(gpsemconv.MetricHostProcesses)
	askedPoints := asked.SetEmptyGauge().DataPoints()
	for _, h := range hosts {
		dp := upPoints.AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetIntValue(1)
		dp.Attributes().PutStr(gpsemconv.AttrHostName, h)
		n := 0
		for _, p := range procs {
			if p.host == h {
				n++
			}
		}
		dp = askedPoints.AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetIntValue(int64(n))
		dp.Attributes().PutStr(gpsemconv.AttrHostName, h)
	}
	for _, id := range sessions {
		sess := md.ResourceMetrics().AppendEmpty()
		a := sess.Resource().Attributes()
		a.PutStr(gpsemconv.AttrResourceKind, gpsemconv.KindSession)
		a.PutInt(gpsemconv.AttrTmID, testTmID)
		a.PutInt(gpsemconv.AttrSessionID, id)
		a.PutInt(gpsemconv.AttrSessionPID, 7000+id)
		a.PutBool(gpsemconv.AttrSessionSystem, false)
		a.PutStr(gpsemconv.AttrDBNamespace, "sales")
		a.PutStr(gpsemconv.AttrSessionUser, "alice")
		a.PutStr(gpsemconv.AttrHostName, testCoordinator)
		info := sess.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		info.SetName(gpsemconv.MetricSessionInfo)
		info.Metadata().PutStr(gpsemconv.MetaState, "active")
		info.Metadata().PutStr(gpsemconv.MetaQuery, fmt.Sprintf("select %d", id))
		idp := info.SetEmptyGauge().DataPoints().AppendEmpty()
		idp.SetTimestamp(ts)
		idp.SetIntValue(1)
	}

	for _, p := range procs {
		rm := md.ResourceMetrics().AppendEmpty()
		ra := rm.Resource().Attributes()
		ra.PutStr(gpsemconv.AttrResourceKind, gpsemconv.KindProcess)
		ra.PutInt(gpsemconv.AttrTmID, testTmID)
		ra.PutStr(gpsemconv.AttrHostName, p.host)
		ra.PutInt(gpsemconv.AttrSessionID, cmp.Or(p.session, 7))
		ms := rm.ScopeMetrics().AppendEmpty().Metrics()
		sum := func(name string) pmetric.NumberDataPointSlice {
			m := ms.AppendEmpty()
			m.SetName(name)
			s := m.SetEmptySum()
			s.SetIsMonotonic(true)
			s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			return s.DataPoints()
		}
		point := func(pts pmetric.NumberDataPointSlice, attr, val string) pmetric.NumberDataPoint {
			dp := pts.AppendEmpty()
			dp.SetTimestamp(ts)
			dp.SetStartTimestamp(pcommon.NewTimestampFromTime(p.created))
			dp.Attributes().PutInt(gpsemconv.AttrProcessPID, p.pid)
			if attr != "" {
				dp.Attributes().PutStr(attr, val)
			}
			return dp
		}
		pinfo := ms.AppendEmpty()
		pinfo.SetName(gpsemconv.MetricProcessInfo)
		idp := pinfo.SetEmptyGauge().DataPoints().AppendEmpty()
		idp.SetTimestamp(ts)
		idp.SetStartTimestamp(pcommon.NewTimestampFromTime(p.created))
		idp.Attributes().PutInt(gpsemconv.AttrProcessPID, p.pid)
		idp.Attributes().PutInt(gpsemconv.AttrSegmentID, p.segment)
		idp.SetIntValue(1)
		cpu := sum(gpsemconv.MetricProcessCPUTime)
		point(cpu, gpsemconv.AttrCPUMode, gpsemconv.CPUModeUser).SetDoubleValue(p.cpuUser)
		point(cpu, gpsemconv.AttrCPUMode, gpsemconv.CPUModeSys).SetDoubleValue(p.cpuSys)
		io := sum(gpsemconv.MetricProcessDiskIO)
		point(io, gpsemconv.AttrDirection, gpsemconv.DirectionRead).SetIntValue(p.readBytes)
		point(io, gpsemconv.AttrDirection, gpsemconv.DirectionWrite).SetIntValue(p.writeBytes)
		chars := sum(gpsemconv.MetricProcessIOChars)
		point(chars, gpsemconv.AttrDirection, gpsemconv.DirectionRead).SetIntValue(p.rchar)
		point(chars, gpsemconv.AttrDirection, gpsemconv.DirectionWrite).SetIntValue(0)
		rss := ms.AppendEmpty()
		rss.SetName(gpsemconv.MetricProcessMemoryUsage)
		rdp := rss.SetEmptyGauge().DataPoints().AppendEmpty()
		rdp.SetTimestamp(ts)
		rdp.SetStartTimestamp(pcommon.NewTimestampFromTime(p.created))
		rdp.Attributes().PutInt(gpsemconv.AttrProcessPID, p.pid)
		rdp.SetIntValue(p.rss)
	}
	return md
}

// processorInFront is the real snapshotdiff processor, default settings,
// started, handing its output to srv's exporter.
func processorInFront(t *testing.T, srv *testServer) processor.Metrics {
	t.Helper()
	factory := snapshotdiffprocessor.NewFactory()
	proc, err := factory.CreateMetrics(context.Background(), processortest.NewNopSettings(factory.Type()),
		factory.CreateDefaultConfig(), srv.exp)
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Start(context.Background(), nopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proc.Shutdown(context.Background()) })
	return proc
}

// The real snapshotdiff processor in front of the exporter: what it emits is
// what GetGPSessions reports.
func TestBehindTheSnapshotdiffProcessor(t *testing.T) {
	srv := startDefault(t)
	proc := processorInFront(t, srv)

	born := t0.Add(-time.Hour)
	first := []receiverProcess{
		{host: testCoordinator, segment: -1, pid: 7007, created: born, cpuUser: 10, cpuSys: 1, readBytes: 1000, rchar: 5000, rss: 10 << 20},
		{host: "sdw1", segment: 0, pid: 300, created: born, cpuUser: 20, cpuSys: 2, readBytes: 2000, rchar: 6000, rss: 20 << 20},
	}
	second := []receiverProcess{
		{host: testCoordinator, segment: -1, pid: 7007, created: born, cpuUser: 13, cpuSys: 1.5, readBytes: 1500, rchar: 9000, rss: 12 << 20},
		{host: "sdw1", segment: 0, pid: 300, created: born, cpuUser: 26, cpuSys: 2.5, readBytes: 4000, rchar: 8000, rss: 30 << 20},
	}
	for i, procs := range [][]receiverProcess{first, second} {
		if err := proc.ConsumeMetrics(context.Background(), receiverSnapshot(t0.Add(time.Duration(i)*time.Minute), procs)); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := srv.client.GetGPSession(ctxTimeout(t), &yagpcc.GetGPSessionReq{SessionKey: &yagpcc.SessionKey{SessId: 7, TmId: testTmID}})
	if err != nil {
		t.Fatal(err)
	}
	st := resp.SessionsState
	if !st.Time.AsTime().Equal(t0.Add(time.Minute)) || st.SessionInfo.User != "alice" || st.RunningQueryInfo.GetQueryText() != "select 7" {
		t.Fatalf("session state not carried through: %v", st)
	}
	last := st.GetLastMetrics().GetSystemStat()
	assertProtoEqual(t, last, &yagpcc.SystemStat{
		UserTimeSeconds: 9, KernelTimeSeconds: 1, RunningTimeSeconds: 10,
		ReadBytes: 2500, Rchar: 6000, Rss: 42 << 20, RssMaxHost: 30 << 20,
		WindowSeconds: 60, Processes: 2, Hosts: 2,
		// One segment took part (the coordinator does not count): nothing uneven.
		CpuMaxOverAvg: 1, CpuHottestSegment: proto.Int32(0), IoMaxOverAvg: 1, IoHottestSegment: proto.Int32(0), SkewSegments: 1,
	})
	total := st.GetTotalMetrics().GetSystemStat()
	assertProtoEqual(t, total, &yagpcc.SystemStat{
		UserTimeSeconds: 39, KernelTimeSeconds: 4, RunningTimeSeconds: 43,
		ReadBytes: 5500, Rchar: 17000, Rss: 42 << 20, RssMaxHost: 30 << 20,
		Processes: 2, Hosts: 2,
		CpuMaxOverAvg: 1, CpuHottestSegment: proto.Int32(0), IoMaxOverAvg: 1, IoHottestSegment: proto.Int32(0), SkewSegments: 1,
	})
}
