package gpsessionreceiver

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/gpotel/gpotel/internal/gpsql"
	"github.com/gpotel/gpotel/internal/kernelunits"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadata"
)

// queryResourceGroups maps resource group oids to names.
func queryResourceGroups(ctx context.Context, conn *pgx.Conn) (map[uint32]string, error) {
	rows, err := conn.Query(ctx, gpsql.ResourceGroups)
	if err != nil {
		return nil, fmt.Errorf("query resource groups (pg_resgroup): %w", err)
	}
	names := map[uint32]string{}
	var oid int64
	var name string
	if _, err := pgx.ForEachRow(rows, []any{&oid, &name}, func() error {
		if oid > 0 && oid <= 1<<32-1 {
			names[uint32(oid)] = name
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("query resource groups (pg_resgroup): %w", err)
	}
	return names, nil
}

// groupKey identifies a control group on one host.
type groupKey struct {
	version   int32
	hierarchy string
	path      string
}

// hostCgroups is what one host's answers of a scrape said about pressure
// and control groups.
type hostCgroups struct {
	pressure    *gpotelv1.Pressure // the latest answer's
	unavailable []string
	groups      []*gpotelv1.ControlGroup
	index       map[groupKey]int
	// sessions maps a session id to the groups (indexes into groups) its processes run in.
	sessions map[int64][]int
}

// add takes one sane answer: host pressure and groups replace earlier
// readings; task states counted from stat add up over the answers.
func (h *hostCgroups) add(resp *yagpcc.GetPidProcInfoResponse, asked map[int64]*Backend) {
	if hp := resp.GetHostPressure(); hp != nil {
		h.pressure = hp
	}
	h.unavailable = resp.GetHost().GetUnavailable()
	groups := resp.GetControlGroups()
	local := make([]int, len(groups)) // answer's index -> h.groups index
	for i, g := range groups {
		k := groupKey{g.GetVersion(), g.GetHierarchy(), g.GetPath()}
		at, seen := h.index[k]
		switch {
		case !seen:
			if h.index == nil {
				h.index = map[groupKey]int{}
			}
			at = len(h.groups)
			h.index[k] = at
			h.groups = append(h.groups, g)
		case g.GetTaskStates().GetSource() == gpotelv1.TaskStates_SOURCE_PROC_STAT &&
			h.groups[at].GetTaskStates().GetSource() == gpotelv1.TaskStates_SOURCE_PROC_STAT:
			sum := addTaskStates(h.groups[at].GetTaskStates(), g.GetTaskStates())
			h.groups[at] = g
			g.TaskStates = sum
		default:
			h.groups[at] = g
		}
		local[i] = at
	}
	for _, info := range resp.GetPidProcData() {
		if info.ControlGroup == nil || int(info.GetControlGroup()) >= len(local) {
			continue
		}
		b := asked[info.GetPid()]
		if b == nil {
			continue
		}
		if h.sessions == nil {
			h.sessions = map[int64][]int{}
		}
		at := local[info.GetControlGroup()]
		if s := h.sessions[b.SessionID]; !slices.Contains(s, at) {
			h.sessions[b.SessionID] = append(s, at)
		}
	}
}

func addTaskStates(a, b *gpotelv1.TaskStates) *gpotelv1.TaskStates {
	return &gpotelv1.TaskStates{Source: a.GetSource(), Running: a.GetRunning() + b.GetRunning(),
		Sleeping: a.GetSleeping() + b.GetSleeping(), Uninterruptible: a.GetUninterruptible() + b.GetUninterruptible(),
		Stopped: a.GetStopped() + b.GetStopped(), Other: a.GetOther() + b.GetOther()}
}

// cgroupName is how a session's pressure point names a group.
func cgroupName(g *gpotelv1.ControlGroup, names map[uint32]string) string {
	oid := g.GetResourceGroupOid()
	if oid == 0 {
		return g.GetPath()
	}
	if name, ok := names[oid]; ok {
		return name
	}
	return "oid:" + strconv.FormatUint(uint64(oid), 10)
}

type pressureLine struct {
	resource metadata.AttributePressureResource
	kind     metadata.AttributePressureKind
	stall    *gpotelv1.PressureStall
}

// pressureLines lists the lines a Pressure holds, in a fixed order.
func pressureLines(p *gpotelv1.Pressure) []pressureLine {
	var out []pressureLine
	for _, r := range []struct {
		attr metadata.AttributePressureResource
		rp   *gpotelv1.ResourcePressure
	}{
		{metadata.AttributePressureResourceCPU, p.GetCpu()},
		{metadata.AttributePressureResourceMemory, p.GetMemory()},
		{metadata.AttributePressureResourceIo, p.GetIo()},
		{metadata.AttributePressureResourceIrq, p.GetIrq()},
	} {
		if r.rp.GetSome() != nil {
			out = append(out, pressureLine{r.attr, metadata.AttributePressureKindSome, r.rp.GetSome()})
		}
		if r.rp.GetFull() != nil {
			out = append(out, pressureLine{r.attr, metadata.AttributePressureKindFull, r.rp.GetFull()})
		}
	}
	return out
}

func recordPressure(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, p *gpotelv1.Pressure) {
	for _, l := range pressureLines(p) {
		mb.RecordGpotelPressureStallTimeDataPoint(ts, kernelunits.MicrosToSeconds(l.stall.GetTotalUs()), l.resource, l.kind)
		for _, w := range []struct {
			attr metadata.AttributePressureWindow
			avg  float64
		}{
			{metadata.AttributePressureWindow10s, l.stall.GetAvg10()},
			{metadata.AttributePressureWindow60s, l.stall.GetAvg60()},
			{metadata.AttributePressureWindow300s, l.stall.GetAvg300()},
		} {
			mb.RecordGpotelPressureStallRatioDataPoint(ts, kernelunits.PercentToRatio(w.avg), l.resource, l.kind, w.attr)
		}
	}
}

func recordTaskStates(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, t *gpotelv1.TaskStates) {
	mb.RecordGpotelCgroupTasksDataPoint(ts, t.GetRunning(), metadata.AttributeTaskStateRunning)
	mb.RecordGpotelCgroupTasksDataPoint(ts, t.GetSleeping(), metadata.AttributeTaskStateSleeping)
	mb.RecordGpotelCgroupTasksDataPoint(ts, t.GetUninterruptible(), metadata.AttributeTaskStateUninterruptible)
	mb.RecordGpotelCgroupTasksDataPoint(ts, t.GetStopped(), metadata.AttributeTaskStateStopped)
	if t.IoWait != nil {
		mb.RecordGpotelCgroupTasksDataPoint(ts, t.GetIoWait(), metadata.AttributeTaskStateIoWait)
	}
	if t.GetSource() == gpotelv1.TaskStates_SOURCE_PROC_STAT {
		mb.RecordGpotelCgroupTasksDataPoint(ts, t.GetOther(), metadata.AttributeTaskStateOther)
	}
}

// emitHostsAndCgroups writes one host resource per answering host with its
// pressure, and one cgroup resource per group its database processes run in.
func emitHostsAndCgroups(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, s *snapshot) {
	rb := mb.NewResourceBuilder()
	for i := range s.results {
		r := &s.results[i]
		if r.cgroups.pressure != nil {
			recordPressure(mb, ts, r.cgroups.pressure)
			rb.SetGpotelResourceKindHost()
			rb.SetGpotelTmID(s.tmID)
			rb.SetHostName(r.host)
			mb.EmitForResource(metadata.WithResource(rb.Emit()))
		}
		for _, g := range r.cgroups.groups {
			if g.GetPressure() != nil {
				recordPressure(mb, ts, g.GetPressure())
			}
			if t := g.GetTaskStates(); t != nil {
				recordTaskStates(mb, ts, t)
				if t.GetSource() == gpotelv1.TaskStates_SOURCE_CGROUPSTATS {
					rb.SetGpotelCgroupTasksSourceCgroupstats()
				} else {
					rb.SetGpotelCgroupTasksSourceProcStat()
				}
			}
			rb.SetGpotelResourceKindCgroup()
			rb.SetGpotelTmID(s.tmID)
			rb.SetHostName(r.host)
			rb.SetGpotelCgroupPath(g.GetPath())
			rb.SetGpotelCgroupVersion(int64(g.GetVersion()))
			if g.GetHierarchy() != "" {
				rb.SetGpotelCgroupControllers(g.GetHierarchy())
			}
			if oid := g.GetResourceGroupOid(); oid != 0 {
				rb.SetGpotelResourceGroupOid(int64(oid))
				if name, ok := s.resourceGroups[oid]; ok {
					rb.SetGpotelResourceGroupName(name)
				}
			}
			mb.EmitForResource(metadata.WithResource(rb.Emit()))
		}
	}
}

// sessionPressure is, per session, per group name, the largest avg10 of each
// pressure line over the hosts where the session's processes run in it.
type sessionPressure map[int64]map[string]map[[2]string]float64

func sessionPressureOf(s *snapshot) sessionPressure {
	out := sessionPressure{}
	for i := range s.results {
		h := &s.results[i].cgroups
		for session, groups := range h.sessions {
			for _, at := range groups {
				g := h.groups[at]
				if g.GetPressure() == nil {
					continue
				}
				name := cgroupName(g, s.resourceGroups)
				if out[session] == nil {
					out[session] = map[string]map[[2]string]float64{}
				}
				if out[session][name] == nil {
					out[session][name] = map[[2]string]float64{}
				}
				for _, l := range pressureLines(g.GetPressure()) {
					k := [2]string{l.resource.String(), l.kind.String()}
					if v, seen := out[session][name][k]; !seen || l.stall.GetAvg10() > v {
						out[session][name][k] = l.stall.GetAvg10()
					}
				}
			}
		}
	}
	return out
}

// recordSessionCgroupPressure records, for the session resource being built,
// the pressure of each group its processes run in.
func recordSessionCgroupPressure(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, sp sessionPressure, session int64) {
	names := make([]string, 0, len(sp[session]))
	for name := range sp[session] {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		lines := sp[session][name]
		for _, r := range []metadata.AttributePressureResource{metadata.AttributePressureResourceCPU,
			metadata.AttributePressureResourceMemory, metadata.AttributePressureResourceIo, metadata.AttributePressureResourceIrq} {
			for _, k := range []metadata.AttributePressureKind{metadata.AttributePressureKindSome, metadata.AttributePressureKindFull} {
				if v, ok := lines[[2]string{r.String(), k.String()}]; ok {
					mb.RecordGpotelSessionCgroupPressureDataPoint(ts, kernelunits.PercentToRatio(v), name, r, k)
				}
			}
		}
	}
}

// noteCgroupGaps logs, once per change, why a host has no group figures or
// the resource groups have no names.
func (s *sessionScraper) noteCgroupGaps(state *ClusterState, results []hostResult) {
	note := func(key, msg string, fields ...zap.Field) {
		if s.cgroupNotes == nil {
			s.cgroupNotes = map[string]string{}
		}
		if s.cgroupNotes[key] == msg {
			return
		}
		s.cgroupNotes[key] = msg
		if msg != "" {
			s.logger.Info(msg, fields...)
		}
	}
	if state.ResourceGroupsErr != nil {
		note("", "resource groups are not named in cgroup figures", zap.Error(state.ResourceGroupsErr))
	} else {
		note("", "")
	}
	for i := range results {
		r := &results[i]
		if !r.up && r.answered == 0 {
			continue
		}
		if len(r.cgroups.unavailable) == 0 {
			note(r.host, "")
			continue
		}
		note(r.host, "host's agent reads no "+strings.Join(r.cgroups.unavailable, "; "),
			zap.String("host", r.host))
	}
}
