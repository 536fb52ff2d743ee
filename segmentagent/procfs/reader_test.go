// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// allowUIDs allows the processes of uids, whatever their parent.
func allowUIDs(uids ...int64) Allow {
	return func(_, uid, _ int64) bool {
		for _, u := range uids {
			if u == uid {
				return true
			}
		}
		return false
	}
}

var postgresUID = allowUIDs(101)

func TestReaderReadsEveryFileOfAModernKernel(t *testing.T) {
	info, outcome, err := NewReader(fixtureRoot).Read(1001, postgresUID)
	require.NoError(t, err)
	require.Equal(t, Answered, outcome)
	assert.Equal(t, int64(1001), info.Pid)
	assert.Empty(t, info.Cmdline, "the title stays on the host")
	assert.Nil(t, info.CommandCount, "an idle title without cmd<N>")
	assert.Empty(t, info.Unread)

	// Every stat field, each with its own value in the fixture.
	assert.Equal(t, &yagpcc.ProcStat{Pid: 1001, Comm: "postgres", State: "S", Ppid: 900, Pgrp: 900, Session: 900, TtyNr: 0, Tpgid: -1,
		Flags: 4194560, Minflt: 8123, Cminflt: 31, Majflt: 12, Cmajflt: 2, Utime: 1234, Stime: 567, Cutime: 3310, Cstime: 1420,
		Priority: 20, Nice: 5, NumThreads: 1, Starttime: 54400, Vsize: 226508800, Rss: 6910, Rsslim: -1,
		Processor: 1, DelayacctBlkioTicks: 42, GuestTime: 7, CguestTime: 9}, info.ProcStat)

	ss := info.ProcStatus
	assert.Equal(t, int64(101), ss.UidReal)
	assert.Equal(t, int64(27640), ss.GetVmRssKb())
	require.NotNil(t, ss.RssAnonKb)
	assert.Equal(t, int64(6120), *ss.RssAnonKb)
	assert.Equal(t, int64(12040), ss.GetRssShmemKb())
	assert.Equal(t, int64(4512), ss.VoluntaryCtxtSwitches)

	assert.Equal(t, &yagpcc.ProcIO{Rchar: 7340032, Wchar: 2097152, Syscr: 812, Syscw: 256,
		ReadBytes: 4096000, WriteBytes: 1048576, CancelledWriteBytes: 8192}, info.ProcIo)
	assert.Equal(t, &yagpcc.ProcSchedstat{RunTimeNs: 9123456789, RunDelayNs: 12345678, Timeslices: 4321}, info.ProcSchedstat)
}

func TestReaderOnOldKernelLeavesRssSplitAbsentAndListsSchedstat(t *testing.T) {
	info, outcome, err := NewReader(fixtureRoot).Read(1002, postgresUID)
	require.NoError(t, err)
	require.Equal(t, Answered, outcome)
	assert.Nil(t, info.ProcStatus.RssAnonKb)
	assert.Nil(t, info.ProcStatus.RssFileKb)
	assert.Nil(t, info.ProcStatus.VmSwapKb)
	assert.Equal(t, int64(27640), info.ProcStatus.GetVmRssKb())
	assert.Nil(t, info.ProcSchedstat)
	assert.Equal(t, []string{"schedstat: not provided by this kernel"}, info.Unread)
}

func TestReaderKeepsCommWithParentheses(t *testing.T) {
	info, _, err := NewReader(fixtureRoot).Read(1003, postgresUID)
	require.NoError(t, err)
	assert.Equal(t, "postgres: (x) y", info.ProcStat.Comm)
	assert.Equal(t, "postgres: (x) y", info.ProcStatus.Name)
}

func TestReaderFailsOnTruncatedStatus(t *testing.T) {
	info, outcome, err := NewReader(fixtureRoot).Read(1004, postgresUID)
	assert.Nil(t, info)
	assert.Equal(t, Failed, outcome)
	assert.ErrorIs(t, err, ErrTruncated)
	assert.ErrorContains(t, err, "status")
}

func TestReaderListsOptionalFilesOfUnknownShapeAsUnread(t *testing.T) {
	info, outcome, err := NewReader(fixtureRoot).Read(1005, postgresUID)
	require.NoError(t, err)
	require.Equal(t, Answered, outcome)
	assert.Nil(t, info.ProcIo)
	assert.Nil(t, info.ProcSchedstat)
	require.Len(t, info.Unread, 2)
	assert.Contains(t, info.Unread[0], "io: unexpected shape: io: no write_bytes line")
	assert.Contains(t, info.Unread[1], "schedstat: unexpected shape")
	assert.NotNil(t, info.ProcStat)
}

func TestReaderDeniesAnotherUserWithoutReadingItsCmdline(t *testing.T) {
	info, outcome, err := NewReader(fixtureRoot).Read(1006, postgresUID)
	require.NoError(t, err)
	assert.Equal(t, Denied, outcome)
	assert.Nil(t, info)
}

func TestReaderDeniesEverythingWithoutAnAllowFunction(t *testing.T) {
	_, outcome, err := NewReader(fixtureRoot).Read(1001, nil)
	require.NoError(t, err)
	assert.Equal(t, Denied, outcome)
}

