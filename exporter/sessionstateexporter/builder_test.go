package sessionstateexporter

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/gpsemconv"
)

// testFigures are one window's session figures as the processor emits them.
type testFigures struct {
	user, sys, diskDelay, runDelay, span float64
	readBytes, writeBytes, rchar, wchar  int64
	syscr, syscw, cancelled              int64
	major, minor, vol, invol             int64
	partial                              bool
}

// testMemory are the memory gauges (no window).
type testMemory struct {
	rss, rssAnon, rssShared, virtual, peak, virtualPeak int64
	rssMaxHost, rssAnonMaxHost                          int64
}

// testSession is one session resource of a snapshot.
type testSession struct {
	sessID, tmID, pid int64
	system            bool
	db, user          string
	// meta is gpotel.session.info's Metadata; values string, int64, bool or []string.
	meta            map[string]any
	last            *testFigures // the exporter's window; nil: absent
	total           *testFigures // lifetime; nil: absent
	other           *testFigures // another window the exporter must ignore
	memory          testMemory
	processes, host int64
}

const (
	testCoordinator = "mdw"
	testWindow      = "5m"
	testOtherWindow = "15m"
)

// buildSnapshot makes one snapshot the way snapshotdiff outputs it
// (docs/pipeline.md): a snapshot resource, then one resource per session
// with the receiver's gpotel.session.info and the processor's figures.
func buildSnapshot(at time.Time, sessions []testSession) pmetric.Metrics {
	md := pmetric.NewMetrics()
	ts := pcommon.NewTimestampFromTime(at)

	snap := md.ResourceMetrics().AppendEmpty()
	snap.Resource().Attributes().PutStr(gpsemconv.AttrResourceKind, gpsemconv.KindSnapshot)
	snap.Resource().Attributes().PutInt(gpsemconv.AttrTmID, 1700000000)
	snap.Resource().Attributes().PutStr(gpsemconv.AttrDialect, "gp6")
	snap.Resource().Attributes().PutStr(gpsemconv.AttrHostName, testCoordinator)
	up := snap.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	up.SetName(gpsemconv.MetricHostUp)
	dp := up.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(ts)
	dp.SetIntValue(1)
	dp.Attributes().PutStr(gpsemconv.AttrHostName, "sdw1")

	for _, s := range sessions {
		rm := md.ResourceMetrics().AppendEmpty()
		a := rm.Resource().Attributes()
		a.PutStr(gpsemconv.AttrResourceKind, gpsemconv.KindSession)
		a.PutInt(gpsemconv.AttrTmID, s.tmID)
		a.PutInt(gpsemconv.AttrSessionID, s.sessID)
		a.PutInt(gpsemconv.AttrSessionPID, s.pid)
		a.PutBool(gpsemconv.AttrSessionSystem, s.system)
		a.PutStr(gpsemconv.AttrDBNamespace, s.db)
		a.PutStr(gpsemconv.AttrSessionUser, s.user)
		a.PutStr(gpsemconv.AttrHostName, testCoordinator)

		recv := rm.ScopeMetrics().AppendEmpty()
		recv.Scope().SetName("gpsessionreceiver")
		infoMetric := recv.Metrics().AppendEmpty()
		infoMetric.SetName(gpsemconv.MetricSessionInfo)
		ip := infoMetric.SetEmptyGauge().DataPoints().AppendEmpty()
		ip.SetTimestamp(ts)
		ip.SetIntValue(1)
		for k, v := range s.meta {
			switch v := v.(type) {
			case string:
				infoMetric.Metadata().PutStr(k, v)
			case int64:
				infoMetric.Metadata().PutInt(k, v)
			case bool:
				infoMetric.Metadata().PutBool(k, v)
			case []string:
				sl := infoMetric.Metadata().PutEmptySlice(k)
				for _, e := range v {
					sl.AppendEmpty().SetStr(e)
				}
			}
		}

		proc := rm.ScopeMetrics().AppendEmpty()
		proc.Scope().SetName("snapshotdiffprocessor")
		ms := proc.Metrics()
		addFigures(ms, ts, testWindow, s.last)
		addFigures(ms, ts, gpsemconv.WindowLifetime, s.total)
		addFigures(ms, ts, testOtherWindow, s.other)
		gauge(ms, ts, gpsemconv.MetricSessionProcesses).SetIntValue(s.processes)
		gauge(ms, ts, gpsemconv.MetricSessionHosts).SetIntValue(s.host)
		mem := ms.AppendEmpty()
		mem.SetName(gpsemconv.MetricSessionMemoryUsage)
		mem.SetEmptyGauge()
		for _, m := range []struct {
			typ, agg string
			v        int64
		}{
			{gpsemconv.MemoryTypeRSS, gpsemconv.MemoryAggregationCluster, s.memory.rss},
			{gpsemconv.MemoryTypeRSS, gpsemconv.MemoryAggregationMaxHost, s.memory.rssMaxHost},
			{gpsemconv.MemoryTypeRSSAnon, gpsemconv.MemoryAggregationCluster, s.memory.rssAnon},
			{gpsemconv.MemoryTypeRSSAnon, gpsemconv.MemoryAggregationMaxHost, s.memory.rssAnonMaxHost},
			{gpsemconv.MemoryTypeRSSShared, gpsemconv.MemoryAggregationCluster, s.memory.rssShared},
			{gpsemconv.MemoryTypeVirtual, gpsemconv.MemoryAggregationCluster, s.memory.virtual},
			{gpsemconv.MemoryTypePeak, gpsemconv.MemoryAggregationCluster, s.memory.peak},
			{gpsemconv.MemoryTypeVirtualPeak, gpsemconv.MemoryAggregationCluster, s.memory.virtualPeak},
		} {
			p := mem.Gauge().DataPoints().AppendEmpty()
			p.SetTimestamp(ts)
			p.SetIntValue(m.v)
			p.Attributes().PutStr(gpsemconv.AttrMemoryType, m.typ)
			p.Attributes().PutStr(gpsemconv.AttrMemoryAggregation, m.agg)
		}
	}
	return md
}

