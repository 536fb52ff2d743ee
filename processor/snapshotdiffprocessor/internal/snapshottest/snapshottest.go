// Package snapshottest builds receiver-shaped snapshots (docs/pipeline.md)
// for tests and benchmarks of the snapshotdiff processor.
package snapshottest

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	sc "github.com/gpotel/gpotel/internal/gpsemconv"
)

// Snapshot is one scrape as the gpsession receiver emits it.
type Snapshot struct {
	Time        time.Time
	TmID        int64
	Coordinator string // host.name of the snapshot and session resources
	Hosts       []Host
	Sessions    []Session
	Processes   []Process
}

// Host is one gpotel.host.up / gpotel.host.processes pair.
type Host struct {
	Name      string
	Up        bool
	Processes int64
}

// Session is one coordinator pg_stat_activity row heading a session.
type Session struct {
	ID     int64
	PID    int64
	DB     string
	User   string
	System bool
	State  string
	// QueryStart, StateChange (zero: NULL) and Query go into the metadata too.
	QueryStart, StateChange time.Time
	Query                   string
}

// Process is one process an agent answered for, in SI units.
type Process struct {
	Host    string
	Segment int64
	Session int64
	PID     int64
	Created time.Time

	CPUUser, CPUSystem      float64 // s
	ReadBytes, WriteBytes   int64
	CancelledWrite          int64
	DiskDelay               float64 // s
	RChar, WChar            int64
	SyscR, SyscW            int64
	MajorFaults, MinorFault int64
	Voluntary, Involuntary  int64
	RunDelay                float64 // s

	RSS, RSSAnon, RSSFile, RSSShmem int64
	Virtual, Peak, VirtualPeak      int64

	NoIO bool // /proc/<pid>/io was unreadable: its metrics are absent
	// NoSegment leaves gpotel.segment.id off its gpotel.process.info point.
	NoSegment bool

	CommandCount int64 // cmd<N> of its title; 0: the title has none

	// Exited makes it part of an exited resource: final totals from an exit
	// record; Unattributed leaves its session out (no scrape saw it).
	Exited, Unattributed bool
	// Unrecorded makes it a postmaster's point in an unrecorded resource
	// (no session): CPU its reaped children used beyond their exit records.
	Unrecorded bool
}

// Metrics renders the snapshot as one pmetric.Metrics.
func (s Snapshot) Metrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	ts := pcommon.NewTimestampFromTime(s.Time)

	rm := md.ResourceMetrics().AppendEmpty()
	ra := rm.Resource().Attributes()
	ra.PutStr(sc.AttrResourceKind, sc.KindSnapshot)
	ra.PutInt(sc.AttrTmID, s.TmID)
	ra.PutStr(sc.AttrDialect, "gp6")
	ra.PutStr(sc.AttrHostName, s.Coordinator)
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	up := gauge(ms, sc.MetricHostUp, "1")
	procs := gauge(ms, sc.MetricHostProcesses, "{process}")
	for _, h := range s.Hosts {
		v := int64(0)
		if h.Up {
			v = 1
		}
		dp := up.DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		dp.Attributes().PutStr(sc.AttrHostName, h.Name)
		dp.SetIntValue(v)
		dp = procs.DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		dp.Attributes().PutStr(sc.AttrHostName, h.Name)
		dp.SetIntValue(h.Processes)
	}

	for _, ss := range s.Sessions {
		rm := md.ResourceMetrics().AppendEmpty()
		ra := rm.Resource().Attributes()
		ra.PutStr(sc.AttrResourceKind, sc.KindSession)
		ra.PutInt(sc.AttrTmID, s.TmID)
		ra.PutInt(sc.AttrSessionID, ss.ID)
		ra.PutInt(sc.AttrSessionPID, ss.PID)
		ra.PutBool(sc.AttrSessionSystem, ss.System)
		ra.PutStr(sc.AttrDBNamespace, ss.DB)
		ra.PutStr(sc.AttrSessionUser, ss.User)
		ra.PutStr(sc.AttrHostName, s.Coordinator)
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName(sc.MetricSessionInfo)
		m.SetUnit("1")
		m.Metadata().PutStr(sc.MetaState, ss.State)
		for key, t := range map[string]time.Time{sc.MetaQueryStart: ss.QueryStart, sc.MetaStateChange: ss.StateChange} {
			if !t.IsZero() {
				m.Metadata().PutStr(key, t.UTC().Format(time.RFC3339Nano))
			}
		}
		if ss.Query != "" {
			m.Metadata().PutStr(sc.MetaQuery, ss.Query)
		}
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetIntValue(1)
	}

	s.appendProcesses(md, s.Processes, ts)
	return md
}

