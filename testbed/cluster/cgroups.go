// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpotel/gpotel/segmentagent/cgroup"
)

// ResourceGroups are Greenplum's built-in resource groups the testbed's
// catalog lists (pg_resgroup, gp_toolkit.gp_resgroup_config) and places
// instances in.
var ResourceGroups = []ResourceGroup{
	{OID: rsgDefaultGroup, Name: "default_group"},
	{OID: rsgAdminGroup, Name: "admin_group"},
}

// ResourceGroup is one row of pg_resgroup.
type ResourceGroup struct {
	OID  uint32
	Name string
}

// resourceGroupParent is the directory the groups live under, as
// gp_resource_group_cgroup_parent names it in Greenplum's and Cloudberry's
// own test suites (the agent's default parents include it).
const resourceGroupParent = "gpdb"

// Cgroups says where the testbed put its instances' cgroup v2 groups.
type Cgroups struct {
	// Root is the cluster's directory under the cgroup v2 mount; Down removes it.
	Root string `json:"root,omitempty"`
	// Unavailable says why instances were not placed in groups (not root, no
	// cgroup v2 mount); empty when they were.
	Unavailable string `json:"unavailable,omitempty"`
}

// ResourceGroupOf is the resource group whose cgroup an instance runs in.
// Greenplum moves each backend into its role's group; the testbed cannot
// (that is the server's executor's job), so it places whole instances: the
// postmaster starts in the group and every backend inherits it. The
// coordinator and odd contents run in admin_group, even contents in
// default_group, so a session spans both.
func ResourceGroupOf(content int) ResourceGroup {
	if content >= 0 && content%2 == 0 {
		return ResourceGroups[0]
	}
	return ResourceGroups[1]
}

// planCgroups picks the cluster's cgroup root, or says why there is none.
func (c *Cluster) planCgroups() {
	c.Cgroups = Cgroups{}
	if os.Geteuid() != 0 {
		c.Cgroups.Unavailable = "creating cgroups needs root"
		return
	}
	if c.Cgroups.Root = cgroupRootOf(c.ID); c.Cgroups.Root == "" {
		c.Cgroups.Unavailable = "cgroup v2 is not mounted"
	}
}

// cgroupRootOf is where cluster id's groups go; empty without a cgroup v2 mount.
func cgroupRootOf(id string) string {
	v2 := cgroup.NewInspector(cgroup.InspectorConfig{}).Layout().V2
	if v2 == nil {
		return ""
	}
	return filepath.Join(v2.MountPoint, "gpotel-testbed-"+id)
}

// InstanceCgroup is the directory of the group an instance's processes run in,
// <root>/<host>/gpdb/<oid>; empty when instances are not placed in groups.
func (c *Cluster) InstanceCgroup(in Instance) string {
	if c.Cgroups.Root == "" {
		return ""
	}
	return filepath.Join(c.Cgroups.Root, in.Host, resourceGroupParent, fmt.Sprint(ResourceGroupOf(in.Content).OID))
}

// openInstanceCgroup creates the instance's group and opens it for
// CLONE_INTO_CGROUP; -1 when instances are not placed in groups.
func (c *Cluster) openInstanceCgroup(in Instance) (int, error) {
	dir := c.InstanceCgroup(in)
	if dir == "" {
		return -1, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return -1, fmt.Errorf("cgroup for gpseg%d: %w", in.Content, err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("cgroup for gpseg%d: %w", in.Content, err)
	}
	return fd, nil
}

// removeCgroups removes the cluster's groups, deepest first; it runs once
// no process of the cluster is left (a group with tasks cannot be removed).
func (c *Cluster) removeCgroups() error {
	root := c.Cgroups.Root
	if root == "" {
		return nil
	}
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	var errs []error
	for _, d := range dirs {
		if err := rmdirWhenEmpty(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, err)...)
}

// rmdirWhenEmpty removes a cgroup, waiting while it is busy: a process that
// has just exited leaves its group only once its parent has reaped it.
func rmdirWhenEmpty(dir string) error {
	deadline := time.Now().Add(cgroupDrainTimeout)
	for {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			return fmt.Errorf("remove cgroup %s: %w (tasks: %q)", dir, err, strings.TrimSpace(string(procs)))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cgroupDrainTimeout bounds how long Down waits for exited tasks to leave a group.
const cgroupDrainTimeout = time.Minute
