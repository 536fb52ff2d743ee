// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/hostcaps"
)

// These tests read this machine's real cgroups and pressure files through
// the same Inspector the agent uses. Creating groups needs root.

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups needs root")
	}
}

// makeGroup creates dir and its parents under a hierarchy's mount point and
// removes them at cleanup, deepest first, once their processes are gone.
func makeGroup(t *testing.T, mountPoint, rel string) string {
	t.Helper()
	dir := filepath.Join(mountPoint, rel)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Cleanup(func() {
		for p := dir; p != mountPoint && p != "/"; p = filepath.Dir(p) {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("removing %s: %v", p, err)
			}
		}
	})
	return dir
}

// start runs a command until the test ends (cleanups run last-in first-out,
// so it is killed before its group is removed).
func start(t *testing.T, cmd *exec.Cmd) int64 {
	t.Helper()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return int64(cmd.Process.Pid)
}

func testGroupName() string { return fmt.Sprintf("gpotel-cgroup-test-%d", os.Getpid()) }

func TestHostPressureIsReadFromProc(t *testing.T) {
	if err := hostcaps.PSI(); err != nil {
		t.Skip(err)
	}
	in := NewInspector(InspectorConfig{})
	set := in.HostPressure()
	assert.Empty(t, set.Unread)
	for _, r := range []Resource{CPU, Memory, IO} {
		assert.Contains(t, set.ByResource, r)
	}
}

func TestCPUContendedV2GroupShowsGrowingCPUPressure(t *testing.T) {
	requireRoot(t)
	in := NewInspector(InspectorConfig{})
	v2 := in.Layout().V2
	if v2 == nil {
		t.Skip("cgroup v2 is not mounted on this host")
	}
	if err := hostcaps.PSI(); err != nil {
		t.Skipf("no cpu.pressure to grow: %v", err)
	}
	dir := makeGroup(t, v2.MountPoint, filepath.Join(testGroupName(), "gpdb", "6437"))
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	require.NoError(t, err)
	defer func() { _ = syscall.Close(fd) }()

	// More burners than CPUs: some of the group's runnable tasks always wait.
	var pids []int64
	for range 3 {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
		pids = append(pids, start(t, cmd))
	}

	g, err := in.GroupOf(pids[0])
	require.NoError(t, err)
	assert.Equal(t, Group{Version: 2, Path: "/" + testGroupName() + "/gpdb/6437", ResourceGroupOID: 6437}, g)

	first := in.ReadGroup(g)
	require.Empty(t, first.Unread)
	require.NotNil(t, first.Pressure)
	require.Empty(t, first.Pressure.Unread)
	before := first.Pressure.ByResource[CPU].Some.TotalMicros
	end := await.Deadline(t)
	for {
		r := in.ReadGroup(g)
		require.Empty(t, r.Unread)
		now := r.Pressure.ByResource[CPU].Some.TotalMicros
		if now > before {
			t.Logf("cpu.pressure some total %d -> %d us", before, now)
			return
		}
		if time.Now().After(end) {
			t.Fatalf("cpu.pressure some total stayed at %d us with 3 burners on %s", now, dir)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestCgroupstatsCountsAV1GroupsTasksByState counts a v1 group's tasks by
// state through CGROUPSTATS: in the cpu hierarchy where this host mounts
// one (Greenplum 6's resource groups), and in a v1 hierarchy the test
// mounts itself, so that the v1 path meets the real kernel on a host that
// mounts only cgroup v2 (Debian 12's default) as long as the kernel has v1.
func TestCgroupstatsCountsAV1GroupsTasksByState(t *testing.T) {
	requireRoot(t)
	t.Run("the host's cpu hierarchy", func(t *testing.T) {
		in := NewInspector(InspectorConfig{CgroupStats: true})
		var cpu *Mount
		for _, m := range in.Layout().V1 {
			if sameSet(m.Controllers, []string{"cpu"}) || sameSet(m.Controllers, []string{"cpu", "cpuacct"}) {
				cpu = &m
			}
		}
		if cpu == nil {
			t.Skip("this host mounts no cgroup v1 cpu hierarchy (the next subtest mounts a v1 hierarchy of its own)")
		}
		checkCgroupstats(t, in, cpu.MountPoint, strings.Join(cpu.Controllers, ","))
	})
	t.Run("a v1 hierarchy the test mounts", func(t *testing.T) {
		name := "name=" + testGroupName()
		dir := t.TempDir()
		if err := syscall.Mount("cgroup", dir, "cgroup", 0, "none,"+name); err != nil {
			t.Skipf("this kernel mounts no cgroup v1 hierarchy: %v", err)
		}
		// Unmounted after the group is removed (cleanups run last-in first-out).
		t.Cleanup(func() {
			if err := syscall.Unmount(dir, 0); err != nil {
				t.Errorf("unmounting %s: %v", dir, err)
			}
		})
		checkCgroupstats(t, NewInspector(InspectorConfig{CgroupStats: true}), dir, name)
	})
}

// checkCgroupstats puts a sleeping and a stopped process in a resource
// group of the v1 hierarchy mounted at mountPoint and reads its task states.
func checkCgroupstats(t *testing.T, in *Inspector, mountPoint, hierarchy string) {
	t.Helper()
	for _, c := range in.Capabilities() {
		if c.Name == "cgroup v1 task states (cgroupstats)" && c.Off != nil {
			t.Skipf("cgroupstats unavailable: %v", c.Off)
		}
	}
	dir := makeGroup(t, mountPoint, filepath.Join(testGroupName(), "gpdb", "6438"))
	// A reader blocked on an empty pipe sleeps in plain TASK_INTERRUPTIBLE, as a
	// backend waiting for its client does; sleep(1) would not do: since Linux 6.1
	// nanosleep adds TASK_FREEZABLE to the state word, and cgroupstats counts
	// such a task in no bucket.
	reader := exec.Command("cat")
	stdin, err := reader.StdinPipe()
	require.NoError(t, err)
	defer func() { _ = stdin.Close() }()
	sleeping := start(t, reader)
	stopped := start(t, exec.Command("sleep", "3600"))
	for _, pid := range []int64{sleeping, stopped} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup.procs"), fmt.Appendf(nil, "%d", pid), 0o644))
	}
	require.NoError(t, syscall.Kill(int(stopped), syscall.SIGSTOP))

	g, err := in.GroupOf(sleeping)
	require.NoError(t, err)
	assert.Equal(t, Group{Version: 1, Hierarchy: hierarchy, Path: "/" + testGroupName() + "/gpdb/6438", ResourceGroupOID: 6438}, g)

	want := TaskStates{Sleeping: 1, Stopped: 1, HasIOWait: true}
	end := await.Deadline(t)
	for {
		r := in.ReadGroup(g)
		require.Empty(t, r.Unread)
		require.NotNil(t, r.TaskStates)
		if *r.TaskStates == want || time.Now().After(end) {
			assert.Equal(t, want, *r.TaskStates)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
