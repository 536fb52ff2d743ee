package snapshotdiffprocessor

import (
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	sc "github.com/gpotel/gpotel/internal/gpsemconv"
)

// writeQueries appends one query resource per query (docs/pipeline.md, query figures).
func (p *snapshotDiff) writeQueries(rms pmetric.ResourceMetricsSlice, ts pcommon.Timestamp, hostNames []string, queries []queryFigures) {
	for i := range queries {
		q := &queries[i]
		rm := rms.AppendEmpty()
		attrs := rm.Resource().Attributes()
		attrs.PutStr(sc.AttrResourceKind, sc.KindQuery)
		attrs.PutInt(sc.AttrTmID, q.session.tmID)
		attrs.PutInt(sc.AttrSessionID, q.session.id)
		if q.ccnt > 0 {
			attrs.PutStr(sc.AttrQueryKeySource, sc.QueryKeyCommandCount)
			attrs.PutInt(sc.AttrQueryCommandCount, q.ccnt)
		} else {
			attrs.PutStr(sc.AttrQueryKeySource, sc.QueryKeyQueryStart)
		}
		attrs.PutStr(sc.AttrQueryStart, sc.QueryStartValue(time.Unix(0, q.start)))
		if p.queryText {
			attrs.PutStr(sc.AttrDBQueryText, cutUTF8(q.text, p.queryTextMax))
		}
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(scopeName)
		writeQueryMetrics(sm.Metrics(), ts, hostNames, q)
	}
}

func writeQueryMetrics(ms pmetric.MetricSlice, ts pcommon.Timestamp, hostNames []string, q *queryFigures) {
	gauge := func(name, unit string) pmetric.NumberDataPointSlice {
		m := ms.AppendEmpty()
		m.SetName(name)
		m.SetUnit(unit)
		return m.SetEmptyGauge().DataPoints()
	}
	point := func(dps pmetric.NumberDataPointSlice) pmetric.NumberDataPoint {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(ts)
		return dp
	}
	for _, cm := range counterMetrics {
		dps := gauge(sc.QueryMetric(cm.session), cm.unit)
		for _, as := range cm.slots {
			setCounter(point(dps), cm, as, q.totals[as.slot])
		}
	}
	cpu := gauge(sc.MetricQuerySegmentCPUTime, "s")
	io := gauge(sc.MetricQuerySegmentDiskIO, "By")
	cpuLoads := make([]segmentLoad, 0, len(q.segments))
	ioLoads := make([]segmentLoad, 0, len(q.segments))
	for _, u := range q.segments {
		segment := func(dps pmetric.NumberDataPointSlice) pmetric.NumberDataPoint {
			dp := point(dps)
			dp.Attributes().PutStr(sc.AttrHostName, hostNames[u.at.host])
			dp.Attributes().PutInt(sc.AttrSegmentID, int64(u.at.segment))
			return dp
		}
		segment(cpu).SetDoubleValue(float64(u.cpu) / 1e9)
		r := segment(io)
		r.Attributes().PutStr(sc.AttrDirection, sc.DirectionRead)
		r.SetIntValue(u.read)
		w := segment(io)
		w.Attributes().PutStr(sc.AttrDirection, sc.DirectionWrite)
		w.SetIntValue(u.written)
		cpuLoads = append(cpuLoads, segmentLoad{u.at.segment, float64(u.cpu)})
		ioLoads = append(ioLoads, segmentLoad{u.at.segment, float64(u.read + u.written)})
	}
	for _, k := range []struct {
		loads                   []segmentLoad
		ratio, overAvg, hottest string
	}{
		{cpuLoads, sc.MetricQueryCPUSkew, sc.MetricQueryCPUSkewMaxOverAvg, sc.MetricQueryCPUSkewHottest},
		{ioLoads, sc.MetricQueryDiskIOSkew, sc.MetricQueryDiskIOSkewMaxOverAvg, sc.MetricQueryDiskIOSkewHottest},
	} {
		sk, ok := skewOf(k.loads)
		if !ok {
			continue
		}
		point(gauge(k.ratio, "1")).SetDoubleValue(sk.ratio)
		point(gauge(k.overAvg, "1")).SetDoubleValue(sk.maxOverAvg)
		point(gauge(k.hottest, "1")).SetIntValue(int64(sk.hottest))
	}
	end := int64(ts)
	if q.end != 0 {
		end = q.end
	}
	point(gauge(sc.MetricQueryDuration, "s")).SetDoubleValue(float64(max(end-q.start, 0)) / 1e9)
	point(gauge(sc.MetricQueryCompleted, "1")).SetIntValue(boolInt(q.end != 0))
	point(gauge(sc.MetricQueryPartial, "1")).SetIntValue(boolInt(q.partial))
}

// cutUTF8 cuts s to at most limit bytes without splitting a character.
func cutUTF8(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	for limit > 0 && !utf8.RuneStart(s[limit]) {
		limit--
	}
	return s[:limit]
}
