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
	for _, u := range q.segments {
		if u.at.segment == unknownSegment {
			continue
		}
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
	}
	// The session skew figures' shape, without gpotel.window.
	cpuSkew, ioSkew, cpuOK, ioOK := sessionSkews(q.segments)
	ratio := gauge(sc.QueryMetric(sc.MetricSessionSkewRatio), "1")
	overAvg := gauge(sc.QueryMetric(sc.MetricSessionSkewMaxOverAvg), "1")
	hottest := gauge(sc.QueryMetric(sc.MetricSessionSkewHottestSegment), "1")
	segments := gauge(sc.QueryMetric(sc.MetricSessionSkewSegments), "{segment}")
	for _, fig := range []struct {
		name string
		sk   skew
		ok   bool
	}{{sc.SkewFigureCPU, cpuSkew, cpuOK}, {sc.SkewFigureIO, ioSkew, ioOK}} {
		if !fig.ok {
			continue
		}
		of := func(dps pmetric.NumberDataPointSlice) pmetric.NumberDataPoint {
			dp := point(dps)
			dp.Attributes().PutStr(sc.AttrSkewFigure, fig.name)
			return dp
		}
		of(ratio).SetDoubleValue(fig.sk.ratio)
		of(overAvg).SetDoubleValue(fig.sk.maxOverAvg)
		of(hottest).SetIntValue(int64(fig.sk.hottest))
		of(segments).SetIntValue(int64(fig.sk.segments))
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
