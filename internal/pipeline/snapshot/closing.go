// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshot

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/kernelunits"
	"github.com/gpotel/gpotel/internal/pipeline"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// Closing is the batch that closes a snapshot (docs/pipeline.md, rule 1):
// the snapshot resource with each host's answer, every host's pressure and
// control groups, and the sessions. Exited and unrecorded resources follow
// it in the same batch (ProcessEncoder).
type Closing struct {
	Time        time.Time
	TmID        int64
	Dialect     string
	Coordinator string // host.name of the snapshot and session resources
	Hosts       []HostAnswer
	Readings    []HostReading
	Sessions    []Session
	Departed    []HostDepartures // processes that left since the previous snapshot (sparse.Outgoing.Close)
}

// HostAnswer is one host the receiver asked in a scrape.
type HostAnswer struct {
	Host string
	// Up: its agent answered every call and the next consumer accepted
	// every process batch of the host (sparse.Outgoing). A host not up did not
	// answer: its processes are unknown this time, not exited.
	Up        bool
	Processes int64 // processes it was asked about
	// Batches is how many process batches the receiver sent for the host
	// in this snapshot and Sequence the last one's number (sparse batches); 0
	// when it sent none.
	Batches  int64
	Sequence uint64
	// ReadDelay is how long after the snapshot time the host's last
	// answer came (ns): its processes were read no later than that. 0:
	// not measured.
	ReadDelay int64
	// CPUs the host had online at its last answer of the scrape
	// (kernelunits.Host.CPUs); 0: not reported.
	CPUs uint32
}

// HostReading is what a host's agent said beside its processes.
type HostReading struct {
	Host     string
	Pressure *gpotelv1.Pressure // nil: the host reports none
	Groups   []Cgroup
}

// Cgroup is one control group a host's database processes run in.
type Cgroup struct {
	Group *gpotelv1.ControlGroup
	// ResourceGroupName is the resource group's name in the coordinator's
	// catalog; nil when the group is none or the catalog does not name it.
	ResourceGroupName *string
}

// Session is one coordinator row heading a session.
type Session struct {
	ID, PID int64
	System  bool
	// Own is one of the collector's own monitoring connections: its
	// statements are gpotel's, not the cluster's work.
	Own            bool
	Database, User *string // nil: NULL
	// ResourceQueue names the resource queue of the session's role
	// (Greenplum's pg_roles.rolresqueue); "": unknown, or no queues.
	ResourceQueue  string
	State          SessionState
	CgroupPressure []GroupPressure
	// Greenplum is the server's own figures of the session from the
	// receiver's latest read of them; nil when there are none.
	Greenplum *GreenplumSession
}

// GroupPressure is a session's pressure in one of its groups: the largest
// avg10 (percent) of a pressure line over the hosts it runs there.
type GroupPressure struct {
	Name, Resource, Kind string
	Avg10                float64
}

// ClosingEncoder writes closing batches as mdatagen's builder would under
// the same switches; every point's StartTimestamp is the encoder's start.
type ClosingEncoder struct {
	scope    Scope
	start    pcommon.Timestamp
	switches Switches
}

// NewClosingEncoder makes an encoder whose points start at start.
func NewClosingEncoder(scope Scope, start time.Time, sw Switches) *ClosingEncoder {
	return &ClosingEncoder{scope: scope, start: pcommon.NewTimestampFromTime(start), switches: sw}
}

