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

	// Exited makes it an exited resource: final totals from an exit record;
	// Unattributed leaves its session out (no scrape saw it).
	Exited, Unattributed bool
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
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetIntValue(1)
	}

	for i := range s.Processes {
		s.appendProcess(md, &s.Processes[i], ts)
	}
	return md
}

func (s Snapshot) appendProcess(md pmetric.Metrics, p *Process, ts pcommon.Timestamp) {
	rm := md.ResourceMetrics().AppendEmpty()
	ra := rm.Resource().Attributes()
	kind := sc.KindProcess
	if p.Exited {
		kind = sc.KindExited
	}
	ra.PutStr(sc.AttrResourceKind, kind)
	ra.PutInt(sc.AttrTmID, s.TmID)
	ra.PutStr(sc.AttrHostName, p.Host)
	ra.PutInt(sc.AttrSegmentID, p.Segment)
	if !p.Unattributed {
		ra.PutInt(sc.AttrSessionID, p.Session)
	}
	ra.PutInt(sc.AttrProcessPID, p.PID)
	ra.PutStr(sc.AttrProcessCreationTime, p.Created.UTC().Format(time.RFC3339Nano))
	ra.PutBool(sc.AttrProcessSystem, p.Session == 0)
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	start := pcommon.NewTimestampFromTime(p.Created)

	sum := func(name, unit string) pmetric.NumberDataPointSlice {
		m := ms.AppendEmpty()
		m.SetName(name)
		m.SetUnit(unit)
		sm := m.SetEmptySum()
		sm.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		sm.SetIsMonotonic(true)
		return sm.DataPoints()
	}
	point := func(dps pmetric.NumberDataPointSlice, attr, value string) pmetric.NumberDataPoint {
		dp := dps.AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(ts)
		if attr != "" {
			dp.Attributes().PutStr(attr, value)
		}
		return dp
	}

	cpu := sum(sc.MetricProcessCPUTime, "s")
	point(cpu, sc.AttrCPUMode, sc.CPUModeUser).SetDoubleValue(p.CPUUser)
	point(cpu, sc.AttrCPUMode, sc.CPUModeSys).SetDoubleValue(p.CPUSystem)
	if !p.NoIO {
		disk := sum(sc.MetricProcessDiskIO, "By")
		point(disk, sc.AttrDirection, sc.DirectionRead).SetIntValue(p.ReadBytes)
		point(disk, sc.AttrDirection, sc.DirectionWrite).SetIntValue(p.WriteBytes)
		point(sum(sc.MetricProcessCancelledWrite, "By"), "", "").SetIntValue(p.CancelledWrite)
		chars := sum(sc.MetricProcessIOChars, "By")
		point(chars, sc.AttrDirection, sc.DirectionRead).SetIntValue(p.RChar)
		point(chars, sc.AttrDirection, sc.DirectionWrite).SetIntValue(p.WChar)
		calls := sum(sc.MetricProcessIOSyscalls, "{syscall}")
		point(calls, sc.AttrDirection, sc.DirectionRead).SetIntValue(p.SyscR)
		point(calls, sc.AttrDirection, sc.DirectionWrite).SetIntValue(p.SyscW)
	}
	point(sum(sc.MetricProcessDiskDelay, "s"), "", "").SetDoubleValue(p.DiskDelay)
	faults := sum(sc.MetricProcessPagingFaults, "{fault}")
	point(faults, sc.AttrFaultType, sc.FaultTypeMajor).SetIntValue(p.MajorFaults)
	point(faults, sc.AttrFaultType, sc.FaultTypeMinor).SetIntValue(p.MinorFault)
	switches := sum(sc.MetricProcessContextSwitches, "{context_switch}")
	point(switches, sc.AttrContextSwitchType, sc.ContextSwitchVol).SetIntValue(p.Voluntary)
	point(switches, sc.AttrContextSwitchType, sc.ContextSwitchInvol).SetIntValue(p.Involuntary)
	point(sum(sc.MetricProcessRunDelay, "s"), "", "").SetDoubleValue(p.RunDelay)

	g := func(name string, v int64) {
		gp := gauge(ms, name, "By").DataPoints().AppendEmpty()
		gp.SetTimestamp(ts)
		gp.SetIntValue(v)
	}
	g(sc.MetricProcessMemoryUsage, p.RSS)
	g(sc.MetricProcessMemoryVirtual, p.Virtual)
	g(sc.MetricProcessMemoryPeak, p.Peak)
	g(sc.MetricProcessMemoryVirtPeak, p.VirtualPeak)
	rss := gauge(ms, sc.MetricProcessMemoryRSS, "By")
	for _, kv := range []struct {
		kind string
		v    int64
	}{{sc.RSSTypeAnon, p.RSSAnon}, {sc.RSSTypeFile, p.RSSFile}, {sc.RSSTypeShmem, p.RSSShmem}} {
		dp := rss.DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		dp.Attributes().PutStr(sc.AttrRSSType, kv.kind)
		dp.SetIntValue(kv.v)
	}
	th := gauge(ms, sc.MetricProcessThreadCount, "{thread}").DataPoints().AppendEmpty()
	th.SetTimestamp(ts)
	th.SetIntValue(1)
}

func gauge(ms pmetric.MetricSlice, name, unit string) pmetric.Gauge {
	m := ms.AppendEmpty()
	m.SetName(name)
	m.SetUnit(unit)
	return m.SetEmptyGauge()
}
