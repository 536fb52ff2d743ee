// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshot

import (
	"cmp"
	"slices"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// resourceWriter collects one resource's points of closing-batch metrics
// and writes them as mdatagen's builder does: a switched-off attribute is
// dropped and the points it told apart merge; the metrics in name order.
type resourceWriter struct {
	sw      *Switches
	start   pcommon.Timestamp
	ts      pcommon.Timestamp
	metrics []*pendingMetric
}

type pendingMetric struct {
	*pipeline.ClosingMetric
	sw     MetricSwitch
	points []pendingPoint
	meta   *pcommon.Map // Metric.Metadata(), when the metric has one
}

type pendingPoint struct {
	attrs []string // values, "" where switched off
	i     int64
	f     float64
	n     int
}

func newResourceWriter(sw *Switches, start, ts pcommon.Timestamp) *resourceWriter {
	return &resourceWriter{sw: sw, start: start, ts: ts}
}

func (w *resourceWriter) pending(m *pipeline.ClosingMetric) *pendingMetric {
	for _, p := range w.metrics {
		if p.ClosingMetric == m {
			return p
		}
	}
	p := &pendingMetric{ClosingMetric: m, sw: w.sw.metric(m.Name)}
	w.metrics = append(w.metrics, p)
	return p
}

// record adds one point with the metric's attribute values, in its Attrs order.
func (w *resourceWriter) record(m *pipeline.ClosingMetric, i int64, f float64, attrs ...string) {
	p := w.pending(m)
	if p.sw.Off {
		return
	}
	kept := make([]string, len(attrs))
	for k, v := range attrs {
		if w.sw.attributeOn(m.Name, m.Attrs[k]) {
			kept[k] = v
		} else {
			kept[k] = "\x00off"
		}
	}
	for k := range p.points {
		pt := &p.points[k]
		if !slices.Equal(pt.attrs, kept) {
			continue
		}
		switch p.sw.Aggregation {
		case AggregationSum, AggregationAvg:
			pt.i += i
			pt.f += f
			pt.n++
			return
		case AggregationMin:
			pt.i, pt.f = min(pt.i, i), min(pt.f, f)
			return
		case AggregationMax:
			pt.i, pt.f = max(pt.i, i), max(pt.f, f)
			return
		}
	}
	p.points = append(p.points, pendingPoint{attrs: kept, i: i, f: f, n: 1})
}

// metadata is the Metric.Metadata() of the metric's one point.
func (w *resourceWriter) metadata(m *pipeline.ClosingMetric) pcommon.Map {
	p := w.pending(m)
	if p.meta == nil {
		meta := pcommon.NewMap()
		p.meta = &meta
	}
	return *p.meta
}

// emit appends the resource, unless a filter drops it or it has no metric
// and is not always written.
func (w *resourceWriter) emit(rms pmetric.ResourceMetricsSlice, scope Scope, attrs pcommon.Map, always bool) {
	if !w.sw.keeps(attrs) {
		return
	}
	slices.SortFunc(w.metrics, func(a, b *pendingMetric) int { return cmp.Compare(a.Name, b.Name) })
	var ms pmetric.MetricSlice
	started := false
	start := func() {
		started = true
		rm := rms.AppendEmpty()
		attrs.CopyTo(rm.Resource().Attributes())
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(scope.Name)
		sm.Scope().SetVersion(scope.Version)
		ms = sm.Metrics()
	}
	if always {
		start()
	}
	for _, p := range w.metrics {
		if p.sw.Off || len(p.points) == 0 {
			continue
		}
		if !started {
			start()
		}
		dps := appendMetric(ms, p.Name, p.Description, p.Unit, p.Sum)
		for _, pt := range p.points {
			dp := dps.AppendEmpty()
			dp.SetStartTimestamp(w.start)
			dp.SetTimestamp(w.ts)
			for k, v := range pt.attrs {
				switch {
				case v == "\x00off":
				case intAttrs[p.Attrs[k]]:
					n, _ := strconv.ParseInt(v, 10, 64) // written by FormatInt
					dp.Attributes().PutInt(p.Attrs[k], n)
				default:
					dp.Attributes().PutStr(p.Attrs[k], v)
				}
			}
			avg := p.sw.Aggregation == AggregationAvg && pt.n > 1
			if p.Double {
				if avg {
					pt.f /= float64(pt.n)
				}
				dp.SetDoubleValue(pt.f)
			} else {
				if avg {
					pt.i /= int64(pt.n)
				}
				dp.SetIntValue(pt.i)
			}
		}
		if p.meta != nil {
			p.meta.CopyTo(ms.At(ms.Len() - 1).Metadata())
		}
	}
}

// resourceAttrs builds a resource's attributes, leaving out the ones switched off.
type resourceAttrs struct {
	sw *Switches
	m  pcommon.Map
}

func newResourceAttrs(sw *Switches, kind pipeline.ResourceKind) resourceAttrs {
	ra := resourceAttrs{sw: sw, m: pcommon.NewMap()}
	ra.str(pipeline.AttrResourceKind, kind.String())
	return ra
}

func (ra resourceAttrs) str(k, v string) {
	if ra.sw.resourceOn(k) {
		ra.m.PutStr(k, v)
	}
}

func (ra resourceAttrs) int(k string, v int64) {
	if ra.sw.resourceOn(k) {
		ra.m.PutInt(k, v)
	}
}

func (ra resourceAttrs) bool(k string, v bool) {
	if ra.sw.resourceOn(k) {
		ra.m.PutBool(k, v)
	}
}

// appendMetric appends a receiver metric, a cumulative monotonic sum or a
// gauge, and returns its points.
func appendMetric(ms pmetric.MetricSlice, name, description, unit string, sum bool) pmetric.NumberDataPointSlice {
	m := ms.AppendEmpty()
	m.SetName(name)
	m.SetDescription(description)
	m.SetUnit(unit)
	if !sum {
		return m.SetEmptyGauge().DataPoints()
	}
	s := m.SetEmptySum()
	s.SetIsMonotonic(true)
	s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	return s.DataPoints()
}