// Encode writes the closing batch: the snapshot resource, each host's
// host and cgroup resources, then one resource per session.
func (e *ClosingEncoder) Encode(c *Closing) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rms := md.ResourceMetrics()
	ts := pcommon.NewTimestampFromTime(c.Time)
	sw := &e.switches

	w := newResourceWriter(sw, e.start, ts)
	for _, h := range c.Hosts {
		w.record(pipeline.HostUp, pipeline.BoolInt(h.Up), 0, h.Host)
		w.record(pipeline.HostProcesses, h.Processes, 0, h.Host)
		if h.CPUs > 0 {
			w.record(pipeline.HostCPUs, int64(h.CPUs), 0, h.Host)
		}
	}
	ra := newResourceAttrs(sw, pipeline.KindSnapshot)
	ra.int(pipeline.AttrTmID, c.TmID)
	ra.str(pipeline.AttrDialect, c.Dialect)
	ra.str(pipeline.AttrHostName, c.Coordinator)
	// Exactly one per snapshot (rule 2), with or without hosts asked.
	w.emit(rms, e.scope, ra.m, true)
	if rms.Len() > 0 {
		appendHostSequences(rms.At(rms.Len()-1), e.start, ts, c.Hosts)
	}

	for _, r := range c.Readings {
		if r.Pressure != nil {
			w := newResourceWriter(sw, e.start, ts)
			recordPressure(w, r.Pressure)
			ra := newResourceAttrs(sw, pipeline.KindHost)
			ra.int(pipeline.AttrTmID, c.TmID)
			ra.str(pipeline.AttrHostName, r.Host)
			w.emit(rms, e.scope, ra.m, false)
		}
		for _, cg := range r.Groups {
			e.encodeCgroup(rms, ts, c, r.Host, cg)
		}
	}

	for i := range c.Sessions {
		s := &c.Sessions[i]
		w := newResourceWriter(sw, e.start, ts)
		w.record(pipeline.SessionInfo, 1, 0)
		s.State.put(w.metadata(pipeline.SessionInfo))
		for _, p := range s.CgroupPressure {
			w.record(pipeline.SessionCgroupPressure, 0, kernelunits.PercentToRatio(p.Avg10), p.Name, p.Resource, p.Kind)
		}
		if s.Greenplum != nil {
			e.encodeGreenplum(w, s.Greenplum)
		}
		ra := newResourceAttrs(sw, pipeline.KindSession)
		ra.int(pipeline.AttrTmID, c.TmID)
		ra.int(pipeline.AttrSessionID, s.ID)
		ra.int(pipeline.AttrSessionPID, s.PID)
		ra.bool(pipeline.AttrSessionSystem, s.System)
		if s.Own {
			ra.bool(pipeline.AttrSessionOwn, true)
		}
		if s.Database != nil {
			ra.str(pipeline.AttrDBNamespace, *s.Database)
		}
		if s.User != nil {
			ra.str(pipeline.AttrSessionUser, *s.User)
		}
		if s.ResourceQueue != "" {
			ra.str(pipeline.AttrResourceQueueName, s.ResourceQueue)
		}
		ra.str(pipeline.AttrHostName, c.Coordinator)
		w.emit(rms, e.scope, ra.m, false)
	}
	for i := range c.Departed {
		appendDepartures(rms, e.scope, ts, c.TmID, &c.Departed[i])
	}
	return md
}

// appendHostSequences adds the framing points of the hosts that sent
// process batches to the snapshot resource: never switched off.
func appendHostSequences(rm pmetric.ResourceMetrics, start, ts pcommon.Timestamp, hosts []HostAnswer) {
	if rm.ScopeMetrics().Len() == 0 {
		return
	}
	ms := rm.ScopeMetrics().At(0).Metrics()
	if slices.ContainsFunc(hosts, func(h HostAnswer) bool { return h.ReadDelay > 0 }) {
		delays := appendMetric(ms, pipeline.MetricHostReadDelay, "How long after the snapshot time the host's last answer came: its processes were read no later "+
			"than that (docs/pipeline.md, query figures).", "s", false)
		for _, h := range hosts {
			if h.ReadDelay > 0 {
				dp := delays.AppendEmpty()
				dp.SetStartTimestamp(start)
				dp.SetTimestamp(ts)
				dp.SetDoubleValue(float64(h.ReadDelay) / 1e9)
				dp.Attributes().PutStr(pipeline.AttrHostName, h.Host)
			}
		}
	}
	if !slices.ContainsFunc(hosts, func(h HostAnswer) bool { return h.Batches > 0 }) {
		return
	}
	batches := appendMetric(ms, pipeline.MetricHostBatches, "Process batches the receiver sent for the host in this snapshot (docs/pipeline.md, the sparse "+
		"batches rule).", "{batch}", false)
	sequence := appendMetric(ms, pipeline.MetricHostSequence, "The sequence number of the host's last process batch of this snapshot.", "1", false)
	for _, h := range hosts {
		if h.Batches == 0 {
			continue
		}
		for _, p := range []struct {
			dps pmetric.NumberDataPointSlice
			v   int64
		}{{batches, h.Batches}, {sequence, int64(h.Sequence)}} { // #nosec G115 -- one per batch
			dp := p.dps.AppendEmpty()
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(ts)
			dp.SetIntValue(p.v)
			dp.Attributes().PutStr(pipeline.AttrHostName, h.Host)
		}
	}
}

