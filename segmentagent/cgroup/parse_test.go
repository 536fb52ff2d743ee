// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func fixture(tb testing.TB, dir, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", dir, name))
	require.NoError(tb, err)
	return b
}

func TestParseMountinfo(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		want    []Mount
		wantErr error
	}{
		{name: "hybrid host: v1 per controller and v2 at unified", file: "hybrid", want: []Mount{
			{Version: 1, Root: "/", MountPoint: "/sys/fs/cgroup/cpu", Controllers: []string{"cpu"}},
			{Version: 1, Root: "/", MountPoint: "/sys/fs/cgroup/cpuacct", Controllers: []string{"cpuacct"}},
			{Version: 1, Root: "/", MountPoint: "/sys/fs/cgroup/cpuset", Controllers: []string{"cpuset"}},
			{Version: 1, Root: "/", MountPoint: "/sys/fs/cgroup/memory", Controllers: []string{"memory"}},
			{Version: 1, Root: "/", MountPoint: "/sys/fs/cgroup/systemd", Controllers: []string{"name=systemd"}},
			{Version: 2, Root: "/", MountPoint: "/sys/fs/cgroup/unified"},
		}},
		{name: "GP6 host: v1 only, generic options and release_agent are no controllers", file: "v1-gp6", want: []Mount{
			{Version: 1, Root: "/", MountPoint: "/sys/fs/cgroup/systemd", Controllers: []string{"name=systemd"}},
			{Version: 1, Root: "/", MountPoint: "/sys/fs/cgroup/cpu,cpuacct", Controllers: []string{"cpu", "cpuacct"}},
			{Version: 1, Root: "/", MountPoint: "/sys/fs/cgroup/memory", Controllers: []string{"memory"}},
			{Version: 1, Root: "/", MountPoint: "/sys/fs/cgroup/cpuset", Controllers: []string{"cpuset"}},
		}},
		{name: "pure v2 host mounts the unified hierarchy at /sys/fs/cgroup", file: "v2-only", want: []Mount{
			{Version: 2, Root: "/", MountPoint: "/sys/fs/cgroup"},
		}},
		{name: "container: a bind-mounted subtree and escaped blanks", file: "container-subtree", want: []Mount{
			{Version: 2, Root: "/kubepods.slice/pod1", MountPoint: "/sys/fs/cgroup"},
			{Version: 2, Root: "/", MountPoint: "/host/sys/fs/cgroup"},
			{Version: 1, Root: "/", MountPoint: "/mnt/cgroup with space", Controllers: []string{"cpu"}},
		}},
		{name: "truncated file is an error", file: "truncated", wantErr: ErrTruncated},
		{name: "line without the separator is a shape error", file: "no-separator", wantErr: ErrShape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMountinfo(fixture(t, "mountinfo", tt.file))
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseProcCgroup(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		want    []Membership
		wantErr error
	}{
		{name: "GP6 backend in gpdb/6437 of cpu,cpuacct", file: "gp6-resgroup", want: []Membership{
			{HierarchyID: 11, Controllers: []string{"cpuset"}, Path: "/gpdb"},
			{HierarchyID: 10, Controllers: []string{"memory"}, Path: "/user.slice"},
			{HierarchyID: 4, Controllers: []string{"cpu", "cpuacct"}, Path: "/gpdb/6437"},
			{HierarchyID: 1, Controllers: []string{"name=systemd"}, Path: "/system.slice/gpdb.service"},
		}},
		{name: "GP7 backend on v2", file: "gp7-resgroup", want: []Membership{{Path: "/gpdb.service/6438"}}},
		{name: "a path may hold colons", file: "colon-in-path", want: []Membership{{Path: "/a:b/gpdb/17000"}}},
		{name: "truncated file is an error", file: "truncated", wantErr: ErrTruncated},
		{name: "line without a path is a shape error", file: "no-path", wantErr: ErrShape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProcCgroup(fixture(t, "cgroup", tt.file))
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseProcCgroupShapes(t *testing.T) {
	for _, in := range []string{"", "x::/\n", "-1::/\n", "0:cpu:/\n", "3::/\n", "0::relative\n"} {
		_, err := ParseProcCgroup([]byte(in))
		assert.Error(t, err, "%q", in)
	}
}

func TestParsePressure(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		want    Pressure
		wantErr error
	}{
		{name: "modern kernel prints some and full", file: "cpu-6.x", want: Pressure{
			Some:    Stall{Avg10: 71.27, Avg60: 60.02, Avg300: 26.82, TotalMicros: 105562265},
			HasFull: true,
		}},
		{name: "cpu before 5.13 has no full line", file: "cpu-5.4", want: Pressure{
			Some: Stall{Avg10: 1.5, Avg60: 0.75, Avg300: 0.1, TotalMicros: 12345},
		}},
		{name: "unknown lines and keys of a later kernel are ignored", file: "memory-future", want: Pressure{
			Some:    Stall{Avg10: 0.69, Avg60: 0.46, Avg300: 0.37, TotalMicros: 2709586},
			Full:    Stall{Avg10: 0.14, Avg60: 0.25, Avg300: 0.28, TotalMicros: 2056606},
			HasFull: true,
		}},
		{name: "truncated file is an error", file: "truncated", wantErr: ErrTruncated},
		{name: "a line without total is a shape error", file: "no-total", wantErr: ErrShape},
		{name: "an average above 100 percent is a shape error", file: "over-100", wantErr: ErrShape},
		{name: "a file without the some line is a shape error", file: "only-full", wantErr: ErrShape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePressure(fixture(t, "pressure", tt.file))
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// cgroupstatsReply encodes a CGROUPSTATS_CMD_NEW payload holding the five counters (and extra bytes).
func cgroupstatsReply(tb testing.TB, counters []uint64, extra int) []byte {
	tb.Helper()
	v := make([]byte, 0, 8*len(counters)+extra)
	for _, c := range counters {
		v = binary.NativeEndian.AppendUint64(v, c)
	}
	v = append(v, make([]byte, extra)...)
	ae := netlink.NewAttributeEncoder()
	ae.Bytes(cgroupstatsTypeStats, v)
	b, err := ae.Encode()
	require.NoError(tb, err)
	return b
}

func TestDecodeCgroupStats(t *testing.T) {
	want := TaskStates{Sleeping: 7, Running: 2, Stopped: 1, Uninterruptible: 3, IOWait: 4, HasIOWait: true}
	t.Run("the five counters in kernel order", func(t *testing.T) {
		got, err := DecodeCgroupStats(cgroupstatsReply(t, []uint64{7, 2, 1, 3, 4}, 0))
		require.NoError(t, err)
		assert.Equal(t, want, got)
	})
	t.Run("a longer struct of a later kernel is read for its first five", func(t *testing.T) {
		got, err := DecodeCgroupStats(cgroupstatsReply(t, []uint64{7, 2, 1, 3, 4}, 16))
		require.NoError(t, err)
		assert.Equal(t, want, got)
	})
	t.Run("a short struct is truncated", func(t *testing.T) {
		_, err := DecodeCgroupStats(cgroupstatsReply(t, []uint64{7, 2, 1, 3}, 0))
		require.ErrorIs(t, err, ErrTruncated)
	})
	t.Run("a reply without the stats attribute is a shape error", func(t *testing.T) {
		ae := netlink.NewAttributeEncoder()
		ae.Uint32(9, 1)
		b, err := ae.Encode()
		require.NoError(t, err)
		_, err = DecodeCgroupStats(b)
		require.ErrorIs(t, err, ErrShape)
	})
	t.Run("an attribute running past the end is a shape error", func(t *testing.T) {
		b := cgroupstatsReply(t, []uint64{7, 2, 1, 3, 4}, 0)
		_, err := DecodeCgroupStats(b[:len(b)-3])
		require.ErrorIs(t, err, ErrShape)
	})
}

func TestTaskStatesAddState(t *testing.T) {
	var s TaskStates
	for _, c := range []byte("RRSDTtZI") {
		s.AddState(c)
	}
	assert.Equal(t, TaskStates{Running: 2, Sleeping: 1, Uninterruptible: 1, Stopped: 2, Other: 2}, s)
}

// TestReadFileReadsASeqFileLargerThanAPage: such a file comes in short reads
// that stop at record boundaries; stopping at the first would lose records.
func TestReadFileReadsASeqFileLargerThanAPage(t *testing.T) {
	const name = "/proc/self/smaps"
	count := func(b []byte) int { return bytes.Count(b, []byte("\nVmFlags:")) }
	for attempt := 0; ; attempt++ {
		got, err := readFile(name)
		require.NoError(t, err)
		want, err := os.ReadFile(name)
		require.NoError(t, err)
		require.Greater(t, len(want), 2*4096, "%s is too small here to prove anything", name)
		if count(got) == count(want) || attempt == 5 {
			assert.Equal(t, count(want), count(got), "mappings read")
			return
		}
	}
}