// Batches renders the snapshot as the receiver hands it on: one batch of
// process resources per host, then the closing batch (Metrics without the
// processes).
func (s Snapshot) Batches() []pmetric.Metrics {
	ts := pcommon.NewTimestampFromTime(s.Time)
	var out []pmetric.Metrics
	var hosts []string
	byHost := map[string][]Process{}
	for _, p := range s.Processes {
		if _, ok := byHost[p.Host]; !ok {
			hosts = append(hosts, p.Host)
		}
		byHost[p.Host] = append(byHost[p.Host], p)
	}
	for _, h := range hosts {
		md := pmetric.NewMetrics()
		s.appendProcesses(md, byHost[h], ts)
		out = append(out, md)
	}
	closing := s
	closing.Processes = nil
	return append(out, closing.Metrics())
}

// processPoint is one data point of a process metric.
type processPoint struct {
	attr, value string
	i           int64
	f           float64
}

// processMetric renders one metric of the process resources.
type processMetric struct {
	name, unit string
	sum        bool
	double     bool
	points     func(p *Process) []processPoint
}

var processMetrics = []processMetric{
	{sc.MetricProcessInfo, "1", false, false, func(*Process) []processPoint { return []processPoint{{i: 1}} }},
	{sc.MetricProcessCPUTime, "s", true, true, func(p *Process) []processPoint {
		return []processPoint{{attr: sc.AttrCPUMode, value: sc.CPUModeUser, f: p.CPUUser}, {attr: sc.AttrCPUMode, value: sc.CPUModeSys, f: p.CPUSystem}}
	}},
	{sc.MetricProcessDiskIO, "By", true, false, func(p *Process) []processPoint {
		if p.NoIO {
			return nil
		}
		return []processPoint{{attr: sc.AttrDirection, value: sc.DirectionRead, i: p.ReadBytes}, {attr: sc.AttrDirection, value: sc.DirectionWrite, i: p.WriteBytes}}
	}},
	{sc.MetricProcessCancelledWrite, "By", true, false, func(p *Process) []processPoint {
		if p.NoIO {
			return nil
		}
		return []processPoint{{i: p.CancelledWrite}}
	}},
	{sc.MetricProcessIOChars, "By", true, false, func(p *Process) []processPoint {
		if p.NoIO {
			return nil
		}
		return []processPoint{{attr: sc.AttrDirection, value: sc.DirectionRead, i: p.RChar}, {attr: sc.AttrDirection, value: sc.DirectionWrite, i: p.WChar}}
	}},
	{sc.MetricProcessIOSyscalls, "{syscall}", true, false, func(p *Process) []processPoint {
		if p.NoIO {
			return nil
		}
		return []processPoint{{attr: sc.AttrDirection, value: sc.DirectionRead, i: p.SyscR}, {attr: sc.AttrDirection, value: sc.DirectionWrite, i: p.SyscW}}
	}},
	{sc.MetricProcessDiskDelay, "s", true, true, func(p *Process) []processPoint { return []processPoint{{f: p.DiskDelay}} }},
	{sc.MetricProcessPagingFaults, "{fault}", true, false, func(p *Process) []processPoint {
		return []processPoint{{attr: sc.AttrFaultType, value: sc.FaultTypeMajor, i: p.MajorFaults}, {attr: sc.AttrFaultType, value: sc.FaultTypeMinor, i: p.MinorFault}}
	}},
	{sc.MetricProcessContextSwitches, "{context_switch}", true, false, func(p *Process) []processPoint {
		return []processPoint{{attr: sc.AttrContextSwitchType, value: sc.ContextSwitchVol, i: p.Voluntary}, {attr: sc.AttrContextSwitchType, value: sc.ContextSwitchInvol, i: p.Involuntary}}
	}},
	{sc.MetricProcessRunDelay, "s", true, true, func(p *Process) []processPoint { return []processPoint{{f: p.RunDelay}} }},
	{sc.MetricProcessMemoryUsage, "By", false, false, func(p *Process) []processPoint { return []processPoint{{i: p.RSS}} }},
	{sc.MetricProcessMemoryVirtual, "By", false, false, func(p *Process) []processPoint { return []processPoint{{i: p.Virtual}} }},
	{sc.MetricProcessMemoryPeak, "By", false, false, func(p *Process) []processPoint { return []processPoint{{i: p.Peak}} }},
	{sc.MetricProcessMemoryVirtPeak, "By", false, false, func(p *Process) []processPoint { return []processPoint{{i: p.VirtualPeak}} }},
	{sc.MetricProcessMemoryRSS, "By", false, false, func(p *Process) []processPoint {
		return []processPoint{{attr: sc.AttrRSSType, value: sc.RSSTypeAnon, i: p.RSSAnon}, {attr: sc.AttrRSSType, value: sc.RSSTypeFile, i: p.RSSFile}, {attr: sc.AttrRSSType, value: sc.RSSTypeShmem, i: p.RSSShmem}}
	}},
	{sc.MetricProcessThreadCount, "{thread}", false, false, func(*Process) []processPoint { return []processPoint{{i: 1}} }},
	{sc.MetricProcessCommandCount, "1", false, false, func(p *Process) []processPoint {
		if p.CommandCount == 0 {
			return nil
		}
		return []processPoint{{i: p.CommandCount}}
	}},
}

