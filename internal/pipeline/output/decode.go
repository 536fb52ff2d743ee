// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package output

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// Window is which SystemStat a windowed figure fills.
type Window uint8

// The windows a consumer of the processor's output tells apart.
const (
	WindowOther          Window = iota // a window nobody asked for
	WindowLast                         // the window the consumer reports (last_metrics)
	WindowLifetimeTotals               // gpotel.window=lifetime (total_metrics)
)

// WindowMatcher tells the window a consumer reports from the others. It
// compares durations, not spellings: "5m" and "5m0s" are one window. Not
// safe for concurrent use.
type WindowMatcher struct {
	Last  time.Duration
	cache map[string]bool
}

// Of reads a data point's gpotel.window.
func (wm *WindowMatcher) Of(attrs pcommon.Map) Window {
	v, ok := attrs.Get(pipeline.AttrWindow)
	if !ok {
		return WindowOther
	}
	w := v.AsString()
	if w == pipeline.WindowLifetime {
		return WindowLifetimeTotals
	}
	match, known := wm.cache[w]
	if !known {
		d, err := time.ParseDuration(w)
		match = err == nil && d == wm.Last
		if wm.cache == nil {
			wm.cache = map[string]bool{}
		}
		wm.cache[w] = match
	}
	if match {
		return WindowLast
	}
	return WindowOther
}

// SessionOutput is what the processor's figures on one session resource
// say, in yagpcc's and gpotel.v1's messages.
type SessionOutput struct {
	// Last and Total are the reported window's figures and the lifetime
	// totals; nil when the resource has none of that window.
	Last, Total *yagpcc.SystemStat
	ProcAvg     []*yagpcc.ProcAvg            // per time constant, shortest first
	Hosts       []*gpotelv1.SessionHostUsage // the reported window's, by host name
}

// DecodeSessionFigures reads a session resource's figures: the session
// figures into SystemStat (Figures' Stat column, MemoryTypes, skew,
// pressure), the smoothed ones into ProcAvg, the per-host ones.
func DecodeSessionFigures(rm pmetric.ResourceMetrics, wm *WindowMatcher) SessionOutput {
	// One allocation for both stats and where their optional fields
	// point: a snapshot reads one per session.
	block := new(struct {
		stats [2]yagpcc.SystemStat
		rooms [2]pipeline.StatValues
	})
	last, total := &block.stats[0], &block.stats[1]
	var lastFound, totalFound bool
	var avgs procAvgs
	var hosts sessionHosts
	pipeline.EachPoint(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
		name, a := m.Name(), dp.Attributes()
		switch name {
		case pipeline.MetricSessionInfo:
			return
		case pipeline.MetricSessionCPUUsageSmoothed, pipeline.MetricSessionDiskIORateSmoothed, pipeline.MetricSessionMemoryUsageSmoothed:
			avgs.add(name, dp)
			return
		case pipeline.MetricSessionHostCPUUsage, pipeline.MetricSessionHostDiskIORate, pipeline.MetricSessionHostMemory, pipeline.MetricSessionHostProcesses:
			hosts.add(name, dp, wm)
			return
		case pipeline.MetricSessionProcesses:
			n := uint32(min(pipeline.PointUint(dp), math.MaxUint32))
			last.Processes, total.Processes = n, n
			return
		case pipeline.MetricSessionHosts:
			n := uint32(min(pipeline.PointUint(dp), math.MaxUint32))
			last.Hosts, total.Hosts = n, n
			return
		case pipeline.MetricSessionCgroupPress:
			setPressure(last, a, pipeline.PointFloat(dp))
			setPressure(total, a, pipeline.PointFloat(dp))
			return
		case pipeline.MetricSessionMemoryUsage:
			// Memory is a gauge of the newest snapshot: the same in both stats.
			setMemory(last, a, dp)
			setMemory(total, a, dp)
			return
		}
		switch wm.Of(a) {
		case WindowLast:
			lastFound = true
			setSystemStat(last, &block.rooms[0], name, a, dp)
		case WindowLifetimeTotals:
			totalFound = true
			setSystemStat(total, &block.rooms[1], name, a, dp)
		}
	})
	out := SessionOutput{ProcAvg: avgs.messages(), Hosts: hosts.list()}
	if lastFound {
		finishStat(last)
		out.Last = last
	}
	if totalFound {
		finishStat(total)
		total.WindowSeconds = 0
		out.Total = total
	}
	return out
}

