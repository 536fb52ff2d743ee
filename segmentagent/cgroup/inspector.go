// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
)

// InspectorConfig says where to look.
type InspectorConfig struct {
	// ProcRoot is the procfs root ("/proc"); mounts come from its self/mountinfo.
	ProcRoot string
	// ResourceGroupParents name the directories resource groups live under;
	// nil means DefaultResourceGroupParents.
	ResourceGroupParents []string
	// CgroupStats asks the kernel for v1 task states over taskstats netlink.
	CgroupStats bool
}

// Inspector resolves processes' groups and reads groups' and the host's
// pressure and task states. Each capability degrades alone; Capabilities
// says which are off and why. It is safe for concurrent use.
type Inspector struct {
	procRoot string
	parents  []string
	layout   Layout
	// stats is whether cgroupstats answered at start; each read dials anew,
	// so the inspector holds no socket and needs no closing.
	stats bool
	// mountErr and statsErr say why groups, and v1 task states, are off.
	mountErr, statsErr error
}

// ErrNoGroup reports a process whose groups are all in hierarchies this
// host does not mount (or none of them holds the cpu controller).
var ErrNoGroup = errors.New("in no mounted cgroup hierarchy")

// NewInspector reads the mounts once: a hierarchy mounted later is not seen
// until the agent restarts, as with every other host constant.
func NewInspector(cfg InspectorConfig) *Inspector {
	in := &Inspector{procRoot: cfg.ProcRoot, parents: cfg.ResourceGroupParents}
	if in.procRoot == "" {
		in.procRoot = "/proc"
	}
	if in.parents == nil {
		in.parents = DefaultResourceGroupParents
	}
	b, err := readFile(filepath.Join(in.procRoot, "self", "mountinfo"))
	var mounts []Mount
	if err == nil {
		mounts, err = ParseMountinfo(b)
	}
	switch {
	case err != nil:
		in.mountErr = fmt.Errorf("mountinfo: %w", err)
	case len(mounts) == 0:
		in.mountErr = errors.New("no cgroup file system is mounted")
	}
	in.layout = NewLayout(mounts)
	if !cfg.CgroupStats {
		in.statsErr = errors.New("turned off in the configuration")
	} else if len(in.layout.V1) == 0 {
		in.statsErr = errors.New("no cgroup v1 hierarchy is mounted")
	} else if c, err := DialStats(); err != nil {
		in.statsErr = err
	} else {
		in.stats = true
		_ = c.Close()
	}
	return in
}

// Layout is the mounts found at start.
func (in *Inspector) Layout() Layout { return in.layout }

// Capability is one thing the inspector can or cannot do on this host.
type Capability struct {
	Name string
	// Off says why it is unavailable; nil when it works.
	Off error
}

// Capabilities lists the group-related capabilities and why any is off.
func (in *Inspector) Capabilities() []Capability {
	groups := in.mountErr
	pressure := groups
	if pressure == nil && in.layout.V2 == nil {
		pressure = errors.New("cgroup v2 is not mounted: only cgroup v2 groups have pressure files")
	}
	return []Capability{
		{Name: "process groups", Off: groups},
		{Name: "group pressure", Off: pressure},
		{Name: "cgroup v1 task states (cgroupstats)", Off: in.statsErr},
	}
}

// ResolvesGroups says whether GroupOf can work here (cgroup mounts were found).
func (in *Inspector) ResolvesGroups() bool { return in.mountErr == nil }

// GroupOf reads /proc/<pid>/cgroup and picks the process's group (see Layout.GroupOf).
func (in *Inspector) GroupOf(pid int64) (Group, error) {
	if in.mountErr != nil {
		return Group{}, in.mountErr
	}
	buf := cgroupBuffers.Get().(*[]byte)
	defer cgroupBuffers.Put(buf)
	b, err := readSmall(filepath.Join(in.procRoot, strconv.FormatInt(pid, 10), "cgroup"), buf)
	if err != nil {
		return Group{}, err
	}
	ms, err := ParseProcCgroup(b)
	if err != nil {
		return Group{}, err
	}
	g, ok := in.layout.GroupOf(ms, in.parents)
	if !ok {
		return Group{}, ErrNoGroup
	}
	return g, nil
}

// HostPressure reads /proc/pressure/*.
func (in *Inspector) HostPressure() PressureSet { return ReadHostPressure(in.procRoot) }

// GroupReading is one read of a group.
type GroupReading struct {
	// Pressure of a v2 group; nil for v1 (no pressure files there).
	Pressure *PressureSet
	// TaskStates of a v1 group from cgroupstats; nil for v2 and when
	// cgroupstats is unavailable (the caller counts its processes instead).
	TaskStates *TaskStates
	// Unread says what could not be read, as "what: reason".
	Unread []string
}

// ReadGroup reads a group's pressure (v2) or task states (v1).
func (in *Inspector) ReadGroup(g Group) GroupReading {
	var r GroupReading
	dir, err := in.layout.Dir(g)
	if err != nil {
		r.Unread = append(r.Unread, "group: "+err.Error())
		return r
	}
	if g.Version == 2 {
		p := ReadGroupPressure(dir)
		r.Pressure = &p
		return r
	}
	if !in.stats {
		r.Unread = append(r.Unread, "cgroupstats: "+in.statsErr.Error())
		return r
	}
	s, err := readTaskStates(dir)
	if err != nil {
		r.Unread = append(r.Unread, "cgroupstats: "+err.Error())
		return r
	}
	r.TaskStates = &s
	return r
}

func readTaskStates(dir string) (TaskStates, error) {
	c, err := DialStats()
	if err != nil {
		return TaskStates{}, err
	}
	defer c.Close() //nolint:errcheck // nothing was written
	return c.TaskStates(dir)
}
