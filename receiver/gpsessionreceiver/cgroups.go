// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/gpotel/gpotel/internal/gpsql"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
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
	if resp.GetDelta() {
		// The answer leaves unchanged processes out; the sessions' groups are listed whole.
		for _, sg := range resp.GetSessionControlGroups() {
			for _, g := range sg.GetControlGroups() {
				if int(g) < len(local) {
					h.addSession(sg.GetSessId(), local[g])
				}
			}
		}
		return
	}
	for _, info := range resp.GetPidProcData() {
		if info.ControlGroup == nil || int(info.GetControlGroup()) >= len(local) {
			continue
		}
		b := asked[info.GetPid()]
		if b == nil {
			continue
		}
		h.addSession(b.SessionID, local[info.GetControlGroup()])
	}
}

// addSession notes that a process of session runs in group at.
func (h *hostCgroups) addSession(session int64, at int) {
	if h.sessions == nil {
		h.sessions = map[int64][]int{}
	}
	if s := h.sessions[session]; !slices.Contains(s, at) {
		h.sessions[session] = append(s, at)
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

// hostReadings is each answering host's pressure and control groups, in
// the order of the hosts.
func hostReadings(s *scrapeResult) []snapshot.HostReading {
	var out []snapshot.HostReading
	for i := range s.results {
		r := &s.results[i]
		hr := snapshot.HostReading{Host: r.host, Pressure: r.cgroups.pressure}
		for _, g := range r.cgroups.groups {
			cg := snapshot.Cgroup{Group: g}
			if name, ok := s.resourceGroups[g.GetResourceGroupOid()]; ok && g.GetResourceGroupOid() != 0 {
				cg.ResourceGroupName = &name
			}
			hr.Groups = append(hr.Groups, cg)
		}
		if hr.Pressure != nil || len(hr.Groups) > 0 {
			out = append(out, hr)
		}
	}
	return out
}

// sessionPressure is, per session, per group name, the largest avg10 of each
// pressure line over the hosts where the session's processes run in it.
type sessionPressure map[int64]map[string]map[[2]string]float64

func sessionPressureOf(s *scrapeResult) sessionPressure {
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
				for _, l := range snapshot.PressureLines(g.GetPressure()) {
					k := [2]string{l.Resource, l.Kind}
					if v, seen := out[session][name][k]; !seen || l.Stall.GetAvg10() > v {
						out[session][name][k] = l.Stall.GetAvg10()
					}
				}
			}
		}
	}
	return out
}

// of lists a session's group pressure: groups by name, then resources cpu,
// memory, io, irq, some before full.
func (sp sessionPressure) of(session int64) []snapshot.GroupPressure {
	names := make([]string, 0, len(sp[session]))
	for name := range sp[session] {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []snapshot.GroupPressure
	for _, name := range names {
		lines := sp[session][name]
		for _, r := range []string{"cpu", "memory", "io", "irq"} {
			for _, k := range []string{pipeline.PressureSome, pipeline.PressureFull} {
				if v, ok := lines[[2]string{r, k}]; ok {
					out = append(out, snapshot.GroupPressure{Name: name, Resource: r, Kind: k, Avg10: v})
				}
			}
		}
	}
	return out
}

// noteCgroupGaps logs, once per change, why a host has no group figures,
// the resource groups have no names or the sessions no resource queue.
func (s *sessionScraper) noteCgroupGaps(state *ClusterState, results []hostResult) {
	note := func(key, msg string, fields ...zap.Field) {
		if s.cgroupNotes.changed(key, msg) && msg != "" {
			s.logger.Info(msg, fields...)
		}
	}
	if state.ResourceGroupsErr != nil {
		note("", "resource groups are not named in cgroup figures", zap.Error(state.ResourceGroupsErr))
	} else {
		note("", "")
	}
	if state.ResourceQueuesErr != nil {
		note("queues", "sessions' resource queues are not all known: workload rules scoped by queue leave those sessions alone",
			zap.Error(state.ResourceQueuesErr))
	} else {
		note("queues", "")
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