func finishStat(stat *yagpcc.SystemStat) {
	stat.RunningTimeSeconds = stat.UserTimeSeconds + stat.KernelTimeSeconds
}

// setSystemStat folds one point of a session figure (or of a query
// figure, under its session name) into stat; its optional fields point into room.
func setSystemStat(stat *yagpcc.SystemStat, room *pipeline.StatValues, name string, a pcommon.Map, dp pmetric.NumberDataPoint) {
	if m, ok := pipeline.CounterMetricOfSession(name); ok {
		f := m.Figures()[0]
		if m.Attr != "" {
			v, ok := a.Get(m.Attr)
			if !ok {
				return
			}
			if f, ok = m.FigureOf(v.AsString()); !ok {
				return
			}
		}
		pipeline.Figures[f].Stat.SetPoint(stat, &room[f], dp)
		return
	}
	switch name {
	case pipeline.MetricSessionWindowSpan:
		stat.WindowSeconds = pipeline.PointFloat(dp)
	case pipeline.MetricSessionPartial:
		stat.Partial = pipeline.PointFloat(dp) != 0
	case pipeline.MetricSessionSkewRatio, pipeline.MetricSessionSkewMaxOverAvg, pipeline.MetricSessionSkewHottestSegment, pipeline.MetricSessionSkewSegments:
		setSkew(stat, name, a, dp)
	}
}

// setSkew folds one skew point into stat. A point of an unknown figure, or a
// hottest segment that is no segment's content id, is bad input and skipped.
func setSkew(stat *yagpcc.SystemStat, name string, a pcommon.Map, dp pmetric.NumberDataPoint) {
	var skew, overAvg *float64
	var hottest **int32
	switch pipeline.Str(a, pipeline.AttrSkewFigure) {
	case pipeline.SkewFigureCPU:
		skew, overAvg, hottest = &stat.CpuSkew, &stat.CpuMaxOverAvg, &stat.CpuHottestSegment
	case pipeline.SkewFigureIO:
		skew, overAvg, hottest = &stat.IoSkew, &stat.IoMaxOverAvg, &stat.IoHottestSegment
	default:
		return
	}
	switch name {
	case pipeline.MetricSessionSkewRatio:
		*skew = pipeline.PointFloat(dp)
	case pipeline.MetricSessionSkewMaxOverAvg:
		*overAvg = pipeline.PointFloat(dp)
	case pipeline.MetricSessionSkewHottestSegment:
		if v := pipeline.PointFloat(dp); v >= 0 && v <= math.MaxInt32 {
			seg := int32(v)
			*hottest = &seg
		}
	case pipeline.MetricSessionSkewSegments:
		stat.SkewSegments = uint32(min(pipeline.PointUint(dp), math.MaxUint32))
	}
}

// setMemory folds one gpotel.session.memory.usage point into stat.
func setMemory(stat *yagpcc.SystemStat, a pcommon.Map, dp pmetric.NumberDataPoint) {
	typ := pipeline.Str(a, pipeline.AttrMemoryType)
	maxHost := pipeline.Str(a, pipeline.AttrMemoryAggregation) == pipeline.MemoryAggregationMaxHost
	for i := range pipeline.MemoryTypes {
		mt := &pipeline.MemoryTypes[i]
		if mt.Name != typ {
			continue
		}
		field := mt.Cluster
		if maxHost {
			field = mt.MaxHost
		}
		field.SetPoint(stat, nil, dp)
		return
	}
}