func gauge(ms pmetric.MetricSlice, ts pcommon.Timestamp, name string) pmetric.NumberDataPoint {
	m := ms.AppendEmpty()
	m.SetName(name)
	p := m.SetEmptyGauge().DataPoints().AppendEmpty()
	p.SetTimestamp(ts)
	return p
}

// addFigures adds one window's figures, each with a .rate sibling the
// exporter must not confuse with the figure itself.
func addFigures(ms pmetric.MetricSlice, ts pcommon.Timestamp, window string, f *testFigures) {
	if f == nil {
		return
	}
	type point struct {
		attr, val string
		d         float64
		i         int64
		isInt     bool
	}
	add := func(name string, pts ...point) {
		for _, rate := range []bool{false, true} {
			m := ms.AppendEmpty()
			m.SetName(name)
			if rate {
				m.SetName(name + gpsemconv.RateSuffix)
			}
			dps := m.SetEmptyGauge().DataPoints()
			for _, pt := range pts {
				p := dps.AppendEmpty()
				p.SetTimestamp(ts)
				p.Attributes().PutStr(gpsemconv.AttrWindow, window)
				if pt.attr != "" {
					p.Attributes().PutStr(pt.attr, pt.val)
				}
				switch {
				case rate:
					p.SetDoubleValue(123456.5) // nonsense on purpose
				case pt.isInt:
					p.SetIntValue(pt.i)
				default:
					p.SetDoubleValue(pt.d)
				}
			}
		}
	}
	d := func(attr, val string, v float64) point { return point{attr: attr, val: val, d: v} }
	i := func(attr, val string, v int64) point { return point{attr: attr, val: val, i: v, isInt: true} }
	add(gpsemconv.MetricSessionCPUTime, d(gpsemconv.AttrCPUMode, gpsemconv.CPUModeUser, f.user), d(gpsemconv.AttrCPUMode, gpsemconv.CPUModeSys, f.sys))
	add(gpsemconv.MetricSessionDiskIO, i(gpsemconv.AttrDirection, gpsemconv.DirectionRead, f.readBytes), i(gpsemconv.AttrDirection, gpsemconv.DirectionWrite, f.writeBytes))
	add(gpsemconv.MetricSessionIOChars, i(gpsemconv.AttrDirection, gpsemconv.DirectionRead, f.rchar), i(gpsemconv.AttrDirection, gpsemconv.DirectionWrite, f.wchar))
	add(gpsemconv.MetricSessionIOSyscalls, i(gpsemconv.AttrDirection, gpsemconv.DirectionRead, f.syscr), i(gpsemconv.AttrDirection, gpsemconv.DirectionWrite, f.syscw))
	add(gpsemconv.MetricSessionCancelledWrite, i("", "", f.cancelled))
	add(gpsemconv.MetricSessionDiskDelay, d("", "", f.diskDelay))
	add(gpsemconv.MetricSessionRunDelay, d("", "", f.runDelay))
	add(gpsemconv.MetricSessionPagingFaults, i(gpsemconv.AttrFaultType, gpsemconv.FaultTypeMajor, f.major), i(gpsemconv.AttrFaultType, gpsemconv.FaultTypeMinor, f.minor))
	add(gpsemconv.MetricSessionContextSwitches, i(gpsemconv.AttrContextSwitchType, gpsemconv.ContextSwitchVol, f.vol), i(gpsemconv.AttrContextSwitchType, gpsemconv.ContextSwitchInvol, f.invol))
	// Span and partial have no rate sibling.
	span := ms.AppendEmpty()
	span.SetName(gpsemconv.MetricSessionWindowSpan)
	sp := span.SetEmptyGauge().DataPoints().AppendEmpty()
	sp.SetTimestamp(ts)
	sp.SetDoubleValue(f.span)
	sp.Attributes().PutStr(gpsemconv.AttrWindow, window)
	partial := ms.AppendEmpty()
	partial.SetName(gpsemconv.MetricSessionPartial)
	pp := partial.SetEmptyGauge().DataPoints().AppendEmpty()
	pp.SetTimestamp(ts)
	if f.partial {
		pp.SetIntValue(1)
	} else {
		pp.SetIntValue(0)
	}
	pp.Attributes().PutStr(gpsemconv.AttrWindow, window)
}
