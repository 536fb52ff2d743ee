// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/segmentagent/internal/proctest"
	"github.com/gpotel/gpotel/testbed/groundtruth"
)

// childModeEnv makes the test binary act as a workload child instead of running tests.
const childModeEnv = "GPOTEL_AGENT_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childModeEnv) {
	case "":
		os.Exit(m.Run())
	case "burn":
		burnAndWrite(os.Getenv("GPOTEL_AGENT_TEST_FILE"))
	case "no-net-admin":
		noNetAdminChild()
	default:
		fmt.Fprintln(os.Stderr, "unknown child mode", os.Getenv(childModeEnv))
		os.Exit(2)
	}
}

// burnAndWrite spins the CPU and writes and fsyncs a file, forever, so that
// both utime and write_bytes keep growing.
func burnAndWrite(path string) {
	f, err := os.Create(path)
	if err != nil {
		os.Exit(3)
	}
	block := make([]byte, 64<<10)
	x := uint64(1)
	for {
		deadline := time.Now().Add(20 * time.Millisecond)
		for time.Now().Before(deadline) {
			for i := 0; i < 10000; i++ {
				x = x*6364136223846793005 + 1442695040888963407
			}
		}
		block[0] = byte(x)
		if _, err := f.Write(block); err != nil {
			os.Exit(4)
		}
		if err := f.Sync(); err != nil {
			os.Exit(5)
		}
	}
}

// startChild starts a workload child of this test binary, or any command,
// and ends it with the test.
func startChild(t *testing.T, cmd *exec.Cmd) int64 {
	t.Helper()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	// Its own process group, killed whole: a shell's children go with it.
	cmd.SysProcAttr.Setpgid = true
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	// Start returns once exec has begun; the new argv appears a moment later.
	want := strings.Join(cmd.Args, "\x00") + "\x00"
	deadline := await.Deadline(t)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
		require.NoError(t, err)
		if string(b) == want {
			return int64(cmd.Process.Pid)
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d never showed argv %q, has %q", cmd.Process.Pid, want, b)
		}
		time.Sleep(time.Millisecond)
	}
}