// setPressure keeps the largest "some" stall share per resource over a session's groups.
func setPressure(stat *yagpcc.SystemStat, a pcommon.Map, v float64) {
	if pipeline.Str(a, pipeline.AttrPressureKind) != pipeline.PressureSome {
		return
	}
	var dst *float64
	switch pipeline.Str(a, pipeline.AttrPressureResource) {
	case "cpu":
		dst = &stat.CpuPressure
	case "memory":
		dst = &stat.MemoryPressure
	case "io":
		dst = &stat.IoPressure
	default:
		return
	}
	*dst = max(*dst, v)
}

// procAvgs collects a session's smoothed figures, one ProcAvg per
// gpotel.time_constant; a point whose time constant is no duration is
// bad input and skipped.
type procAvgs struct {
	byConstant map[string]*yagpcc.ProcAvg
}

func (pa *procAvgs) add(name string, dp pmetric.NumberDataPoint) {
	a := dp.Attributes()
	avg := pa.of(pipeline.Str(a, pipeline.AttrTimeConstant))
	if avg == nil {
		return
	}
	v := max(pipeline.PointFloat(dp), 0)
	switch name {
	case pipeline.MetricSessionCPUUsageSmoothed:
		avg.CpuCores = v
	case pipeline.MetricSessionMemoryUsageSmoothed:
		avg.RssBytes = v
	case pipeline.MetricSessionDiskIORateSmoothed:
		switch pipeline.Str(a, pipeline.AttrDirection) {
		case pipeline.DirectionRead:
			avg.ReadBytesPerSecond = v
		case pipeline.DirectionWrite:
			avg.WriteBytesPerSecond = v
		}
	}
}

func (pa *procAvgs) of(constant string) *yagpcc.ProcAvg {
	if avg, ok := pa.byConstant[constant]; ok {
		return avg
	}
	d, err := time.ParseDuration(constant)
	if err != nil || d <= 0 {
		return nil
	}
	if pa.byConstant == nil {
		pa.byConstant = map[string]*yagpcc.ProcAvg{}
	}
	avg := &yagpcc.ProcAvg{TimeConstantSeconds: d.Seconds()}
	pa.byConstant[constant] = avg
	return avg
}

// messages lists the averages shortest time constant first; nil when none.
func (pa *procAvgs) messages() []*yagpcc.ProcAvg {
	return slices.SortedFunc(maps.Values(pa.byConstant), func(a, b *yagpcc.ProcAvg) int { return cmp.Compare(a.TimeConstantSeconds, b.TimeConstantSeconds) })
}

// sessionHosts collects a session's per-host figures of the reported window.
type sessionHosts struct {
	byName map[string]*gpotelv1.SessionHostUsage
}

func (sh *sessionHosts) add(name string, dp pmetric.NumberDataPoint, wm *WindowMatcher) {
	a := dp.Attributes()
	host := pipeline.Str(a, pipeline.AttrHostName)
	windowed := name == pipeline.MetricSessionHostCPUUsage || name == pipeline.MetricSessionHostDiskIORate
	if host == "" || windowed && wm.Of(a) != WindowLast {
		return
	}
	if sh.byName == nil {
		sh.byName = map[string]*gpotelv1.SessionHostUsage{}
	}
	h := sh.byName[host]
	if h == nil {
		h = &gpotelv1.SessionHostUsage{Hostname: host, Usage: &gpotelv1.Usage{}}
		sh.byName[host] = h
	}
	v := max(pipeline.PointFloat(dp), 0)
	switch name {
	case pipeline.MetricSessionHostCPUUsage:
		h.Usage.CpuCores = v
	case pipeline.MetricSessionHostMemory:
		h.Usage.RssBytes = pipeline.PointUint(dp)
	case pipeline.MetricSessionHostProcesses:
		h.Usage.Processes = uint32(min(pipeline.PointUint(dp), math.MaxUint32))
	case pipeline.MetricSessionHostDiskIORate:
		switch pipeline.Str(a, pipeline.AttrDirection) {
		case pipeline.DirectionRead:
			h.Usage.ReadBytesPerSecond = v
		case pipeline.DirectionWrite:
			h.Usage.WriteBytesPerSecond = v
		}
	}
}

