// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package output

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// ProcessorScope is the instrumentation scope of everything the processor adds.
const ProcessorScope = "github.com/gpotel/gpotel/processor/snapshotdiffprocessor"

// WindowFigures are a session's figures over one configured window.
type WindowFigures struct {
	Span    int64 // ns: newest snapshot time − the old snapshot's used
	Deltas  pipeline.Counters
	Partial bool
}

// Averages are smoothed figures at one time constant: CPU in cores, disk
// bytes per second, rss bytes.
type Averages struct{ CPU, Read, Write, Memory float64 }

// HostRate is a session's use of one host over a window, per second.
type HostRate struct {
	Host             string
	CPU, Read, Write float64
}

// HostNow is a session's live processes on one host in the newest snapshot.
type HostNow struct {
	Host           string
	RSS, Processes int64
}

// SessionFigures are what the processor adds to one session resource
// (docs/pipeline.md, session, smoothed, skew and per-host figures).
type SessionFigures struct {
	Windows         []WindowFigures // one per Encoder window
	Lifetime        pipeline.Counters
	LifetimePartial bool
	// Known are the counters some process of the session reported (bit
	// per Figure): the others are not written, absent rather than 0.
	Known         uint32
	Processes     int64
	Hosts         int64
	MemoryCluster [pipeline.NumMemory]int64
	MemoryMaxHost [pipeline.NumMemory]int64
	// Smoothed has one entry per time constant; nil when smoothing is off.
	Smoothed []Averages
	// Skews has one entry per window, then lifetime; nil for a session
	// without processes (no segment took part).
	Skews []pipeline.SkewPair
	// HostRates (per window, hosts in name order) and HostNow are written
	// only with emit_session_host_figures; nil otherwise.
	HostRates [][]HostRate
	HostNow   []HostNow
}

// SegmentCounters are the counters of one segment instance.
type SegmentCounters struct {
	Host     string
	Segment  int32
	Counters pipeline.Counters
}

// ClusterWindow is the cluster's figures over one window.
type ClusterWindow struct {
	Span         int64
	Cluster      pipeline.Counters
	Unattributed []SegmentCounters // exited processes no scrape saw
	Unrecorded   []SegmentCounters // the postmasters' CPU beyond their children's exit records
}

// HostAverages are one host's smoothed figures, per time constant.
type HostAverages struct {
	Host string
	Avgs []Averages
}

// ClusterFigures are what the processor adds to the snapshot resource.
type ClusterFigures struct {
	Windows []ClusterWindow
	// Hosts and Cluster are the smoothed figures; nil when smoothing is off.
	Hosts   []HostAverages
	Cluster []Averages
}

// QueryFigures are one query resource (docs/pipeline.md, query figures).
type QueryFigures struct {
	Session      pipeline.SessionKey
	CommandCount int64   // 0: the key is the start
	Start, End   int64   // unix ns; End is 0 while it runs
	Text         *string // db.query.text, only with queries::text
	Totals       pipeline.Counters
	Known        uint32                // as in SessionFigures
	Segments     []pipeline.SegmentUse // UnknownSegment ones are not written
	Skew         pipeline.SkewPair
	Partial      bool
	Spill        *pipeline.QuerySpill // nil: no read saw it hold workfiles
}

// Encoder writes the processor's figures.
type Encoder struct {
	Windows   []string // gpotel.window of each configured window
	Constants []string // gpotel.time_constant of each time constant
}

// NewEncoder names the windows and time constants as gpotel.window
// and gpotel.time_constant spell them.
func NewEncoder(windows, constants []time.Duration) *Encoder {
	e := &Encoder{}
	for _, w := range windows {
		e.Windows = append(e.Windows, pipeline.WindowName(w))
	}
	for _, c := range constants {
		e.Constants = append(e.Constants, pipeline.WindowName(c))
	}
	return e
}

// gauges appends gauge metrics to one scope at one time.
type gauges struct {
	ms pmetric.MetricSlice
	ts pcommon.Timestamp
}