func (e *ClosingEncoder) encodeCgroup(rms pmetric.ResourceMetricsSlice, ts pcommon.Timestamp, c *Closing, host string, cg Cgroup) {
	g := cg.Group
	w := newResourceWriter(&e.switches, e.start, ts)
	if g.GetPressure() != nil {
		recordPressure(w, g.GetPressure())
	}
	source := ""
	if t := g.GetTaskStates(); t != nil {
		recordTaskStates(w, t)
		source = pipeline.TasksSourceProcStat
		if t.GetSource() == gpotelv1.TaskStates_SOURCE_CGROUPSTATS {
			source = pipeline.TasksSourceCgroupstats
		}
	}
	ra := newResourceAttrs(&e.switches, pipeline.KindCgroup)
	if source != "" {
		ra.str(pipeline.AttrCgroupTasksSource, source)
	}
	ra.int(pipeline.AttrTmID, c.TmID)
	ra.str(pipeline.AttrHostName, host)
	ra.str(pipeline.AttrCgroupPath, g.GetPath())
	ra.int(pipeline.AttrCgroupVersion, int64(g.GetVersion()))
	if g.GetHierarchy() != "" {
		ra.str(pipeline.AttrCgroupControllers, g.GetHierarchy())
	}
	if oid := g.GetResourceGroupOid(); oid != 0 {
		ra.int(pipeline.AttrResourceGroupOID, int64(oid))
		if cg.ResourceGroupName != nil {
			ra.str(pipeline.AttrResourceGroupName, *cg.ResourceGroupName)
		}
	}
	w.emit(rms, e.scope, ra.m, false)
}

// PressureLine is one line of a pressure file.
type PressureLine struct {
	Resource, Kind string
	Stall          *gpotelv1.PressureStall
}

// PressureLines lists the lines a Pressure holds, in a fixed order:
// cpu, memory, io, irq; some before full.
func PressureLines(p *gpotelv1.Pressure) []PressureLine {
	var out []PressureLine
	for _, r := range []struct {
		name string
		rp   *gpotelv1.ResourcePressure
	}{{"cpu", p.GetCpu()}, {"memory", p.GetMemory()}, {"io", p.GetIo()}, {"irq", p.GetIrq()}} {
		if r.rp.GetSome() != nil {
			out = append(out, PressureLine{r.name, pipeline.PressureSome, r.rp.GetSome()})
		}
		if r.rp.GetFull() != nil {
			out = append(out, PressureLine{r.name, pipeline.PressureFull, r.rp.GetFull()})
		}
	}
	return out
}

func recordPressure(w *resourceWriter, p *gpotelv1.Pressure) {
	for _, l := range PressureLines(p) {
		w.record(pipeline.PressureStallTime, 0, kernelunits.MicrosToSeconds(l.Stall.GetTotalUs()), l.Resource, l.Kind)
		for _, a := range []struct {
			window string
			avg    float64
		}{{"10s", l.Stall.GetAvg10()}, {"60s", l.Stall.GetAvg60()}, {"300s", l.Stall.GetAvg300()}} {
			w.record(pipeline.PressureStallRatio, 0, kernelunits.PercentToRatio(a.avg), l.Resource, l.Kind, a.window)
		}
	}
}

