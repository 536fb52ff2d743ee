// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpotel/gpotel/internal/hostcaps"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/segmentagent/cgroup"
	"github.com/gpotel/gpotel/segmentagent/internal/proctest"
)

// cgroupFixture adds to a copy of the procfs fixture a mountinfo whose
// cgroup v2 mount is a temporary directory holding resource group 6437 with
// pressure files, host pressure files, and a cgroup file for pids 1001 and
// 1003 (in 6437) and 1002 (in no resource group).
func cgroupFixture(t *testing.T) string {
	t.Helper()
	root := copyFixture(t)
	mount := t.TempDir()
	write := func(path, text string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	}
	write(filepath.Join(root, "self", "mountinfo"),
		fmt.Sprintf("40 30 0:37 / %s rw,relatime - cgroup2 cgroup2 rw\n", mount))
	for _, r := range []string{"cpu", "memory", "io"} {
		write(filepath.Join(root, "pressure", r),
			"some avg10=1.00 avg60=2.00 avg300=3.00 total=400\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=5\n")
		write(filepath.Join(mount, "gpdb.service", "6437", r+".pressure"),
			"some avg10=10.00 avg60=20.00 avg300=30.00 total=4000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=50\n")
	}
	write(filepath.Join(root, "1001", "cgroup"), "0::/gpdb.service/6437\n")
	write(filepath.Join(root, "1003", "cgroup"), "0::/gpdb.service/6437/queries\n")
	write(filepath.Join(root, "1002", "cgroup"), "0::/system.slice\n")
	return root
}

func TestAnswerCarriesHostPressureAndEachGroupOnce(t *testing.T) {
	root := cgroupFixture(t)
	s := fixtureService(t, func(c *ServiceConfig) { c.ProcRoot = root })
	resp, err := s.GetPidProcStat(context.Background(), request(1001, 1002, 1003))
	require.NoError(t, err)

	hp := resp.GetHostPressure()
	require.NotNil(t, hp)
	assert.Empty(t, hp.GetUnread())
	assert.Equal(t, int64(400), hp.GetCpu().GetSome().GetTotalUs())
	assert.Equal(t, 2.0, hp.GetMemory().GetSome().GetAvg60())
	assert.Equal(t, int64(5), hp.GetIo().GetFull().GetTotalUs())

	require.Len(t, resp.GetControlGroups(), 2)
	byPid := map[int64]*gpotelv1.ControlGroup{}
	for _, p := range resp.GetPidProcData() {
		require.NotNil(t, p.ControlGroup, "pid %d has no group", p.GetPid())
		byPid[p.GetPid()] = resp.GetControlGroups()[p.GetControlGroup()]
		assert.NotContains(t, strings.Join(p.GetUnread(), "\n"), "cgroup", "pid %d", p.GetPid())
	}
	rg := byPid[1001]
	assert.Same(t, rg, byPid[1003], "a subgroup of a resource group is that resource group")
	assert.Equal(t, uint32(6437), rg.GetResourceGroupOid())
	assert.Equal(t, "/gpdb.service/6437", rg.GetPath())
	assert.Equal(t, int32(2), rg.GetVersion())
	assert.Equal(t, int64(4000), rg.GetPressure().GetCpu().GetSome().GetTotalUs())
	assert.Equal(t, gpotelv1.TaskStates_SOURCE_PROC_STAT, rg.GetTaskStates().GetSource())
	assert.Equal(t, int64(2), rg.GetTaskStates().GetSleeping(), "1001 and 1003 are in state S")
	assert.Nil(t, rg.GetTaskStates().IoWait, "stat cannot tell I/O wait")

	other := byPid[1002]
	assert.Equal(t, uint32(0), other.GetResourceGroupOid())
	assert.Equal(t, "/system.slice", other.GetPath())
	assert.NotEmpty(t, other.GetPressure().GetUnread(), "the fixture has no pressure files for /system.slice")
}

func TestNoCgroupMountsStillGivesHostPressureAndSaysWhyNoGroups(t *testing.T) {
	s := fixtureService(t) // the plain fixture has no self/mountinfo and no pressure files
	resp, err := s.GetPidProcStat(context.Background(), request(1001))
	require.NoError(t, err)
	assert.Empty(t, resp.GetControlGroups())
	for _, p := range resp.GetPidProcData() {
		assert.Nil(t, p.ControlGroup)
		assert.Empty(t, p.GetUnread(), "a host without groups is said once, in ProcHost, not per process")
	}
	assert.Len(t, resp.GetHostPressure().GetUnread(), 3, "cpu, memory, io each say why they are missing")
	assert.Contains(t, strings.Join(resp.GetHost().GetUnavailable(), "\n"), "process groups: mountinfo")
}

