// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfixture_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpotel/gpotel/segmentagent/procfixture"
	"github.com/gpotel/gpotel/segmentagent/procfs"
)

func TestWrittenTreeReadsThroughTheAgentReader(t *testing.T) {
	root := procfixture.TempRoot(t)
	require.NoError(t, procfixture.Write(root, []int{10, 11}, 1234))
	host, err := procfs.ReadHost(procfs.HostConfig{Root: root, Hostname: "h"}, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(procfixture.BootTimeUnix), host.BootTimeUnix)
	assert.Equal(t, procfixture.KernelRelease, host.KernelRelease)

	r := procfs.NewReader(root)
	for _, pid := range []int64{10, 11} {
		info, outcome, err := r.Read(pid, func(_, uid, _ int64) bool { return uid == 1234 })
		require.NoError(t, err)
		require.Equal(t, procfs.Answered, outcome)
		assert.Empty(t, info.Unread)
		assert.Equal(t, pid, info.ProcStat.Pid)
		assert.Equal(t, int64(3), info.GetCommandCount(), "cmd3 of the written title")
		assert.NotNil(t, info.ProcStatus.RssAnonKb)
		assert.NotNil(t, info.ProcSchedstat)
	}
}

func TestProcessFieldsArriveAsWritten(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, procfixture.WriteProcesses(root, []procfixture.Process{
		{PID: 7, UID: 5, Comm: "postgres", Cmdline: "postgres:  5432, gpadmin tpch con5 cmd9 idle", UTime: 111, STime: 22, StartTime: 333, WriteBytes: 4096,
			OldKernel: true},
	}))
	info, outcome, err := procfs.NewReader(root).Read(7, func(_, _, _ int64) bool { return true })
	require.NoError(t, err)
	require.Equal(t, procfs.Answered, outcome)
	assert.Equal(t, int64(111), info.ProcStat.Utime)
	assert.Equal(t, int64(22), info.ProcStat.Stime)
	assert.Equal(t, int64(333), info.ProcStat.Starttime)
	assert.Equal(t, int64(4096), info.ProcIo.WriteBytes)
	assert.Equal(t, int64(9), info.GetCommandCount())
	assert.Nil(t, info.ProcStatus.RssAnonKb)
	assert.Nil(t, info.ProcSchedstat)
}

func TestRejectsNonPositivePid(t *testing.T) {
	assert.Error(t, procfixture.Write(t.TempDir(), []int{0}, 1))
}

func TestManyProcessesAreAllWritten(t *testing.T) {
	root := procfixture.TempRoot(t)
	pids := make([]int, 2000)
	for i := range pids {
		pids[i] = 5000 + i
	}
	require.NoError(t, procfixture.Write(root, pids, 42))
	r := procfs.NewReader(root)
	for _, pid := range pids {
		info, outcome, err := r.Read(int64(pid), func(_, uid, _ int64) bool { return uid == 42 })
		require.NoError(t, err)
		require.Equal(t, procfs.Answered, outcome, "pid %d", pid)
		require.Equal(t, int64(pid), info.ProcStatus.Tgid)
	}
}