func recordTaskStates(w *resourceWriter, t *gpotelv1.TaskStates) {
	w.record(pipeline.CgroupTasks, t.GetRunning(), 0, "running")
	w.record(pipeline.CgroupTasks, t.GetSleeping(), 0, "sleeping")
	w.record(pipeline.CgroupTasks, t.GetUninterruptible(), 0, "uninterruptible")
	w.record(pipeline.CgroupTasks, t.GetStopped(), 0, "stopped")
	if t.IoWait != nil {
		w.record(pipeline.CgroupTasks, t.GetIoWait(), 0, "io_wait")
	}
	if t.GetSource() == gpotelv1.TaskStates_SOURCE_PROC_STAT {
		w.record(pipeline.CgroupTasks, t.GetOther(), 0, "other")
	}
}

// Header is what a snapshot resource says.
type Header struct {
	Time        pcommon.Timestamp // its first point's; 0 without points
	Coordinator string
	Hosts       []HostAnswer // by gpotel.host.up point; Processes from gpotel.host.processes
}

// DecodeSnapshot reads a snapshot resource. A host.up point without
// host.name is skipped; a host missing from host.up counts as answered.
func DecodeSnapshot(rm pmetric.ResourceMetrics) Header {
	var h Header
	if v, ok := rm.Resource().Attributes().Get(pipeline.AttrHostName); ok {
		h.Coordinator = v.AsString()
	}
	h.Time = pipeline.FirstPointTime(rm)
	processes, batches, sequences, delays := map[string]int64{}, map[string]int64{}, map[string]int64{}, map[string]int64{}
	cpus := map[string]uint32{}
	pipeline.EachPoint(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
		host, ok := dp.Attributes().Get(pipeline.AttrHostName)
		if !ok {
			return
		}
		switch m.Name() {
		case pipeline.MetricHostUp:
			h.Hosts = append(h.Hosts, HostAnswer{Host: host.AsString(), Up: pipeline.IntValue(dp) != 0})
		case pipeline.MetricHostProcesses:
			processes[host.AsString()] = pipeline.IntValue(dp)
		case pipeline.MetricHostBatches:
			batches[host.AsString()] = pipeline.IntValue(dp)
		case pipeline.MetricHostSequence:
			sequences[host.AsString()] = pipeline.IntValue(dp)
		case pipeline.MetricHostReadDelay:
			if v := pipeline.PointFloat(dp); v > 0 && v < 3600 {
				delays[host.AsString()] = int64(v * 1e9)
			}
		case pipeline.MetricHostCPUs:
			if n, ok := pipeline.HostCPUsOf(dp); ok {
				cpus[host.AsString()] = n
			}
		}
	})
	for i := range h.Hosts {
		name := h.Hosts[i].Host
		h.Hosts[i].Processes = processes[name]
		h.Hosts[i].Batches, h.Hosts[i].Sequence = max(batches[name], 0), uint64(max(sequences[name], 0)) // #nosec G115 -- not negative
		h.Hosts[i].ReadDelay = delays[name]
		h.Hosts[i].CPUs = cpus[name]
	}
	return h
}

// SessionHeader is a session resource's identity and attributes.
type SessionHeader struct {
	Key            pipeline.SessionKey
	PID            int64
	System, Own    bool
	Database, User string
	Host           string // the coordinator's
	ResourceQueue  string // "": unknown
}

// DecodeSession reads a session resource's identity, its state and the
// time of its gpotel.session.info point; ok is false without
// gpotel.tm_id and gpotel.session.id. Integers written as strings or
// integral doubles are read as integers.
func DecodeSession(rm pmetric.ResourceMetrics) (h SessionHeader, st SessionState, at pcommon.Timestamp, hasInfo, ok bool) {
	attrs := rm.Resource().Attributes()
	if h.Key, ok = pipeline.SessionKeyOf(attrs); !ok {
		return h, st, 0, false, false
	}
	h.PID = pipeline.IntOf(attrs, pipeline.AttrSessionPID).V
	h.System = pipeline.BoolOf(attrs, pipeline.AttrSessionSystem).V
	h.Own = pipeline.BoolOf(attrs, pipeline.AttrSessionOwn).V
	h.Database = pipeline.Str(attrs, pipeline.AttrDBNamespace)
	h.User = pipeline.Str(attrs, pipeline.AttrSessionUser)
	h.Host = pipeline.Str(attrs, pipeline.AttrHostName)
	h.ResourceQueue = pipeline.Str(attrs, pipeline.AttrResourceQueueName)
	sms := rm.ScopeMetrics()
	for i := range sms.Len() {
		ms := sms.At(i).Metrics()
		for j := range ms.Len() {
			if m := ms.At(j); m.Name() == pipeline.MetricSessionInfo {
				st = readSessionState(m.Metadata())
				if pts := pipeline.NumberPoints(m); pts.Len() > 0 {
					at = pts.At(0).Timestamp()
				}
				return h, st, at, true, true
			}
		}
	}
	return h, st, 0, false, true
}