// list is the breakdown in host-name order; nil when there is none.
func (sh *sessionHosts) list() []*gpotelv1.SessionHostUsage {
	return slices.SortedFunc(maps.Values(sh.byName), func(a, b *gpotelv1.SessionHostUsage) int { return strings.Compare(a.GetHostname(), b.GetHostname()) })
}

// QueryOutput is one query resource in yagpcc's messages.
type QueryOutput struct {
	Session      pipeline.SessionKey
	CommandCount int64 // 0: keyed by Start
	Start        time.Time
	Text         string // db.query.text, when the processor writes it
	Duration     float64
	Completed    bool
	Stat         *yagpcc.SystemStat
	Segments     []*yagpcc.SegmentMetrics // by content id
	Spill        *pipeline.QuerySpill     // nil: none written
}

// DecodeQuery reads one query resource; ok is false without its identity.
func DecodeQuery(rm pmetric.ResourceMetrics) (QueryOutput, bool) {
	attrs := rm.Resource().Attributes()
	key, ok := pipeline.SessionKeyOf(attrs)
	start, err := time.Parse(time.RFC3339Nano, pipeline.Str(attrs, pipeline.AttrQueryStart))
	if !ok || err != nil {
		return QueryOutput{}, false
	}
	stat := new(struct {
		stat yagpcc.SystemStat
		room pipeline.StatValues
	})
	q := QueryOutput{Session: key, Start: start.UTC(), Text: pipeline.Str(attrs, pipeline.AttrDBQueryText), Stat: &stat.stat}
	if ccnt := pipeline.IntOf(attrs, pipeline.AttrQueryCommandCount); ccnt.V > 0 {
		q.CommandCount = ccnt.V
	}
	segs := map[int64]*yagpcc.SegmentMetrics{}
	segment := func(a pcommon.Map) *yagpcc.SystemStat {
		content := pipeline.IntOf(a, pipeline.AttrSegmentID)
		if !content.Valid || content.V < math.MinInt32 || content.V > math.MaxInt32 {
			return nil
		}
		sm := segs[content.V]
		if sm == nil {
			sm = &yagpcc.SegmentMetrics{
				Hostname:       pipeline.Str(a, pipeline.AttrHostName),
				SegmentKey:     &yagpcc.SegmentKey{Segindex: int32(content.V)},
				SegmentMetrics: &yagpcc.GPMetrics{SystemStat: &yagpcc.SystemStat{}},
			}
			segs[content.V] = sm
		}
		return sm.SegmentMetrics.SystemStat
	}
	pipeline.EachPoint(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
		switch m.Name() {
		case pipeline.MetricQueryDuration:
			q.Duration = pipeline.PointFloat(dp)
		case pipeline.MetricQueryCompleted:
			q.Completed = pipeline.PointFloat(dp) != 0
		case pipeline.MetricQuerySpillSize, pipeline.MetricQuerySpillFiles, pipeline.MetricQuerySpillSizeMax, pipeline.MetricQuerySpillFilesMax:
			if q.Spill == nil {
				q.Spill = &pipeline.QuerySpill{}
			}
			v := pipeline.IntValue(dp)
			switch m.Name() {
			case pipeline.MetricQuerySpillSize:
				q.Spill.Bytes = v
			case pipeline.MetricQuerySpillFiles:
				q.Spill.Files = v
			case pipeline.MetricQuerySpillSizeMax:
				q.Spill.MaxBytes = v
			default:
				q.Spill.MaxFiles = v
			}
		case pipeline.MetricQuerySegmentCPUTime:
			if segStat := segment(dp.Attributes()); segStat != nil {
				segStat.RunningTimeSeconds = pipeline.PointFloat(dp)
			}
		case pipeline.MetricQuerySegmentDiskIO:
			if segStat := segment(dp.Attributes()); segStat != nil {
				switch pipeline.Str(dp.Attributes(), pipeline.AttrDirection) {
				case pipeline.DirectionRead:
					segStat.ReadBytes = pipeline.PointUint(dp)
				case pipeline.DirectionWrite:
					segStat.WriteBytes = pipeline.PointUint(dp)
				}
			}
		default:
			if name, ok := pipeline.SessionMetricOfQuery(m.Name()); ok {
				setSystemStat(q.Stat, &stat.room, name, dp.Attributes(), dp)
			}
		}
	})
	finishStat(q.Stat)
	for _, sm := range segs {
		q.Segments = append(q.Segments, sm)
	}
	slices.SortFunc(q.Segments, func(a, b *yagpcc.SegmentMetrics) int {
		return cmp.Compare(a.GetSegmentKey().GetSegindex(), b.GetSegmentKey().GetSegindex())
	})
	return q, true
}