// blockBackedDir is a temporary directory whose writes reach a block device:
// tmpfs has no writeback, so write_bytes would never grow there.
func blockBackedDir(t *testing.T) string {
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err == nil && fs.Type != unix.TMPFS_MAGIC {
		return dir
	}
	dir, err := os.MkdirTemp(".", "burn-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// realService reads /proc for users, with this test binary as the
// postmaster of the processes it starts.
func realService(t *testing.T, users ...string) *Service {
	t.Helper()
	s, err := NewService(ServiceConfig{ProcRoot: "/proc", AllowedUsers: users, PostmasterPidFiles: []string{proctest.SelfAsPostmaster(t)}}, nil, nil)
	require.NoError(t, err)
	return s
}

func readOne(t *testing.T, s *Service, pid int64) (*yagpcc.GpPidProcInfo, *yagpcc.ProcReadSummary) {
	t.Helper()
	resp, err := s.GetPidProcStat(context.Background(), request(pid))
	require.NoError(t, err)
	if len(resp.PidProcData) == 0 {
		return nil, resp.Summary
	}
	return resp.PidProcData[0], resp.Summary
}

func TestRealChildShowsCPUAndWrittenBytesGrowing(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), childModeEnv+"=burn", "GPOTEL_AGENT_TEST_FILE="+filepath.Join(blockBackedDir(t), "data"))
	pid := startChild(t, cmd)
	s := realService(t, strconv.Itoa(os.Getuid()))

	first, _ := readOne(t, s, pid)
	require.NotNil(t, first)
	require.NotNil(t, first.ProcIo, "unread: %v", first.Unread)
	assert.Equal(t, pid, first.ProcStat.Pid)
	assert.Positive(t, first.ProcStat.Starttime)

	// Poll rather than sleep a fixed time: a loaded machine schedules the child late.
	deadline := await.Deadline(t)
	for {
		now, _ := readOne(t, s, pid)
		require.NotNil(t, now, "the child vanished")
		assert.Equal(t, first.ProcStat.Starttime, now.ProcStat.Starttime, "same process")
		if now.ProcStat.Utime > first.ProcStat.Utime && now.ProcIo.WriteBytes > first.ProcIo.WriteBytes &&
			now.ProcSchedstat.GetRunTimeNs() > first.ProcSchedstat.GetRunTimeNs() {
			assert.Greater(t, now.ProcIo.Wchar, first.ProcIo.Wchar)
			assert.Greater(t, now.ProcIo.Syscw, first.ProcIo.Syscw)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("counters did not grow: utime %d→%d, write_bytes %d→%d",
				first.ProcStat.Utime, now.ProcStat.Utime, first.ProcIo.WriteBytes, now.ProcIo.WriteBytes)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The CPUs an answer carries are this machine's online CPUs, through the
// agent's own path (the default sys_root): as many as /proc/stat's cpuN
// lines (the kernel prints one per online CPU), and at least as many as
// this process may run on (nproc, Go's NumCPU: a cpuset or affinity
// bounds it, not the host).
func TestAnswerCarriesTheHostsOnlineCPUs(t *testing.T) {
	online, err := groundtruth.OnlineCPUs()
	require.NoError(t, err)
	s := realService(t, strconv.Itoa(os.Getuid()))
	resp, err := s.GetPidProcStat(context.Background(), request(int64(os.Getpid())))
	require.NoError(t, err)
	require.NotNil(t, resp.GetHost().Cpus, "no CPUs in the answer")
	assert.Equal(t, online, int(resp.GetHost().GetCpus()), "CPUs in the answer against /proc/stat's cpuN lines")
	assert.GreaterOrEqual(t, int(resp.GetHost().GetCpus()), runtime.NumCPU(), "fewer CPUs than this process may run on")
	t.Logf("online CPUs: %d (/proc/stat cpuN lines %d, NumCPU %d)", resp.GetHost().GetCpus(), online, runtime.NumCPU())
}

func TestRealChildThatExitedIsSkipped(t *testing.T) {
	cmd := exec.Command("sleep", "3600")
	pid := startChild(t, cmd)
	s := realService(t, strconv.Itoa(os.Getuid()))
	info, summary := readOne(t, s, pid)
	require.NotNil(t, info)
	assert.Equal(t, int64(1), summary.Answered)

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait() // reaped: its /proc directory is gone

	info, summary = readOne(t, s, pid)
	assert.Nil(t, info)
	assert.Equal(t, &yagpcc.ProcReadSummary{Requested: 1, Vanished: 1}, summary)
}

func TestRealProcessOfAnotherUserIsDeniedAndAllowedWhenConfigured(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("starting a process as nobody needs root")
	}
	cmd := exec.Command("sh", "-c", "sleep 3600; : secret-argument")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	pid := startChild(t, cmd)

	info, summary := readOne(t, realService(t, "root"), pid)
	assert.Nil(t, info)
	assert.Equal(t, &yagpcc.ProcReadSummary{Requested: 1, Denied: 1}, summary)

	info, _ = readOne(t, realService(t, "nobody"), pid)
	require.NotNil(t, info)
	assert.Equal(t, int64(65534), info.ProcStatus.UidReal)
	assert.Empty(t, info.Cmdline, "the command line never leaves the host")
}

// TestOnlyPostmastersAndTheirChildrenAreAnswered: of an allowed user's
// processes, only a postmaster and its children are database processes. The
// postmaster is found from its working directory (the data directory, whose
// postmaster.pid names it) or named by postmaster_pid_files.
func TestOnlyPostmastersAndTheirChildrenAreAnswered(t *testing.T) {
	uid := strconv.Itoa(os.Getuid())
	dataDir := t.TempDir()
	cmd := exec.Command("sh", "-c", "sleep 3600 & echo $!; wait")
	cmd.Dir = dataDir
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	postmaster := startChild(t, cmd)
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	backend, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	require.NoError(t, err)
	stray := startChild(t, exec.Command("sleep", "3600")) // same user, its parent is the test binary
	pidFile := filepath.Join(dataDir, "postmaster.pid")
	require.NoError(t, os.WriteFile(pidFile, []byte(fmt.Sprintf("%d\n%s\n", postmaster, dataDir)), 0o600))

	for name, cfg := range map[string]ServiceConfig{
		"found from the parent's data directory": {ProcRoot: "/proc", AllowedUsers: []string{uid}},
		"named by postmaster_pid_files":          {ProcRoot: "/proc", AllowedUsers: []string{uid}, PostmasterPidFiles: []string{pidFile}},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := NewService(cfg, nil, nil)
			require.NoError(t, err)
			resp, err := s.GetPidProcStat(context.Background(), request(backend, stray, postmaster))
			require.NoError(t, err)
			assert.Equal(t, []int64{backend, postmaster}, answeredPids(resp))
			assert.Equal(t, int64(1), resp.Summary.Denied, "the stray process")
		})
	}
}