// DecodeHostPressure reads a host resource: its host and pressure lines.
func DecodeHostPressure(rm pmetric.ResourceMetrics) (host string, figures []*gpotelv1.PressureFigures) {
	return pipeline.Str(rm.Resource().Attributes(), pipeline.AttrHostName), pressureFigures(rm)
}

// DecodeCgroup reads a cgroup resource: its host and the group.
func DecodeCgroup(rm pmetric.ResourceMetrics) (host string, g *gpotelv1.GroupPressure) {
	attrs := rm.Resource().Attributes()
	g = &gpotelv1.GroupPressure{Path: pipeline.Str(attrs, pipeline.AttrCgroupPath), Pressure: pressureFigures(rm)}
	if v := pipeline.IntOf(attrs, pipeline.AttrCgroupVersion); v.Valid {
		g.CgroupVersion = int32(v.V) // #nosec G115 -- 1 or 2
	}
	if v := pipeline.IntOf(attrs, pipeline.AttrResourceGroupOID); v.Valid {
		g.ResourceGroupOid = uint32(v.V) // #nosec G115 -- an oid
	}
	switch name := pipeline.Str(attrs, pipeline.AttrResourceGroupName); {
	case name != "":
		g.Name = name
	case g.ResourceGroupOid != 0:
		g.Name = "oid:" + strconv.FormatUint(uint64(g.ResourceGroupOid), 10)
	default:
		g.Name = g.Path
	}
	pipeline.EachPoint(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
		if m.Name() != pipeline.MetricCgroupTasks {
			return
		}
		if g.Tasks == nil {
			g.Tasks = map[string]int64{}
		}
		g.Tasks[pipeline.Str(dp.Attributes(), pipeline.AttrTaskState)] = pipeline.IntValue(dp)
	})
	return pipeline.Str(attrs, pipeline.AttrHostName), g
}

// pressureFigures gathers a resource's stall time and ratio points into one
// line per (resource, kind), in the order they first appear.
func pressureFigures(rm pmetric.ResourceMetrics) []*gpotelv1.PressureFigures {
	var out []*gpotelv1.PressureFigures
	line := func(dp pmetric.NumberDataPoint) *gpotelv1.PressureFigures {
		r, k := pipeline.Str(dp.Attributes(), pipeline.AttrPressureResource), pipeline.Str(dp.Attributes(), pipeline.AttrPressureKind)
		for _, f := range out {
			if f.Resource == r && f.Kind == k {
				return f
			}
		}
		f := &gpotelv1.PressureFigures{Resource: r, Kind: k}
		out = append(out, f)
		return f
	}
	pipeline.EachPoint(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
		switch m.Name() {
		case pipeline.MetricPressureStallTime:
			line(dp).StallSeconds = pipeline.PointFloat(dp)
		case pipeline.MetricPressureStallRatio:
			f := line(dp)
			switch pipeline.Str(dp.Attributes(), pipeline.AttrPressureWindow) {
			case "10s":
				f.Avg10 = pipeline.PointFloat(dp)
			case "60s":
				f.Avg60 = pipeline.PointFloat(dp)
			case "300s":
				f.Avg300 = pipeline.PointFloat(dp)
			}
		}
	})
	return out
}

// SortGroups orders a host's groups by name.
func SortGroups(gs []*gpotelv1.GroupPressure) {
	slices.SortFunc(gs, func(a, b *gpotelv1.GroupPressure) int { return strings.Compare(a.GetName(), b.GetName()) })
}