// HostTops are a snapshot resource's per-host figures at the shortest
// smoothed time constant (Tau seconds; 0 without smoothed figures).
type HostTops struct {
	Time  pcommon.Timestamp
	Tau   float64
	Hosts map[string]*gpotelv1.HostTop
}

// DecodeHostTops reads the snapshot resource's hosts: whether each
// answered, how many processes it was asked about, its online CPUs (absent
// where not reported), and its smoothed usage.
func DecodeHostTops(rm pmetric.ResourceMetrics) HostTops {
	out := HostTops{Time: pipeline.FirstPointTime(rm), Hosts: map[string]*gpotelv1.HostTop{}}
	host := func(name string) *gpotelv1.HostTop {
		if out.Hosts[name] == nil {
			out.Hosts[name] = &gpotelv1.HostTop{Hostname: name}
		}
		return out.Hosts[name]
	}
	usage := func(name string) *gpotelv1.Usage {
		h := host(name)
		if h.Usage == nil {
			h.Usage = &gpotelv1.Usage{}
		}
		return h.Usage
	}
	smoothed := func(name string) bool {
		return name == pipeline.MetricHostCPUUsageSmoothed || name == pipeline.MetricHostDiskIORateSmoothed || name == pipeline.MetricHostMemoryUsageSmoothed
	}
	// Host averages at the shortest time constant: the closest to "now".
	tau := math.Inf(1)
	pipeline.EachPoint(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
		if !smoothed(m.Name()) {
			return
		}
		if d, err := time.ParseDuration(pipeline.Str(dp.Attributes(), pipeline.AttrTimeConstant)); err == nil && d > 0 {
			tau = min(tau, d.Seconds())
		}
	})
	pipeline.EachPoint(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
		a := dp.Attributes()
		name := pipeline.Str(a, pipeline.AttrHostName)
		if name == "" {
			return
		}
		switch {
		case m.Name() == pipeline.MetricHostUp:
			host(name).Up = pipeline.PointFloat(dp) == 1
			return
		case m.Name() == pipeline.MetricHostProcesses:
			usage(name).Processes = uint32(min(pipeline.PointUint(dp), math.MaxUint32))
			return
		case m.Name() == pipeline.MetricHostCPUs:
			if n, ok := pipeline.HostCPUsOf(dp); ok {
				host(name).Cpus = &n
			}
			return
		case !smoothed(m.Name()):
			return
		}
		if d, err := time.ParseDuration(pipeline.Str(a, pipeline.AttrTimeConstant)); err != nil || d.Seconds() != tau {
			return
		}
		u, v := usage(name), max(pipeline.PointFloat(dp), 0)
		switch m.Name() {
		case pipeline.MetricHostCPUUsageSmoothed:
			u.CpuCores = v
		case pipeline.MetricHostMemoryUsageSmoothed:
			u.RssBytes = pipeline.PointUint(dp)
		case pipeline.MetricHostDiskIORateSmoothed:
			switch pipeline.Str(a, pipeline.AttrDirection) {
			case pipeline.DirectionRead:
				u.ReadBytesPerSecond = v
			case pipeline.DirectionWrite:
				u.WriteBytesPerSecond = v
			}
		}
	})
	if !math.IsInf(tau, 1) {
		out.Tau = tau
	}
	return out
}