// appendProcesses writes one process resource per (host, session), in the
// order the pairs first appear, with one point per process in every metric.
func (s Snapshot) appendProcesses(md pmetric.Metrics, procs []Process, ts pcommon.Timestamp) {
	type group struct {
		host                             string
		session                          int64
		exited, unattributed, unrecorded bool
	}
	var groups []group
	members := map[group][]*Process{}
	for i := range procs {
		g := group{procs[i].Host, procs[i].Session, procs[i].Exited, procs[i].Unattributed, procs[i].Unrecorded}
		if _, ok := members[g]; !ok {
			groups = append(groups, g)
		}
		members[g] = append(members[g], &procs[i])
	}
	for _, g := range groups {
		rm := md.ResourceMetrics().AppendEmpty()
		ra := rm.Resource().Attributes()
		kind := sc.KindProcess
		switch {
		case g.unrecorded:
			kind = sc.KindUnrecorded
		case g.exited:
			kind = sc.KindExited
		}
		ra.PutStr(sc.AttrResourceKind, kind)
		ra.PutInt(sc.AttrTmID, s.TmID)
		ra.PutStr(sc.AttrHostName, g.host)
		if !g.unattributed && !g.unrecorded {
			ra.PutInt(sc.AttrSessionID, g.session)
		}
		ms := rm.ScopeMetrics().AppendEmpty().Metrics()
		for _, pm := range processMetrics {
			m := ms.AppendEmpty()
			m.SetName(pm.name)
			m.SetUnit(pm.unit)
			var dps pmetric.NumberDataPointSlice
			if pm.sum {
				sm := m.SetEmptySum()
				sm.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
				sm.SetIsMonotonic(true)
				dps = sm.DataPoints()
			} else {
				dps = m.SetEmptyGauge().DataPoints()
			}
			for _, p := range members[g] {
				for _, pt := range pm.points(p) {
					dp := dps.AppendEmpty()
					dp.SetStartTimestamp(pcommon.NewTimestampFromTime(p.Created))
					dp.SetTimestamp(ts)
					dp.Attributes().PutInt(sc.AttrProcessPID, p.PID)
					if pm.name == sc.MetricProcessInfo {
						if !p.NoSegment {
							dp.Attributes().PutInt(sc.AttrSegmentID, p.Segment)
						}
						dp.Attributes().PutBool(sc.AttrProcessSystem, p.Session == 0)
					}
					if pt.attr != "" {
						dp.Attributes().PutStr(pt.attr, pt.value)
					}
					if pm.double {
						dp.SetDoubleValue(pt.f)
					} else {
						dp.SetIntValue(pt.i)
					}
				}
			}
			if dps.Len() == 0 {
				ms.RemoveIf(func(x pmetric.Metric) bool { return x.Name() == pm.name })
			}
		}
	}
}

func gauge(ms pmetric.MetricSlice, name, unit string) pmetric.Gauge {
	m := ms.AppendEmpty()
	m.SetName(name)
	m.SetUnit(unit)
	return m.SetEmptyGauge()
}
