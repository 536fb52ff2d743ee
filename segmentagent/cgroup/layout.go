// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
)

// DefaultResourceGroupParents name the directories Greenplum puts resource
// groups under: gpdb (Greenplum 6 on cgroup v1; also what Cloudberry's and
// Greenplum 7's own test suites set gp_resource_group_cgroup_parent to) and
// gpdb.service (that setting's default in Greenplum 7 and Cloudberry).
var DefaultResourceGroupParents = []string{"gpdb", "gpdb.service"}

// Layout is where this host's cgroup hierarchies are mounted.
type Layout struct {
	// V2 is the unified hierarchy's mount; nil when cgroup v2 is not mounted.
	V2 *Mount
	// V1 holds one mount per v1 hierarchy.
	V1 []Mount
}

// NewLayout keeps one mount per hierarchy, preferring one that shows the
// whole hierarchy (Root "/") over a bind-mounted subtree.
func NewLayout(mounts []Mount) Layout {
	var l Layout
	better := func(old *Mount, m Mount) bool { return old.Root != "/" && m.Root == "/" }
	for _, m := range mounts {
		switch m.Version {
		case 2:
			if l.V2 == nil || better(l.V2, m) {
				l.V2 = &m
			}
		case 1:
			i := slices.IndexFunc(l.V1, func(o Mount) bool { return sameSet(o.Controllers, m.Controllers) })
			if i < 0 {
				l.V1 = append(l.V1, m)
			} else if better(&l.V1[i], m) {
				l.V1[i] = m
			}
		}
	}
	return l
}

// Group is the control group a process is accounted to.
type Group struct {
	// Version is 1 or 2.
	Version int
	// Hierarchy names a v1 hierarchy by its controllers ("cpu,cpuacct"); empty for v2.
	Hierarchy string
	// Path inside the hierarchy. For a resource group it ends at the oid,
	// even when the process sits in a subgroup of it.
	Path string
	// ResourceGroupOID is the Greenplum resource group's oid, 0 when Path is not one.
	ResourceGroupOID uint32
}

// v1Preference orders the v1 controllers whose hierarchy holds Greenplum 6's
// resource groups, CPU first (it is what every resource group configures).
var v1Preference = []string{"cpu", "cpuacct", "memory", "cpuset"}

// GroupOf picks the group a process is accounted to from its memberships:
// first a resource group (<parent>/<oid>, v2 before v1, v1 in the order
// cpu, cpuacct, memory, cpuset); else its v2 group when cgroup v2 is mounted
// (it has pressure files); else its group in the mounted v1 hierarchy with
// the cpu controller (cgroupstats counts its tasks). ok is false when no
// membership is in a mounted hierarchy.
func (l Layout) GroupOf(ms []Membership, parents []string) (g Group, ok bool) {
	candidates := l.orderedMemberships(ms)
	for _, m := range candidates {
		if prefix, oid, found := resourceGroupPath(m.Path, parents); found {
			return l.group(m, prefix, oid), true
		}
	}
	if len(candidates) == 0 {
		return Group{}, false
	}
	m := candidates[0]
	if m.HierarchyID != 0 && !slices.Contains(m.Controllers, "cpu") {
		return Group{}, false
	}
	return l.group(m, m.Path, 0), true
}

// orderedMemberships keeps the memberships in mounted hierarchies, v2 first,
// then v1 by v1Preference.
func (l Layout) orderedMemberships(ms []Membership) []Membership {
	rank := func(m Membership) int {
		if m.HierarchyID == 0 {
			return 0
		}
		for i, c := range v1Preference {
			if slices.Contains(m.Controllers, c) {
				return 1 + i
			}
		}
		return 1 + len(v1Preference)
	}
	var out []Membership
	for _, m := range ms {
		if _, mounted := l.mountOf(m.HierarchyID == 0, m.Controllers); mounted {
			out = append(out, m)
		}
	}
	slices.SortStableFunc(out, func(a, b Membership) int { return rank(a) - rank(b) })
	return out
}

func (l Layout) group(m Membership, p string, oid uint32) Group {
	if m.HierarchyID == 0 {
		return Group{Version: 2, Path: p, ResourceGroupOID: oid}
	}
	return Group{Version: 1, Hierarchy: strings.Join(m.Controllers, ","), Path: p, ResourceGroupOID: oid}
}

func (l Layout) mountOf(v2 bool, controllers []string) (Mount, bool) {
	if v2 {
		if l.V2 == nil {
			return Mount{}, false
		}
		return *l.V2, true
	}
	for _, m := range l.V1 {
		if sameSet(m.Controllers, controllers) {
			return m, true
		}
	}
	return Mount{}, false
}

// Dir is g's directory in this mount namespace.
func (l Layout) Dir(g Group) (string, error) {
	m, ok := l.mountOf(g.Version == 2, strings.Split(g.Hierarchy, ","))
	if !ok {
		return "", fmt.Errorf("cgroup v%d hierarchy %q is not mounted", g.Version, g.Hierarchy)
	}
	if slices.Contains(strings.Split(g.Path, "/"), "..") {
		return "", fmt.Errorf("group %s is outside this cgroup namespace", g.Path)
	}
	rel := g.Path
	if m.Root != "/" {
		var under bool
		rel, under = strings.CutPrefix(g.Path, m.Root)
		if !under || rel != "" && rel[0] != '/' {
			return "", fmt.Errorf("group %s is outside the mounted subtree %s", g.Path, m.Root)
		}
	}
	return path.Join(m.MountPoint, path.Clean("/"+rel)), nil
}

// resourceGroupPath finds <parent>/<oid> in p and returns p up to the oid.
func resourceGroupPath(p string, parents []string) (prefix string, oid uint32, ok bool) {
	elems := strings.Split(strings.Trim(p, "/"), "/")
	for i := 1; i < len(elems); i++ {
		if !slices.Contains(parents, elems[i-1]) {
			continue
		}
		v, err := strconv.ParseUint(elems[i], 10, 32)
		if err != nil || v == 0 || elems[i][0] == '0' || elems[i][0] == '+' {
			continue
		}
		return "/" + strings.Join(elems[:i+1], "/"), uint32(v), true
	}
	return "", 0, false
}

// sameSet compares controller lists regardless of order.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
