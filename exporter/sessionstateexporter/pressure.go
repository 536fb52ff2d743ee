package sessionstateexporter

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"google.golang.org/protobuf/proto"

	sc "github.com/gpotel/gpotel/internal/gpsemconv"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// pressureStore keeps the host and cgroup pressure of the latest snapshot
// for gpotel.v1.PressureService.
type pressureStore struct {
	mu     sync.Mutex
	latest *gpotelv1.GetHostPressureResponse
}

// consume replaces the stored figures with those of a batch that closes a
// snapshot; other batches leave them alone.
func (p *pressureStore) consume(md pmetric.Metrics) {
	rms := md.ResourceMetrics()
	var at pcommon.Timestamp
	hosts := map[string]*gpotelv1.HostPressure{}
	host := func(name string) *gpotelv1.HostPressure {
		if hosts[name] == nil {
			hosts[name] = &gpotelv1.HostPressure{Hostname: name}
		}
		return hosts[name]
	}
	closing := false
	for i := range rms.Len() {
		rm := rms.At(i)
		attrs := rm.Resource().Attributes()
		name := strAttr(attrs, sc.AttrHostName)
		switch strAttr(attrs, sc.AttrResourceKind) {
		case sc.KindSnapshot:
			closing = true
			at = firstPointTime(rm)
		case sc.KindHost:
			h := host(name)
			h.Pressure = pressureFigures(rm)
		case sc.KindCgroup:
			h := host(name)
			h.Groups = append(h.Groups, groupPressure(rm))
		}
	}
	if !closing {
		return
	}
	resp := &gpotelv1.GetHostPressureResponse{SnapshotTimeUnixNano: int64(at)} //nolint:gosec // nanoseconds since 1970 fit int64 until 2262
	for _, h := range hosts {
		slices.SortFunc(h.Groups, func(a, b *gpotelv1.GroupPressure) int { return strings.Compare(a.GetName(), b.GetName()) })
		resp.Hosts = append(resp.Hosts, h)
	}
	slices.SortFunc(resp.Hosts, func(a, b *gpotelv1.HostPressure) int { return strings.Compare(a.GetHostname(), b.GetHostname()) })
	p.mu.Lock()
	p.latest = resp
	p.mu.Unlock()
}

func (p *pressureStore) get() *gpotelv1.GetHostPressureResponse {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.latest == nil {
		return &gpotelv1.GetHostPressureResponse{}
	}
	return proto.Clone(p.latest).(*gpotelv1.GetHostPressureResponse)
}

func firstPointTime(rm pmetric.ResourceMetrics) pcommon.Timestamp {
	for i := range rm.ScopeMetrics().Len() {
		ms := rm.ScopeMetrics().At(i).Metrics()
		for j := range ms.Len() {
			if m := ms.At(j); m.Type() == pmetric.MetricTypeGauge && m.Gauge().DataPoints().Len() > 0 {
				return m.Gauge().DataPoints().At(0).Timestamp()
			}
		}
	}
	return 0
}

// pressureFigures gathers a resource's stall time and ratio points into one line per (resource, kind).
func pressureFigures(rm pmetric.ResourceMetrics) []*gpotelv1.PressureFigures {
	var out []*gpotelv1.PressureFigures
	line := func(dp pmetric.NumberDataPoint) *gpotelv1.PressureFigures {
		r, k := strAttr(dp.Attributes(), sc.AttrPressureResource), strAttr(dp.Attributes(), sc.AttrPressureKind)
		for _, f := range out {
			if f.Resource == r && f.Kind == k {
				return f
			}
		}
		f := &gpotelv1.PressureFigures{Resource: r, Kind: k}
		out = append(out, f)
		return f
	}
	forEachMetric(rm, func(m pmetric.Metric) {
		switch m.Name() {
		case sc.MetricPressureStallTime:
			for i := range m.Sum().DataPoints().Len() {
				dp := m.Sum().DataPoints().At(i)
				line(dp).StallSeconds = dp.DoubleValue()
			}
		case sc.MetricPressureStallRatio:
			for i := range m.Gauge().DataPoints().Len() {
				dp := m.Gauge().DataPoints().At(i)
				f := line(dp)
				switch strAttr(dp.Attributes(), sc.AttrPressureWindow) {
				case "10s":
					f.Avg10 = dp.DoubleValue()
				case "60s":
					f.Avg60 = dp.DoubleValue()
				case "300s":
					f.Avg300 = dp.DoubleValue()
				}
			}
		}
	})
	return out
}

func groupPressure(rm pmetric.ResourceMetrics) *gpotelv1.GroupPressure {
	attrs := rm.Resource().Attributes()
	g := &gpotelv1.GroupPressure{Path: strAttr(attrs, sc.AttrCgroupPath), Pressure: pressureFigures(rm)}
	if v, ok := attrs.Get(sc.AttrCgroupVersion); ok {
		g.CgroupVersion = int32(v.Int()) //nolint:gosec // 1 or 2
	}
	if v, ok := attrs.Get(sc.AttrResourceGroupOID); ok {
		g.ResourceGroupOid = uint32(v.Int()) //nolint:gosec // an oid
	}
	switch name := strAttr(attrs, sc.AttrResourceGroupName); {
	case name != "":
		g.Name = name
	case g.ResourceGroupOid != 0:
		g.Name = "oid:" + strconv.FormatUint(uint64(g.ResourceGroupOid), 10)
	default:
		g.Name = g.Path
	}
	forEachMetric(rm, func(m pmetric.Metric) {
		if m.Name() != sc.MetricCgroupTasks {
			return
		}
		g.Tasks = map[string]int64{}
		for i := range m.Gauge().DataPoints().Len() {
			dp := m.Gauge().DataPoints().At(i)
			g.Tasks[strAttr(dp.Attributes(), sc.AttrTaskState)] = dp.IntValue()
		}
	})
	return g
}

func forEachMetric(rm pmetric.ResourceMetrics, f func(pmetric.Metric)) {
	for i := range rm.ScopeMetrics().Len() {
		ms := rm.ScopeMetrics().At(i).Metrics()
		for j := range ms.Len() {
			f(ms.At(j))
		}
	}
}

// pressureService is gpotel.v1.PressureService over the store.
type pressureService struct {
	gpotelv1.UnimplementedPressureServiceServer
	store *pressureStore
}

func (s *pressureService) GetHostPressure(context.Context, *gpotelv1.GetHostPressureRequest) (*gpotelv1.GetHostPressureResponse, error) {
	return s.store.get(), nil
}

// setPressure keeps the largest "some" stall share per resource over a session's groups.
func setPressure(st *yagpcc.SystemStat, a pcommon.Map, v float64) {
	if strAttr(a, sc.AttrPressureKind) != "some" {
		return
	}
	var dst *float64
	switch strAttr(a, sc.AttrPressureResource) {
	case "cpu":
		dst = &st.CpuPressure
	case "memory":
		dst = &st.MemoryPressure
	case "io":
		dst = &st.IoPressure
	default:
		return
	}
	*dst = max(*dst, v)
}