func TestReaderFailsOnStatusOfUnknownShapeBeforeTheUidCheck(t *testing.T) {
	_, outcome, err := NewReader(fixtureRoot).Read(1007, postgresUID)
	assert.Equal(t, Failed, outcome)
	assert.ErrorContains(t, err, "status: unexpected shape: status: Uid line")
}

func TestReaderListsUnreadableIO(t *testing.T) {
	info, outcome, err := NewReader(fixtureRoot).Read(1008, postgresUID)
	require.NoError(t, err)
	require.Equal(t, Answered, outcome)
	assert.Nil(t, info.ProcIo)
	assert.Equal(t, []string{"io: is a directory"}, info.Unread)
}

func TestReaderReportsMissingPidAsVanished(t *testing.T) {
	info, outcome, err := NewReader(fixtureRoot).Read(4242, postgresUID)
	require.NoError(t, err)
	assert.Equal(t, Vanished, outcome)
	assert.Nil(t, info)
}

func TestReaderReportsPidWithoutStatusAsVanished(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.Mkdir(root+"/77", 0o755))
	_, outcome, err := NewReader(root).Read(77, postgresUID)
	require.NoError(t, err)
	assert.Equal(t, Vanished, outcome)
}

func TestReaderRejectsNonPositivePid(t *testing.T) {
	_, outcome, err := NewReader(fixtureRoot).Read(0, postgresUID)
	assert.Equal(t, Failed, outcome)
	assert.Error(t, err)
}

func TestReaderGrowsItsBufferForLongFiles(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.CopyFS(root, os.DirFS(fixtureRoot)))
	long := bytes.Repeat([]byte{'a'}, 3*initialBufferSize)
	long = append(long, " con12 cmd7 SELECT"...)
	require.NoError(t, os.WriteFile(root+"/1001/cmdline", long, 0o644))
	info, _, err := NewReader(root).Read(1001, postgresUID)
	require.NoError(t, err)
	require.NotNil(t, info.CommandCount, "the count at the end of a long title")
	assert.Equal(t, int64(7), *info.CommandCount)
}

func TestReaderReplacesInvalidUTF8(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.CopyFS(root, os.DirFS(fixtureRoot)))
	for _, f := range []struct{ file, from, to string }{{"status", "Name:\tpostgres", "Name:\tpg\xff"}, {"stat", "(postgres)", "(pg\xff)"}} {
		b, err := os.ReadFile(root + "/1001/" + f.file)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(root+"/1001/"+f.file, bytes.Replace(b, []byte(f.from), []byte(f.to), 1), 0o644))
	}
	info, _, err := NewReader(root).Read(1001, postgresUID)
	require.NoError(t, err)
	assert.Equal(t, "pg\uFFFD", info.ProcStat.Comm)
	assert.Equal(t, "pg\uFFFD", info.ProcStatus.Name)
}

func TestReaderReadsItsOwnProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	pid := int64(os.Getpid())
	info, outcome, err := NewReader("/proc").Read(pid, allowUIDs(int64(os.Getuid())))
	require.NoError(t, err)
	require.Equal(t, Answered, outcome)
	assert.Equal(t, pid, info.ProcStat.Pid)
	assert.Equal(t, int64(os.Getuid()), info.ProcStatus.UidReal)
	assert.NotNil(t, info.ProcIo)
	assert.Empty(t, info.Cmdline)
}

func TestReaderNeverOpensTheCmdlineOfADeniedProcess(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.CopyFS(root, os.DirFS(fixtureRoot)))
	fifo := root + "/1006/cmdline"
	require.NoError(t, os.Remove(fifo))
	// Opening a FIFO without a writer blocks, so a reader that touched it would hang here.
	require.NoError(t, unix.Mkfifo(fifo, 0o644))
	t.Cleanup(func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
			_ = f.Close()
		}
	})
	done := make(chan Outcome, 1)
	go func() {
		_, outcome, _ := NewReader(root).Read(1006, postgresUID)
		done <- outcome
	}()
	select {
	case outcome := <-done:
		assert.Equal(t, Denied, outcome)
	case <-await.Context(t).Done():
		t.Fatal("the reader opened the cmdline of a process it denied")
	}
}

// One allocation holds the messages; the name and the command line are the only others.
func TestReaderAllocatesOnlyTheAnswer(t *testing.T) {
	r := NewReader(fixtureRoot)
	allocs := testing.AllocsPerRun(50, func() {
		if _, outcome, err := r.Read(1001, postgresUID); outcome != Answered {
			t.Fatal(outcome, err)
		}
	})
	assert.LessOrEqual(t, allocs, 3.0)
}

// ReadCore leaves schedstat to the taskstats record but reads io: the
// record's io counts are rounded down to 1024.
func TestReadCoreLeavesOnlySchedstatToTaskstats(t *testing.T) {
	info, outcome, err := NewReader(fixtureRoot).ReadCore(1010, allowUIDs(101))
	if outcome != Answered || err != nil {
		t.Fatalf("outcome %v err %v", outcome, err)
	}
	if info.ProcIo == nil || info.ProcSchedstat != nil || len(info.Unread) != 0 {
		t.Errorf("io %v schedstat %v unread %v: io read, schedstat not, none missing", info.ProcIo, info.ProcSchedstat, info.Unread)
	}
	if info.ProcStat == nil || info.ProcStatus == nil || info.GetCommandCount() != 5 {
		t.Errorf("status, stat and the cmdline's command count must be read: %+v", info)
	}
}