func (g gauges) metric(name, unit string) pmetric.NumberDataPointSlice {
	m := g.ms.AppendEmpty()
	m.SetName(name)
	m.SetUnit(unit)
	return m.SetEmptyGauge().DataPoints()
}

func (g gauges) point(dps pmetric.NumberDataPointSlice, window string) pmetric.NumberDataPoint {
	dp := dps.AppendEmpty()
	dp.SetTimestamp(g.ts)
	if window != "" {
		dp.Attributes().PutStr(pipeline.AttrWindow, window)
	}
	return dp
}

// AppendSession adds the processor's scope with a session's figures to
// its session resource.
func (e *Encoder) AppendSession(rm pmetric.ResourceMetrics, ts pcommon.Timestamp, f *SessionFigures) {
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(ProcessorScope)
	g := gauges{sm.Metrics(), ts}
	for _, m := range pipeline.CounterMetrics {
		if !anyOf(m, f.Known) {
			continue
		}
		totals := g.metric(m.Session, m.Unit)
		rates := g.metric(m.Session+pipeline.RateSuffix, m.Unit+"/s")
		for w, name := range e.Windows {
			wf := &f.Windows[w]
			span := float64(wf.Span) / 1e9
			for _, fig := range m.Figures() {
				if f.Known&(1<<fig) == 0 {
					continue
				}
				v := wf.Deltas[fig]
				setCounter(g.point(totals, name), fig, v)
				r := g.point(rates, name)
				putValue(r, fig)
				r.SetDoubleValue(0)
				if span > 0 {
					amount := float64(v)
					if m.Double {
						amount /= 1e9
					}
					r.SetDoubleValue(amount / span)
				}
			}
		}
		for _, fig := range m.Figures() {
			if f.Known&(1<<fig) != 0 {
				setCounter(g.point(totals, pipeline.WindowLifetime), fig, f.Lifetime[fig])
			}
		}
	}
	spans := g.metric(pipeline.MetricSessionWindowSpan, "s")
	partial := g.metric(pipeline.MetricSessionPartial, "1")
	for w, name := range e.Windows {
		g.point(spans, name).SetDoubleValue(float64(f.Windows[w].Span) / 1e9)
		g.point(partial, name).SetIntValue(pipeline.BoolInt(f.Windows[w].Partial))
	}
	g.point(partial, pipeline.WindowLifetime).SetIntValue(pipeline.BoolInt(f.LifetimePartial))
	g.point(g.metric(pipeline.MetricSessionProcesses, "{process}"), "").SetIntValue(f.Processes)
	g.point(g.metric(pipeline.MetricSessionHosts, "{host}"), "").SetIntValue(f.Hosts)
	mem := g.metric(pipeline.MetricSessionMemoryUsage, "By")
	for k := range pipeline.MemoryTypes {
		for _, agg := range []struct {
			name  string
			value int64
		}{{pipeline.MemoryAggregationCluster, f.MemoryCluster[k]}, {pipeline.MemoryAggregationMaxHost, f.MemoryMaxHost[k]}} {
			dp := g.point(mem, "")
			dp.Attributes().PutStr(pipeline.AttrMemoryType, pipeline.MemoryTypes[k].Name)
			dp.Attributes().PutStr(pipeline.AttrMemoryAggregation, agg.name)
			dp.SetIntValue(agg.value)
		}
	}
	if f.Smoothed != nil {
		e.appendSmoothed(g, sessionSmoothed, []HostAverages{{Avgs: f.Smoothed}})
	}
	if f.Skews != nil {
		e.appendSkews(g, f.Skews)
	}
	if f.HostRates != nil {
		e.appendHosts(g, f)
	}
}

// anyOf tells a metric with a figure in the mask (bit per Figure).
func anyOf(m *pipeline.ProcessMetric, mask uint32) bool {
	for _, f := range m.Figures() {
		if mask&(1<<f) != 0 {
			return true
		}
	}
	return false
}

