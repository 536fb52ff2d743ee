// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func layoutOf(tb testing.TB, mountinfo string) Layout {
	tb.Helper()
	mounts, err := ParseMountinfo(fixture(tb, "mountinfo", mountinfo))
	require.NoError(tb, err)
	return NewLayout(mounts)
}

func membershipsOf(tb testing.TB, file string) []Membership {
	tb.Helper()
	ms, err := ParseProcCgroup(fixture(tb, "cgroup", file))
	require.NoError(tb, err)
	return ms
}

func TestGroupOf(t *testing.T) {
	tests := []struct {
		name      string
		mountinfo string
		cgroup    string
		want      Group
		wantDir   string
		wantNone  bool
	}{
		{name: "GP6 resource group is gpdb/<oid> in the cpu hierarchy", mountinfo: "v1-gp6", cgroup: "gp6-resgroup",
			want:    Group{Version: 1, Hierarchy: "cpu,cpuacct", Path: "/gpdb/6437", ResourceGroupOID: 6437},
			wantDir: "/sys/fs/cgroup/cpu,cpuacct/gpdb/6437"},
		{name: "GP7 resource group is gpdb.service/<oid> on v2", mountinfo: "v2-only", cgroup: "gp7-resgroup",
			want:    Group{Version: 2, Path: "/gpdb.service/6438", ResourceGroupOID: 6438},
			wantDir: "/sys/fs/cgroup/gpdb.service/6438"},
		{name: "a process in a subgroup of a resource group counts to the resource group", mountinfo: "v2-only", cgroup: "gp7-resgroup-subgroup",
			want:    Group{Version: 2, Path: "/gpdb.service/16384", ResourceGroupOID: 16384},
			wantDir: "/sys/fs/cgroup/gpdb.service/16384"},
		{name: "hybrid host without resource groups uses the v2 group", mountinfo: "hybrid", cgroup: "hybrid-plain",
			want:    Group{Version: 2, Path: "/user.slice/session-3.scope"},
			wantDir: "/sys/fs/cgroup/unified/user.slice/session-3.scope"},
		{name: "v1 host where the process's cpu hierarchy is not mounted has no group", mountinfo: "v1-gp6", cgroup: "hybrid-plain",
			wantNone: true},
		{name: "v2 resource group found on a hybrid host with the v2 mount at unified", mountinfo: "hybrid", cgroup: "colon-in-path",
			want:    Group{Version: 2, Path: "/a:b/gpdb/17000", ResourceGroupOID: 17000},
			wantDir: "/sys/fs/cgroup/unified/a:b/gpdb/17000"},
		{name: "a container with the whole hierarchy mounted too uses that mount", mountinfo: "container-subtree", cgroup: "gp7-resgroup",
			want:    Group{Version: 2, Path: "/gpdb.service/6438", ResourceGroupOID: 6438},
			wantDir: "/host/sys/fs/cgroup/gpdb.service/6438"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := layoutOf(t, tt.mountinfo)
			g, ok := l.GroupOf(membershipsOf(t, tt.cgroup), DefaultResourceGroupParents)
			if tt.wantNone {
				assert.False(t, ok, "group %+v", g)
				return
			}
			require.True(t, ok)
			assert.Equal(t, tt.want, g)
			dir, err := l.Dir(g)
			require.NoError(t, err)
			assert.Equal(t, tt.wantDir, dir)
		})
	}
}

func TestDirOfBindMountedSubtree(t *testing.T) {
	l := NewLayout([]Mount{{Version: 2, Root: "/kubepods.slice/pod1", MountPoint: "/sys/fs/cgroup"}})
	dir, err := l.Dir(Group{Version: 2, Path: "/kubepods.slice/pod1/gpdb/6437"})
	require.NoError(t, err)
	assert.Equal(t, "/sys/fs/cgroup/gpdb/6437", dir)

	for _, outside := range []string{"/kubepods.slice/pod10/gpdb/6437", "/other", "/../../gpdb/6437"} {
		_, err := l.Dir(Group{Version: 2, Path: outside})
		assert.Error(t, err, outside)
	}
}

func TestDirOfUnmountedHierarchyIsAnError(t *testing.T) {
	_, err := layoutOf(t, "v2-only").Dir(Group{Version: 1, Hierarchy: "cpu", Path: "/gpdb/6437"})
	assert.Error(t, err)
}

func TestResourceGroupPath(t *testing.T) {
	tests := []struct {
		path   string
		prefix string
		oid    uint32
	}{
		{"/gpdb/6437", "/gpdb/6437", 6437},
		{"/x/gpdb/6437/queries", "/x/gpdb/6437", 6437},
		{"/gpdb.service/16384", "/gpdb.service/16384", 16384},
		{"/gpdb", "", 0},
		{"/gpdb/0", "", 0},
		{"/gpdb/06437", "", 0},
		{"/gpdb/+6437", "", 0},
		{"/gpdb/abc", "", 0},
		{"/gpdb/99999999999", "", 0},
		{"/other/6437", "", 0},
	}
	for _, tt := range tests {
		prefix, oid, ok := resourceGroupPath(tt.path, DefaultResourceGroupParents)
		assert.Equal(t, tt.oid != 0, ok, tt.path)
		assert.Equal(t, tt.prefix, prefix, tt.path)
		assert.Equal(t, tt.oid, oid, tt.path)
	}
}
