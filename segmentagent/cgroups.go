// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"errors"
	"io/fs"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/segmentagent/cgroup"
	"github.com/gpotel/gpotel/segmentagent/procfs"
)

// newCgroups looks at this host's cgroup mounts and netlink once, says in
// the log which capabilities are off and why, and returns those reasons for
// every answer's ProcHost.unavailable. Each capability degrades alone.
func newCgroups(cfg ServiceConfig, logger *zap.Logger) (*cgroup.Inspector, []string) {
	if cfg.Cgroups.Disabled {
		logger.Info("control groups and pressure are off (cgroups.disabled)")
		return nil, []string{"pressure and control groups: cgroups.disabled in the agent's configuration"}
	}
	in := cgroup.NewInspector(cgroup.InspectorConfig{
		ProcRoot:             cfg.ProcRoot,
		ResourceGroupParents: cfg.Cgroups.ResourceGroupParents,
		CgroupStats:          true,
	})
	var unavailable []string
	for _, c := range in.Capabilities() {
		if c.Off == nil {
			logger.Info("capability on", zap.String("capability", c.Name))
			continue
		}
		logger.Warn("capability off", zap.String("capability", c.Name), zap.String("reason", c.Off.Error()))
		unavailable = append(unavailable, c.Name+": "+c.Off.Error())
	}
	if l := in.Layout(); l.V2 != nil {
		logger.Info("cgroup v2 mounted", zap.String("mount_point", l.V2.MountPoint), zap.String("root", l.V2.Root))
	}
	return in, unavailable
}

// addCgroups puts the host's pressure and, once each, the groups of the
// answered processes into resp, and points every answered process at its group.
func (s *Service) addCgroups(resp *yagpcc.GetPidProcInfoResponse, results []readResult) {
	if s.cgroups == nil {
		return
	}
	resp.HostPressure = pressureProto(s.cgroups.HostPressure())
	if !s.cgroups.ResolvesGroups() {
		return
	}
	index := make(map[cgroup.Group]uint32)
	var counted []cgroup.TaskStates // per group: the answered processes' stat states
	for i := range results {
		r := &results[i]
		if r.outcome != procfs.Answered {
			continue
		}
		if r.groupErr != nil {
			if !vanished(r.groupErr) {
				r.info.Unread = append(r.info.Unread, "cgroup: "+r.groupErr.Error())
			}
			continue
		}
		idx, ok := index[r.group]
		if !ok {
			idx = uint32(len(resp.ControlGroups)) //nolint:gosec // bounded by max_pids_per_request
			index[r.group] = idx
			resp.ControlGroups = append(resp.ControlGroups, &gpotelv1.ControlGroup{
				Version:   int32(r.group.Version), //nolint:gosec // 1 or 2
				Hierarchy: r.group.Hierarchy, Path: r.group.Path, ResourceGroupOid: r.group.ResourceGroupOID,
			})
			counted = append(counted, cgroup.TaskStates{})
		}
		r.info.ControlGroup = &idx
		if st := r.info.GetProcStat().GetState(); len(st) == 1 {
			counted[idx].AddState(st[0])
		}
	}
	for g, idx := range index {
		cg := resp.ControlGroups[idx]
		reading := s.cgroups.ReadGroup(g)
		cg.Unread = reading.Unread
		if reading.Pressure != nil {
			cg.Pressure = pressureProto(*reading.Pressure)
		}
		if reading.TaskStates != nil {
			cg.TaskStates = taskStatesProto(*reading.TaskStates, gpotelv1.TaskStates_SOURCE_CGROUPSTATS)
		} else {
			cg.TaskStates = taskStatesProto(counted[idx], gpotelv1.TaskStates_SOURCE_PROC_STAT)
		}
	}
}

// vanished: the process exited between its other files and its cgroup file.
func vanished(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH)
}

func pressureProto(set cgroup.PressureSet) *gpotelv1.Pressure {
	p := &gpotelv1.Pressure{Unread: set.Unread}
	for r, dst := range map[cgroup.Resource]**gpotelv1.ResourcePressure{
		cgroup.CPU: &p.Cpu, cgroup.Memory: &p.Memory, cgroup.IO: &p.Io, cgroup.IRQ: &p.Irq,
	} {
		if rp, ok := set.ByResource[r]; ok {
			*dst = resourcePressureProto(rp)
		}
	}
	return p
}

func resourcePressureProto(p cgroup.Pressure) *gpotelv1.ResourcePressure {
	stall := func(s cgroup.Stall) *gpotelv1.PressureStall {
		return &gpotelv1.PressureStall{Avg10: s.Avg10, Avg60: s.Avg60, Avg300: s.Avg300,
			TotalUs: int64(s.TotalMicros)} //nolint:gosec // microseconds fit int64 for 290000 years
	}
	rp := &gpotelv1.ResourcePressure{Some: stall(p.Some)}
	if p.HasFull {
		rp.Full = stall(p.Full)
	}
	return rp
}

func taskStatesProto(s cgroup.TaskStates, source gpotelv1.TaskStates_Source) *gpotelv1.TaskStates {
	//nolint:gosec // task counts fit int64
	ts := &gpotelv1.TaskStates{Source: source, Running: int64(s.Running), Sleeping: int64(s.Sleeping),
		Uninterruptible: int64(s.Uninterruptible), Stopped: int64(s.Stopped), Other: int64(s.Other)}
	if s.HasIOWait {
		iow := int64(s.IOWait) //nolint:gosec // a count
		ts.IoWait = &iow
	}
	return ts
}