// setCounter writes a counter figure: seconds as a double, the rest as an int.
func setCounter(dp pmetric.NumberDataPoint, f pipeline.Figure, v int64) {
	putValue(dp, f)
	if pipeline.Figures[f].Metric.Double {
		dp.SetDoubleValue(float64(v) / 1e9)
	} else {
		dp.SetIntValue(v)
	}
}

// putValue writes the figure's attribute value, when its metric has one.
func putValue(dp pmetric.NumberDataPoint, f pipeline.Figure) {
	if m := pipeline.Figures[f].Metric; m.Attr != "" {
		dp.Attributes().PutStr(m.Attr, pipeline.Figures[f].Value)
	}
}

// smoothedNames are the metric names of one level (session, host, cluster).
type smoothedNames struct{ cpu, io, memory string }

var (
	sessionSmoothed = smoothedNames{pipeline.MetricSessionCPUUsageSmoothed, pipeline.MetricSessionDiskIORateSmoothed, pipeline.MetricSessionMemoryUsageSmoothed}
	hostSmoothed    = smoothedNames{pipeline.MetricHostCPUUsageSmoothed, pipeline.MetricHostDiskIORateSmoothed, pipeline.MetricHostMemoryUsageSmoothed}
	clusterSmoothed = smoothedNames{pipeline.MetricClusterCPUUsageSmoothed, pipeline.MetricClusterDiskIORateSmoothed, pipeline.MetricClusterMemoryUsageSmoothed}
)

// appendSmoothed writes the three smoothed metrics with one point per
// entity and time constant; an entity with a host name gets host.name.
func (e *Encoder) appendSmoothed(g gauges, names smoothedNames, entities []HostAverages) {
	cpu, io, mem := g.metric(names.cpu, "{cpu}"), g.metric(names.io, "By/s"), g.metric(names.memory, "By")
	point := func(dps pmetric.NumberDataPointSlice, host, constant string, v float64) pmetric.NumberDataPoint {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(g.ts)
		if host != "" {
			dp.Attributes().PutStr(pipeline.AttrHostName, host)
		}
		dp.Attributes().PutStr(pipeline.AttrTimeConstant, constant)
		dp.SetDoubleValue(v)
		return dp
	}
	for _, en := range entities {
		for k, constant := range e.Constants {
			a := &en.Avgs[k]
			point(cpu, en.Host, constant, a.CPU)
			point(io, en.Host, constant, a.Read).Attributes().PutStr(pipeline.AttrDirection, pipeline.DirectionRead)
			point(io, en.Host, constant, a.Write).Attributes().PutStr(pipeline.AttrDirection, pipeline.DirectionWrite)
			point(mem, en.Host, constant, a.Memory)
		}
	}
}

// skewMetrics are the four skew metrics of a session (window) or a query (none).
type skewMetrics struct {
	g                                 gauges
	ratio, overAvg, hottest, segments pmetric.NumberDataPointSlice
}

func newSkewMetrics(g gauges, name func(string) string) skewMetrics {
	return skewMetrics{g: g,
		ratio:    g.metric(name(pipeline.MetricSessionSkewRatio), "1"),
		overAvg:  g.metric(name(pipeline.MetricSessionSkewMaxOverAvg), "1"),
		hottest:  g.metric(name(pipeline.MetricSessionSkewHottestSegment), "1"),
		segments: g.metric(name(pipeline.MetricSessionSkewSegments), "{segment}"),
	}
}

func (s skewMetrics) write(window string, p pipeline.SkewPair) {
	for _, fig := range []struct {
		name string
		sk   pipeline.Skew
	}{{pipeline.SkewFigureCPU, p.CPU}, {pipeline.SkewFigureIO, p.IO}} {
		if !fig.sk.OK {
			continue
		}
		of := func(dps pmetric.NumberDataPointSlice) pmetric.NumberDataPoint {
			dp := s.g.point(dps, window)
			dp.Attributes().PutStr(pipeline.AttrSkewFigure, fig.name)
			return dp
		}
		of(s.ratio).SetDoubleValue(fig.sk.Ratio)
		of(s.overAvg).SetDoubleValue(fig.sk.MaxOverAvg)
		of(s.hottest).SetIntValue(int64(fig.sk.Hottest))
		of(s.segments).SetIntValue(int64(fig.sk.Segments))
	}
}

