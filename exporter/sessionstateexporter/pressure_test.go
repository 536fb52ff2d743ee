package sessionstateexporter

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	sc "github.com/gpotel/gpotel/internal/gpsemconv"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

const pressureAt = pcommon.Timestamp(1_700_000_000_000_000_000)

func addResource(md pmetric.Metrics, attrs map[string]any) pmetric.MetricSlice {
	rm := md.ResourceMetrics().AppendEmpty()
	_ = rm.Resource().Attributes().FromRaw(attrs)
	return rm.ScopeMetrics().AppendEmpty().Metrics()
}

func addPressure(ms pmetric.MetricSlice, resource, kind string, stallSeconds, avg10 float64) {
	st := ms.AppendEmpty()
	st.SetName(sc.MetricPressureStallTime)
	dp := st.SetEmptySum().DataPoints().AppendEmpty()
	dp.SetTimestamp(pressureAt)
	dp.SetDoubleValue(stallSeconds)
	dp.Attributes().PutStr(sc.AttrPressureResource, resource)
	dp.Attributes().PutStr(sc.AttrPressureKind, kind)
	ratio := ms.AppendEmpty()
	ratio.SetName(sc.MetricPressureStallRatio)
	g := ratio.SetEmptyGauge()
	for w, v := range map[string]float64{"10s": avg10, "60s": avg10 / 2, "300s": avg10 / 4} {
		dp := g.DataPoints().AppendEmpty()
		dp.SetTimestamp(pressureAt)
		dp.SetDoubleValue(v)
		dp.Attributes().PutStr(sc.AttrPressureResource, resource)
		dp.Attributes().PutStr(sc.AttrPressureKind, kind)
		dp.Attributes().PutStr(sc.AttrPressureWindow, w)
	}
}

func pressureBatch(hostCPU float64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	snap := addResource(md, map[string]any{sc.AttrResourceKind: sc.KindSnapshot, sc.AttrHostName: "mdw"})
	up := snap.AppendEmpty()
	up.SetName(sc.MetricHostUp)
	up.SetEmptyGauge().DataPoints().AppendEmpty().SetTimestamp(pressureAt)
	addPressure(addResource(md, map[string]any{sc.AttrResourceKind: sc.KindHost, sc.AttrHostName: "sdw1"}), "cpu", "some", 12.5, hostCPU)
	cg := addResource(md, map[string]any{sc.AttrResourceKind: sc.KindCgroup, sc.AttrHostName: "sdw1",
		sc.AttrCgroupPath: "/gpdb/6437", sc.AttrCgroupVersion: 2, sc.AttrResourceGroupOID: 6437, sc.AttrResourceGroupName: "default_group"})
	addPressure(cg, "cpu", "some", 3, 0.25)
	tasks := cg.AppendEmpty()
	tasks.SetName(sc.MetricCgroupTasks)
	dp := tasks.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetIntValue(4)
	dp.Attributes().PutStr(sc.AttrTaskState, "running")
	addResource(md, map[string]any{sc.AttrResourceKind: sc.KindCgroup, sc.AttrHostName: "sdw1",
		sc.AttrCgroupPath: "/gpdb/7000", sc.AttrCgroupVersion: 1, sc.AttrResourceGroupOID: 7000})
	return md
}

func TestPressureServiceAnswersTheLatestSnapshotsHostsAndGroups(t *testing.T) {
	var store pressureStore
	svc := &pressureService{store: &store}
	empty, err := svc.GetHostPressure(context.Background(), &gpotelv1.GetHostPressureRequest{})
	require.NoError(t, err)
	assert.Zero(t, empty.GetSnapshotTimeUnixNano(), "before the first snapshot")

	store.consume(pressureBatch(0.5))
	resp, err := svc.GetHostPressure(context.Background(), &gpotelv1.GetHostPressureRequest{})
	require.NoError(t, err)
	assert.Equal(t, int64(pressureAt), resp.GetSnapshotTimeUnixNano())
	require.Len(t, resp.GetHosts(), 1)
	h := resp.GetHosts()[0]
	assert.Equal(t, "sdw1", h.GetHostname())
	require.Len(t, h.GetPressure(), 1)
	assert.Equal(t, &gpotelv1.PressureFigures{Resource: "cpu", Kind: "some", Avg10: 0.5, Avg60: 0.25, Avg300: 0.125, StallSeconds: 12.5},
		h.GetPressure()[0])
	require.Len(t, h.GetGroups(), 2)
	assert.Equal(t, "default_group", h.GetGroups()[0].GetName())
	assert.Equal(t, map[string]int64{"running": 4}, h.GetGroups()[0].GetTasks())
	assert.Equal(t, "oid:7000", h.GetGroups()[1].GetName(), "an oid the catalog does not name")
	assert.Empty(t, h.GetGroups()[1].GetPressure(), "a v1 group has no pressure")

	// A process batch (no snapshot resource) leaves the figures alone.
	procs := pmetric.NewMetrics()
	addResource(procs, map[string]any{sc.AttrResourceKind: sc.KindProcess, sc.AttrHostName: "sdw1"})
	store.consume(procs)
	store.consume(pressureBatch(0.75))
	resp, err = svc.GetHostPressure(context.Background(), &gpotelv1.GetHostPressureRequest{})
	require.NoError(t, err)
	assert.Equal(t, 0.75, resp.GetHosts()[0].GetPressure()[0].GetAvg10(), "the newest snapshot replaces the older")
}

// addSessionGroupPressure puts the receiver's gpotel.session.cgroup.pressure
// points on the session resource of sessID.
func addSessionGroupPressure(md pmetric.Metrics, sessID int64, points []struct {
	group, resource, kind string
	v                     float64
}) {
	for i := range md.ResourceMetrics().Len() {
		rm := md.ResourceMetrics().At(i)
		if id, ok := rm.Resource().Attributes().Get(sc.AttrSessionID); !ok || id.Int() != sessID {
			continue
		}
		m := rm.ScopeMetrics().At(0).Metrics().AppendEmpty()
		m.SetName(sc.MetricSessionCgroupPress)
		g := m.SetEmptyGauge()
		for _, p := range points {
			dp := g.DataPoints().AppendEmpty()
			dp.SetDoubleValue(p.v)
			dp.Attributes().PutStr(sc.AttrCgroupName, p.group)
			dp.Attributes().PutStr(sc.AttrPressureResource, p.resource)
			dp.Attributes().PutStr(sc.AttrPressureKind, p.kind)
		}
	}
}

func TestSystemStatCarriesTheWorstSomePressureOfTheSessionsGroups(t *testing.T) {
	srv := startDefault(t)
	s := fullSession()
	md := buildSnapshot(t0, []testSession{s})
	addSessionGroupPressure(md, s.sessID, []struct {
		group, resource, kind string
		v                     float64
	}{
		{"default_group", "cpu", "some", 0.30},
		{"admin_group", "cpu", "some", 0.05},
		{"default_group", "cpu", "full", 0.90}, // full is not some: not taken
		{"default_group", "memory", "some", 0.02},
		{"admin_group", "io", "some", 0.07},
	})
	srv.consume(t, md)
	got := listAll(t, srv).SessionsState[0]
	for name, st := range map[string]*yagpcc.SystemStat{"last": got.GetLastMetrics().GetSystemStat(), "total": got.GetTotalMetrics().GetSystemStat()} {
		assert.Equal(t, 0.30, st.GetCpuPressure(), name)
		assert.Equal(t, 0.02, st.GetMemoryPressure(), name)
		assert.Equal(t, 0.07, st.GetIoPressure(), name)
	}
}
