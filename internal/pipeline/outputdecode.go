// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

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
	v, ok := attrs.Get(AttrWindow)
	if !ok {
		return WindowOther
	}
	w := v.AsString()
	if w == WindowLifetime {
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
		rooms [2]StatValues
	})
	last, total := &block.stats[0], &block.stats[1]
	var lastFound, totalFound bool
	var avgs procAvgs
	var hosts sessionHosts
	eachPoint(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
		name, a := m.Name(), dp.Attributes()
		switch name {
		case MetricSessionInfo:
			return
		case MetricSessionCPUUsageSmoothed, MetricSessionDiskIORateSmoothed, MetricSessionMemoryUsageSmoothed:
			avgs.add(name, dp)
			return
		case MetricSessionHostCPUUsage, MetricSessionHostDiskIORate, MetricSessionHostMemory, MetricSessionHostProcesses:
			hosts.add(name, dp, wm)
			return
		case MetricSessionProcesses:
			n := uint32(min(pointUint(dp), math.MaxUint32))
			last.Processes, total.Processes = n, n
			return
		case MetricSessionHosts:
			n := uint32(min(pointUint(dp), math.MaxUint32))
			last.Hosts, total.Hosts = n, n
			return
		case MetricSessionCgroupPress:
			setPressure(last, a, pointFloat(dp))
			setPressure(total, a, pointFloat(dp))
			return
		case MetricSessionMemoryUsage:
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

func finishStat(st *yagpcc.SystemStat) {
	st.RunningTimeSeconds = st.UserTimeSeconds + st.KernelTimeSeconds
}

// setSystemStat folds one point of a session figure (or of a query
// figure, under its session name) into st; its optional fields point into room.
func setSystemStat(st *yagpcc.SystemStat, room *StatValues, name string, a pcommon.Map, dp pmetric.NumberDataPoint) {
	if m, ok := counterMetricBySession[name]; ok {
		f := m.figures[0]
		if m.Attr != "" {
			v, ok := a.Get(m.Attr)
			if !ok {
				return
			}
			if f, ok = m.figureOf(v.AsString()); !ok {
				return
			}
		}
		Figures[f].Stat.set(st, &room[f], dp)
		return
	}
	switch name {
	case MetricSessionWindowSpan:
		st.WindowSeconds = pointFloat(dp)
	case MetricSessionPartial:
		st.Partial = pointFloat(dp) != 0
	case MetricSessionSkewRatio, MetricSessionSkewMaxOverAvg, MetricSessionSkewHottestSegment, MetricSessionSkewSegments:
		setSkew(st, name, a, dp)
	}
}

// setSkew folds one skew point into st. A point of an unknown figure, or a
// hottest segment that is no segment's content id, is bad input and skipped.
func setSkew(st *yagpcc.SystemStat, name string, a pcommon.Map, dp pmetric.NumberDataPoint) {
	var skew, overAvg *float64
	var hottest **int32
	switch str(a, AttrSkewFigure) {
	case SkewFigureCPU:
		skew, overAvg, hottest = &st.CpuSkew, &st.CpuMaxOverAvg, &st.CpuHottestSegment
	case SkewFigureIO:
		skew, overAvg, hottest = &st.IoSkew, &st.IoMaxOverAvg, &st.IoHottestSegment
	default:
		return
	}
	switch name {
	case MetricSessionSkewRatio:
		*skew = pointFloat(dp)
	case MetricSessionSkewMaxOverAvg:
		*overAvg = pointFloat(dp)
	case MetricSessionSkewHottestSegment:
		if v := pointFloat(dp); v >= 0 && v <= math.MaxInt32 {
			seg := int32(v)
			*hottest = &seg
		}
	case MetricSessionSkewSegments:
		st.SkewSegments = uint32(min(pointUint(dp), math.MaxUint32))
	}
}

// setMemory folds one gpotel.session.memory.usage point into st.
func setMemory(st *yagpcc.SystemStat, a pcommon.Map, dp pmetric.NumberDataPoint) {
	typ := str(a, AttrMemoryType)
	maxHost := str(a, AttrMemoryAggregation) == MemoryAggregationMaxHost
	for i := range MemoryTypes {
		mt := &MemoryTypes[i]
		if mt.Name != typ {
			continue
		}
		field := mt.Cluster
		if maxHost {
			field = mt.MaxHost
		}
		field.set(st, nil, dp)
		return
	}
}

// setPressure keeps the largest "some" stall share per resource over a session's groups.
func setPressure(st *yagpcc.SystemStat, a pcommon.Map, v float64) {
	if str(a, AttrPressureKind) != PressureSome {
		return
	}
	var dst *float64
	switch str(a, AttrPressureResource) {
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

// procAvgs collects a session's smoothed figures, one ProcAvg per
// gpotel.time_constant; a point whose time constant is no duration is
// bad input and skipped.
type procAvgs struct {
	byConstant map[string]*yagpcc.ProcAvg
}

func (pa *procAvgs) add(name string, dp pmetric.NumberDataPoint) {
	a := dp.Attributes()
	avg := pa.of(str(a, AttrTimeConstant))
	if avg == nil {
		return
	}
	v := max(pointFloat(dp), 0)
	switch name {
	case MetricSessionCPUUsageSmoothed:
		avg.CpuCores = v
	case MetricSessionMemoryUsageSmoothed:
		avg.RssBytes = v
	case MetricSessionDiskIORateSmoothed:
		switch str(a, AttrDirection) {
		case DirectionRead:
			avg.ReadBytesPerSecond = v
		case DirectionWrite:
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
	host := str(a, AttrHostName)
	windowed := name == MetricSessionHostCPUUsage || name == MetricSessionHostDiskIORate
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
	v := max(pointFloat(dp), 0)
	switch name {
	case MetricSessionHostCPUUsage:
		h.Usage.CpuCores = v
	case MetricSessionHostMemory:
		h.Usage.RssBytes = pointUint(dp)
	case MetricSessionHostProcesses:
		h.Usage.Processes = uint32(min(pointUint(dp), math.MaxUint32))
	case MetricSessionHostDiskIORate:
		switch str(a, AttrDirection) {
		case DirectionRead:
			h.Usage.ReadBytesPerSecond = v
		case DirectionWrite:
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
	Session      SessionKey
	CommandCount int64 // 0: keyed by Start
	Start        time.Time
	Text         string // db.query.text, when the processor writes it
	Duration     float64
	Completed    bool
	Stat         *yagpcc.SystemStat
	Segments     []*yagpcc.SegmentMetrics // by content id
	Spill        *QuerySpill              // nil: none written
}

// DecodeQuery reads one query resource; ok is false without its identity.
func DecodeQuery(rm pmetric.ResourceMetrics) (QueryOutput, bool) {
	attrs := rm.Resource().Attributes()
	key, ok := SessionKeyOf(attrs)
	start, err := time.Parse(time.RFC3339Nano, str(attrs, AttrQueryStart))
	if !ok || err != nil {
		return QueryOutput{}, false
	}
	stat := new(struct {
		stat yagpcc.SystemStat
		room StatValues
	})
	q := QueryOutput{Session: key, Start: start.UTC(), Text: str(attrs, AttrDBQueryText), Stat: &stat.stat}
	if ccnt := attrInt(attrs, AttrQueryCommandCount); ccnt.V > 0 {
		q.CommandCount = ccnt.V
	}
	segs := map[int64]*yagpcc.SegmentMetrics{}
	segment := func(a pcommon.Map) *yagpcc.SystemStat {
		content := attrInt(a, AttrSegmentID)
		if !content.Valid || content.V < math.MinInt32 || content.V > math.MaxInt32 {
			return nil
		}
		sm := segs[content.V]
		if sm == nil {
			sm = &yagpcc.SegmentMetrics{
				Hostname:       str(a, AttrHostName),
				SegmentKey:     &yagpcc.SegmentKey{Segindex: int32(content.V)},
				SegmentMetrics: &yagpcc.GPMetrics{SystemStat: &yagpcc.SystemStat{}},
			}
			segs[content.V] = sm
		}
		return sm.SegmentMetrics.SystemStat
	}
	eachPoint(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
		switch m.Name() {
		case MetricQueryDuration:
			q.Duration = pointFloat(dp)
		case MetricQueryCompleted:
			q.Completed = pointFloat(dp) != 0
		case MetricQuerySpillSize, MetricQuerySpillFiles, MetricQuerySpillSizeMax, MetricQuerySpillFilesMax:
			if q.Spill == nil {
				q.Spill = &QuerySpill{}
			}
			v := intValue(dp)
			switch m.Name() {
			case MetricQuerySpillSize:
				q.Spill.Bytes = v
			case MetricQuerySpillFiles:
				q.Spill.Files = v
			case MetricQuerySpillSizeMax:
				q.Spill.MaxBytes = v
			default:
				q.Spill.MaxFiles = v
			}
		case MetricQuerySegmentCPUTime:
			if st := segment(dp.Attributes()); st != nil {
				st.RunningTimeSeconds = pointFloat(dp)
			}
		case MetricQuerySegmentDiskIO:
			if st := segment(dp.Attributes()); st != nil {
				switch str(dp.Attributes(), AttrDirection) {
				case DirectionRead:
					st.ReadBytes = pointUint(dp)
				case DirectionWrite:
					st.WriteBytes = pointUint(dp)
				}
			}
		default:
			if name, ok := SessionMetricOfQuery(m.Name()); ok {
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
	out := HostTops{Time: firstPointTime(rm), Hosts: map[string]*gpotelv1.HostTop{}}
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
		return name == MetricHostCPUUsageSmoothed || name == MetricHostDiskIORateSmoothed || name == MetricHostMemoryUsageSmoothed
	}
	// Host averages at the shortest time constant: the closest to "now".
	tau := math.Inf(1)
	eachPoint(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
		if !smoothed(m.Name()) {
			return
		}
		if d, err := time.ParseDuration(str(dp.Attributes(), AttrTimeConstant)); err == nil && d > 0 {
			tau = min(tau, d.Seconds())
		}
	})
	eachPoint(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
		a := dp.Attributes()
		name := str(a, AttrHostName)
		if name == "" {
			return
		}
		switch {
		case m.Name() == MetricHostUp:
			host(name).Up = pointFloat(dp) == 1
			return
		case m.Name() == MetricHostProcesses:
			usage(name).Processes = uint32(min(pointUint(dp), math.MaxUint32))
			return
		case m.Name() == MetricHostCPUs:
			if n, ok := hostCPUs(dp); ok {
				host(name).Cpus = &n
			}
			return
		case !smoothed(m.Name()):
			return
		}
		if d, err := time.ParseDuration(str(a, AttrTimeConstant)); err != nil || d.Seconds() != tau {
			return
		}
		u, v := usage(name), max(pointFloat(dp), 0)
		switch m.Name() {
		case MetricHostCPUUsageSmoothed:
			u.CpuCores = v
		case MetricHostMemoryUsageSmoothed:
			u.RssBytes = pointUint(dp)
		case MetricHostDiskIORateSmoothed:
			switch str(a, AttrDirection) {
			case DirectionRead:
				u.ReadBytesPerSecond = v
			case DirectionWrite:
				u.WriteBytesPerSecond = v
			}
		}
	})
	if !math.IsInf(tau, 1) {
		out.Tau = tau
	}
	return out
}