func (e *Encoder) appendSkews(g gauges, skews []pipeline.SkewPair) {
	s := newSkewMetrics(g, func(n string) string { return n })
	for w, name := range e.Windows {
		s.write(name, skews[w])
	}
	s.write(pipeline.WindowLifetime, skews[len(e.Windows)])
}

// appendHosts writes a session's per-host figures.
func (e *Encoder) appendHosts(g gauges, f *SessionFigures) {
	cpu := g.metric(pipeline.MetricSessionHostCPUUsage, "{cpu}")
	disk := g.metric(pipeline.MetricSessionHostDiskIORate, "By/s")
	for w, name := range e.Windows {
		for _, h := range f.HostRates[w] {
			dp := g.point(cpu, name)
			dp.Attributes().PutStr(pipeline.AttrHostName, h.Host)
			dp.SetDoubleValue(h.CPU)
			for _, d := range []struct {
				dir string
				v   float64
			}{{pipeline.DirectionRead, h.Read}, {pipeline.DirectionWrite, h.Write}} {
				dp := g.point(disk, name)
				dp.Attributes().PutStr(pipeline.AttrHostName, h.Host)
				dp.Attributes().PutStr(pipeline.AttrDirection, d.dir)
				dp.SetDoubleValue(d.v)
			}
		}
	}
	mem := g.metric(pipeline.MetricSessionHostMemory, "By")
	procs := g.metric(pipeline.MetricSessionHostProcesses, "{process}")
	for _, h := range f.HostNow {
		dp := g.point(mem, "")
		dp.Attributes().PutStr(pipeline.AttrHostName, h.Host)
		dp.SetIntValue(h.RSS)
		dp = g.point(procs, "")
		dp.Attributes().PutStr(pipeline.AttrHostName, h.Host)
		dp.SetIntValue(h.Processes)
	}
}

// AppendCluster adds the processor's scope with the cluster figures to the
// snapshot resource.
func (e *Encoder) AppendCluster(rm pmetric.ResourceMetrics, ts pcommon.Timestamp, f *ClusterFigures) {
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(ProcessorScope)
	g := gauges{sm.Metrics(), ts}
	spans := g.metric(pipeline.ClusterMetric(pipeline.MetricSessionWindowSpan), "s")
	for w, name := range e.Windows {
		g.point(spans, name).SetDoubleValue(float64(f.Windows[w].Span) / 1e9)
	}
	for _, m := range pipeline.CounterMetrics {
		cluster := g.metric(pipeline.ClusterMetric(m.Session), m.Unit)
		unattributed := g.metric(pipeline.UnattributedMetric(m.Session), m.Unit)
		// The postmasters' cutime/cstime give CPU only.
		var unrecorded pmetric.NumberDataPointSlice
		withUnrecorded := m == pipeline.ProcessCPUTime
		if withUnrecorded {
			unrecorded = g.metric(pipeline.MetricUnrecordedCPUTime, m.Unit)
		}
		for w, name := range e.Windows {
			cw := &f.Windows[w]
			for _, fig := range m.Figures() {
				setCounter(g.point(cluster, name), fig, cw.Cluster[fig])
				writeSegments(g, unattributed, name, cw.Unattributed, fig)
				if withUnrecorded {
					writeSegments(g, unrecorded, name, cw.Unrecorded, fig)
				}
			}
		}
	}
	if f.Hosts != nil || f.Cluster != nil {
		e.appendSmoothed(g, hostSmoothed, f.Hosts)
		e.appendSmoothed(g, clusterSmoothed, []HostAverages{{Avgs: f.Cluster}})
	}
}

// writeSegments appends one point of the figure per segment.
func writeSegments(g gauges, dps pmetric.NumberDataPointSlice, window string, segments []SegmentCounters, fig pipeline.Figure) {
	for i := range segments {
		s := &segments[i]
		dp := g.point(dps, window)
		dp.Attributes().PutStr(pipeline.AttrHostName, s.Host)
		dp.Attributes().PutInt(pipeline.AttrSegmentID, int64(s.Segment))
		setCounter(dp, fig, s.Counters[fig])
	}
}