func TestCgroupsDisabledLeavesThemOutAndSaysSo(t *testing.T) {
	root := cgroupFixture(t)
	s := fixtureService(t, func(c *ServiceConfig) { c.ProcRoot, c.Cgroups.Disabled = root, true })
	resp, err := s.GetPidProcStat(context.Background(), request(1001))
	require.NoError(t, err)
	assert.Nil(t, resp.GetHostPressure())
	assert.Empty(t, resp.GetControlGroups())
	assert.Contains(t, strings.Join(resp.GetHost().GetUnavailable(), "\n"), "cgroups.disabled")
}

func TestResourceGroupParentsMustBeDirectoryNames(t *testing.T) {
	cfg := NewDefaultServiceConfig()
	cfg.Cgroups.ResourceGroupParents = []string{"gpdb", "", "a/b"}
	err := cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "resource_group_parents[1]")
	assert.Contains(t, err.Error(), "resource_group_parents[2]")
}

// TestRealBackendsInV2ResourceGroups places real processes in two cgroup v2
// groups shaped like resource groups and reads them through /proc.
func TestRealBackendsInV2ResourceGroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups needs root")
	}
	v2 := cgroup.NewInspector(cgroup.InspectorConfig{}).Layout().V2
	if v2 == nil {
		t.Skip("cgroup v2 is not mounted on this host")
	}
	top := fmt.Sprintf("gpotel-agent-test-%d", os.Getpid())
	spawnIn := func(oid string, n int) []int64 {
		dir := filepath.Join(v2.MountPoint, top, "gpdb", oid)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		t.Cleanup(func() { _ = os.Remove(dir) })
		fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
		require.NoError(t, err)
		defer func() { _ = syscall.Close(fd) }()
		var pids []int64
		for range n {
			cmd := exec.Command("sleep", "3600")
			cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
			pids = append(pids, startChild(t, cmd))
		}
		return pids
	}
	t.Cleanup(func() {
		_ = os.Remove(filepath.Join(v2.MountPoint, top, "gpdb"))
		_ = os.Remove(filepath.Join(v2.MountPoint, top))
	})
	pids := append(spawnIn("6437", 2), spawnIn("6438", 1)...)

	s, err := NewService(ServiceConfig{AllowedUsers: []string{"0"}, PostmasterPidFiles: []string{proctest.SelfAsPostmaster(t)}}, nil, nil)
	require.NoError(t, err)
	resp, err := s.GetPidProcStat(context.Background(), request(pids...))
	require.NoError(t, err)
	require.Len(t, resp.GetPidProcData(), 3)
	// Pressure where the kernel has PSI; where it has not, the answer says why.
	psi := hostcaps.PSI()
	if psi == nil {
		assert.Empty(t, resp.GetHostPressure().GetUnread())
		assert.NotNil(t, resp.GetHostPressure().GetCpu())
	} else {
		t.Logf("%v: checking that the answer says why it has no pressure", psi)
		assert.NotEmpty(t, resp.GetHostPressure().GetUnread())
	}

	groups := map[uint32]*gpotelv1.ControlGroup{}
	for _, g := range resp.GetControlGroups() {
		groups[g.GetResourceGroupOid()] = g
	}
	require.Len(t, groups, 2, "%v", resp.GetControlGroups())
	for oid, sleepers := range map[uint32]int64{6437: 2, 6438: 1} {
		g := groups[oid]
		require.NotNil(t, g, "resource group %d", oid)
		assert.Equal(t, fmt.Sprintf("/%s/gpdb/%d", top, oid), g.GetPath())
		assert.Empty(t, g.GetUnread())
		if psi == nil {
			assert.Empty(t, g.GetPressure().GetUnread())
			assert.NotNil(t, g.GetPressure().GetCpu().GetSome())
		} else {
			assert.NotEmpty(t, g.GetPressure().GetUnread())
		}
		assert.Equal(t, sleepers, g.GetTaskStates().GetSleeping()+g.GetTaskStates().GetRunning(),
			"a sleep(1) process is S, or R for the moment it runs")
	}
	for _, p := range resp.GetPidProcData() {
		g := resp.GetControlGroups()[p.GetControlGroup()]
		want := uint32(6437)
		if p.GetPid() == pids[2] {
			want = 6438
		}
		assert.Equal(t, want, g.GetResourceGroupOid(), "pid %d", p.GetPid())
	}
}