// AppendQuery appends one query resource.
func (e *Encoder) AppendQuery(rms pmetric.ResourceMetricsSlice, ts pcommon.Timestamp, q *QueryFigures) {
	rm := rms.AppendEmpty()
	attrs := rm.Resource().Attributes()
	attrs.PutStr(pipeline.AttrResourceKind, pipeline.KindQuery.String())
	attrs.PutInt(pipeline.AttrTmID, q.Session.TmID)
	attrs.PutInt(pipeline.AttrSessionID, q.Session.ID)
	if q.CommandCount > 0 {
		attrs.PutStr(pipeline.AttrQueryKeySource, pipeline.QueryKeyCommandCount)
		attrs.PutInt(pipeline.AttrQueryCommandCount, q.CommandCount)
	} else {
		attrs.PutStr(pipeline.AttrQueryKeySource, pipeline.QueryKeyQueryStart)
	}
	attrs.PutStr(pipeline.AttrQueryStart, pipeline.QueryStartValue(time.Unix(0, q.Start)))
	if q.Text != nil {
		attrs.PutStr(pipeline.AttrDBQueryText, *q.Text)
	}
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(ProcessorScope)
	g := gauges{sm.Metrics(), ts}
	for _, m := range pipeline.CounterMetrics {
		if !anyOf(m, q.Known) {
			continue
		}
		dps := g.metric(pipeline.QueryMetric(m.Session), m.Unit)
		for _, fig := range m.Figures() {
			if q.Known&(1<<fig) != 0 {
				setCounter(g.point(dps, ""), fig, q.Totals[fig])
			}
		}
	}
	cpu := g.metric(pipeline.MetricQuerySegmentCPUTime, "s")
	io := g.metric(pipeline.MetricQuerySegmentDiskIO, "By")
	for _, u := range q.Segments {
		if u.Segment == pipeline.UnknownSegment {
			continue
		}
		segment := func(dps pmetric.NumberDataPointSlice) pmetric.NumberDataPoint {
			dp := g.point(dps, "")
			dp.Attributes().PutStr(pipeline.AttrHostName, u.Host)
			dp.Attributes().PutInt(pipeline.AttrSegmentID, int64(u.Segment))
			return dp
		}
		segment(cpu).SetDoubleValue(float64(u.CPU) / 1e9)
		r := segment(io)
		r.Attributes().PutStr(pipeline.AttrDirection, pipeline.DirectionRead)
		r.SetIntValue(u.Read)
		w := segment(io)
		w.Attributes().PutStr(pipeline.AttrDirection, pipeline.DirectionWrite)
		w.SetIntValue(u.Written)
	}
	// The session skew figures' shape, without gpotel.window.
	newSkewMetrics(g, pipeline.QueryMetric).write("", q.Skew)
	end := int64(ts)
	if q.End != 0 {
		end = q.End
	}
	g.point(g.metric(pipeline.MetricQueryDuration, "s"), "").SetDoubleValue(float64(max(end-q.Start, 0)) / 1e9)
	g.point(g.metric(pipeline.MetricQueryCompleted, "1"), "").SetIntValue(pipeline.BoolInt(q.End != 0))
	g.point(g.metric(pipeline.MetricQueryPartial, "1"), "").SetIntValue(pipeline.BoolInt(q.Partial))
	if sp := q.Spill; sp != nil {
		g.point(g.metric(pipeline.MetricQuerySpillSize, "By"), "").SetIntValue(sp.Bytes)
		g.point(g.metric(pipeline.MetricQuerySpillFiles, "{file}"), "").SetIntValue(sp.Files)
		g.point(g.metric(pipeline.MetricQuerySpillSizeMax, "By"), "").SetIntValue(sp.MaxBytes)
		g.point(g.metric(pipeline.MetricQuerySpillFilesMax, "{file}"), "").SetIntValue(sp.MaxFiles)
	}
}
