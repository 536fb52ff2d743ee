// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/segmentagent/procfixture"
)

func TestPartialAnswerSkipsVanishedAndDeniedAndListsUnreadFiles(t *testing.T) {
	s := fixtureService(t)
	resp, err := s.GetPidProcStat(context.Background(), request(1001, 4242, 1006, 1005, 1007, 1002))
	require.NoError(t, err)
	assert.Equal(t, []int64{1001, 1005, 1002}, answeredPids(resp))
	assert.Equal(t, &yagpcc.ProcReadSummary{Requested: 6, Answered: 3, Vanished: 1, Denied: 1, Failed: 1}, resp.Summary)

	first := resp.PidProcData[0]
	assert.Equal(t, int64(0), first.GpSegmentId)
	assert.Equal(t, int64(7), first.SessId)
	assert.Equal(t, int64(1234), first.ProcStat.Utime)
	assert.Empty(t, first.Unread)
	assert.Len(t, resp.PidProcData[1].Unread, 2, "io and schedstat of 1005 have an unknown shape")
	assert.Equal(t, int64(1), resp.PidProcData[1].GpSegmentId)
}

func TestAnswerCarriesHostConstants(t *testing.T) {
	resp, err := fixtureService(t).GetPidProcStat(context.Background(), request(1001))
	require.NoError(t, err)
	assert.Equal(t, "sdw1", resp.Host.Hostname)
	assert.Equal(t, int64(1795246391), resp.Host.BootTimeUnix)
	assert.Equal(t, "6.1.0-fixture", resp.Host.KernelRelease)
	assert.Positive(t, resp.Host.ClkTck)
	assert.Positive(t, resp.Host.PageSize)
}

// The host's online CPUs are read at each answer from sys_root: a CPU
// brought online shows in the next answer; a host whose sysfs cannot be
// read answers without them (absent, not 0).
func TestAnswerCarriesTheOnlineCPUsOfItsSysRoot(t *testing.T) {
	sysRoot := t.TempDir()
	online := filepath.Join(sysRoot, "devices", "system", "cpu", "online")
	require.NoError(t, os.MkdirAll(filepath.Dir(online), 0o755))
	require.NoError(t, os.WriteFile(online, []byte("0-3,6\n"), 0o600))
	s := fixtureService(t, func(c *ServiceConfig) { c.SysRoot = sysRoot })
	cpus := func() *uint32 {
		resp, err := s.GetPidProcStat(context.Background(), request(1001))
		require.NoError(t, err)
		return resp.GetHost().Cpus
	}
	if n := cpus(); assert.NotNil(t, n) {
		assert.Equal(t, uint32(5), *n)
	}
	require.NoError(t, os.WriteFile(online, []byte("0-7\n"), 0o600))
	if n := cpus(); assert.NotNil(t, n) {
		assert.Equal(t, uint32(8), *n, "a CPU brought online after the start")
	}
	require.NoError(t, os.Remove(online))
	assert.Nil(t, cpus())
}

func TestEmptyRequestIsAnEmptyAnswer(t *testing.T) {
	resp, err := fixtureService(t).GetPidProcStat(context.Background(), &yagpcc.GetPidProcInfoReq{})
	require.NoError(t, err)
	assert.Empty(t, resp.PidProcData)
	assert.Equal(t, int64(0), resp.Summary.Requested)
	assert.NotNil(t, resp.Host)
}

func TestOnlyVanishedAndDeniedIsAnAnswerNotAnError(t *testing.T) {
	resp, err := fixtureService(t).GetPidProcStat(context.Background(), request(4242, 1006))
	require.NoError(t, err)
	assert.Empty(t, resp.PidProcData)
	assert.Equal(t, int64(1), resp.Summary.Vanished)
	assert.Equal(t, int64(1), resp.Summary.Denied)
}

func TestEveryPidFailedIsAnInternalError(t *testing.T) {
	_, err := fixtureService(t).GetPidProcStat(context.Background(), request(1004, 1007, 4242))
	require.Equal(t, codes.Internal, status.Code(err))
	assert.Contains(t, err.Error(), "none of the 3 requested processes could be read (2 failed, 1 vanished, 0 denied)")
	assert.Contains(t, err.Error(), "pid 1004: status: truncated")
}

func TestMorePidsThanTheLimitIsInvalid(t *testing.T) {
	s := fixtureService(t, func(c *ServiceConfig) { c.MaxPidsPerRequest = 2 })
	_, err := s.GetPidProcStat(context.Background(), request(1001, 1002, 1003))
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Contains(t, err.Error(), "3 processes requested, more than max_pids_per_request 2")
}

// TestOneInvalidPidDoesNotSinkTheBatch: a pid that cannot name a process on
// this host (≤ 0, above the kernel's pid_max) is dropped and counted; the
// rest of the batch is answered, so one bad catalog row never reads as a host down.
func TestOneInvalidPidDoesNotSinkTheBatch(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	s, err := NewService(ServiceConfig{ProcRoot: fixtureRoot, AllowedUsers: []string{postgresUID}, PostmasterPidFiles: []string{fixturePostmaster}}, nil, mp)
	require.NoError(t, err)
	// The fixture's kernel/pid_max is 32768.
	resp, err := s.GetPidProcStat(context.Background(), request(0, 1001, -5, 32769, 1<<40, 1002))
	require.NoError(t, err)
	assert.Equal(t, []int64{1001, 1002}, answeredPids(resp))
	assert.Equal(t, &yagpcc.ProcReadSummary{Requested: 6, Answered: 2, Denied: 4}, resp.Summary)
	assert.Equal(t, int64(4), sumCounter(t, reader, MetricProcesses, AttrOutcome, "invalid"))
}

func TestDuplicatePidsAreAnsweredOnceWithTheFirstEntry(t *testing.T) {
	req := request(1001, 1002)
	req.SegmentProcess = append(req.SegmentProcess, &yagpcc.SegmentProcess{GpSegmentId: 9, SessId: 9, Pid: 1001})
	resp, err := fixtureService(t).GetPidProcStat(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, []int64{1001, 1002}, answeredPids(resp))
	assert.Equal(t, int64(0), resp.PidProcData[0].GpSegmentId)
	assert.Equal(t, int64(2), resp.Summary.Requested)
}

func TestCancelledContextReturnsCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := fixtureService(t).GetPidProcStat(ctx, request(1001))
	assert.Equal(t, codes.Canceled, status.Code(err))
}

func TestExpiredContextReturnsDeadlineExceeded(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, err := fixtureService(t).GetPidProcStat(ctx, request(1001))
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
}

// Both pids' status files are FIFOs: the reader blocks opening the first
// until the test opens it for writing, the test then cancels and lets the
// read finish. A service that went on to the second pid would block for good.
func TestCancellationStopsReadingAtOnce(t *testing.T) {
	root := copyFixture(t)
	require.NoError(t, os.CopyFS(root+"/2001", os.DirFS(fixtureRoot+"/1001")))
	for _, pid := range []string{"1001", "2001"} {
		require.NoError(t, os.Remove(root+"/"+pid+"/status"))
		require.NoError(t, unix.Mkfifo(root+"/"+pid+"/status", 0o644))
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(root+"/2001/status", os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
			_ = f.Close()
		}
	})
	s := fixtureService(t, func(c *ServiceConfig) { c.ProcRoot, c.ReadParallelism = root, 1 })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.GetPidProcStat(ctx, request(1001, 2001))
		done <- err
	}()
	w, err := os.OpenFile(root+"/1001/status", os.O_WRONLY, 0)
	require.NoError(t, err)
	cancel()
	_, err = w.Write(fixtureFile(t, "1001/status"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	select {
	case err := <-done:
		assert.Equal(t, codes.Canceled, status.Code(err))
	case <-await.Context(t).Done():
		t.Fatal("the service kept reading after its context was cancelled")
	}
}

func fixtureFile(t testing.TB, path string) []byte {
	b, err := os.ReadFile(fixtureRoot + "/" + path)
	require.NoError(t, err)
	return b
}

func TestParallelReadKeepsRequestOrder(t *testing.T) {
	root := procfixture.TempRoot(t)
	pids := make([]int, 1000)
	req := &yagpcc.GetPidProcInfoReq{}
	for i := range pids {
		pids[i] = 30000 - i
		req.SegmentProcess = append(req.SegmentProcess, &yagpcc.SegmentProcess{GpSegmentId: int64(i), Pid: int64(pids[i])})
	}
	require.NoError(t, procfixture.Write(root, pids, 101))
	s := fixtureService(t, func(c *ServiceConfig) { c.ProcRoot, c.ReadParallelism = root, 4 })
	resp, err := s.GetPidProcStat(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, resp.PidProcData, len(pids))
	for i, p := range resp.PidProcData {
		require.Equal(t, int64(pids[i]), p.Pid)
		require.Equal(t, int64(i), p.GpSegmentId)
		require.Equal(t, int64(pids[i]), p.ProcStat.Pid)
	}
}

// TestAnswersCarryNoCommandLine: a process title holds other users' query
// text on PostgreSQL; only the command count parsed from it leaves the host.
func TestAnswersCarryNoCommandLine(t *testing.T) {
	resp, err := fixtureService(t).GetPidProcStat(context.Background(), request(1010, 1001))
	require.NoError(t, err)
	require.Len(t, resp.PidProcData, 2)
	for _, p := range resp.PidProcData {
		assert.Empty(t, p.GetCmdline(), "pid %d", p.GetPid())
	}
	assert.Equal(t, int64(5), resp.PidProcData[0].GetCommandCount(), "cmd5 of the title")
	assert.Nil(t, resp.PidProcData[1].CommandCount, "a title without cmd<N>")
}

func TestGetMetricQueriesIsUnimplemented(t *testing.T) {
	_, err := fixtureService(t).GetMetricQueries(context.Background(), &yagpcc.GetQueriesInfoReq{})
	assert.Equal(t, codes.Unimplemented, status.Code(err))
}

func TestTelemetryCountsOutcomes(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	s, err := NewService(ServiceConfig{ProcRoot: fixtureRoot, AllowedUsers: []string{postgresUID}, PostmasterPidFiles: []string{fixturePostmaster},
		MaxPidsPerRequest: 5}, nil, mp)
	require.NoError(t, err)
	_, err = s.GetPidProcStat(context.Background(), request(1001, 4242, 1006, 1005, 1007))
	require.NoError(t, err)
	_, err = s.GetPidProcStat(context.Background(), request(1001, 1002, 1003, 1005, 1008, 1010))
	require.Error(t, err, "more than max_pids_per_request")

	assert.Equal(t, int64(1), sumCounter(t, reader, MetricRequests, AttrOutcome, requestPartial))
	assert.Equal(t, int64(1), sumCounter(t, reader, MetricRequests, AttrOutcome, requestInvalid))
	assert.Equal(t, int64(2), sumCounter(t, reader, MetricProcesses, AttrOutcome, "answered"))
	assert.Equal(t, int64(1), sumCounter(t, reader, MetricProcesses, AttrOutcome, "vanished"))
	assert.Equal(t, int64(1), sumCounter(t, reader, MetricProcesses, AttrOutcome, "denied"))
	assert.Equal(t, int64(1), sumCounter(t, reader, MetricProcesses, AttrOutcome, "failed"))
	assert.Equal(t, int64(1), sumCounter(t, reader, MetricReadErrors, AttrFile, "io"))
	assert.Equal(t, int64(1), sumCounter(t, reader, MetricReadErrors, AttrFile, "schedstat"))
	assert.Equal(t, int64(1), sumCounter(t, reader, MetricReadErrors, AttrFile, "status"))
}

func TestNewServiceRejectsARootWithoutProcfs(t *testing.T) {
	_, err := NewService(ServiceConfig{ProcRoot: t.TempDir(), AllowedUsers: []string{"0"}}, nil, nil)
	assert.ErrorContains(t, err, "boot time")
}

func TestNewServiceRejectsUnknownUsers(t *testing.T) {
	_, err := NewService(ServiceConfig{ProcRoot: fixtureRoot, AllowedUsers: []string{"no-such-user-gpotel", "-3"}}, nil, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no-such-user-gpotel")
	assert.Contains(t, err.Error(), "uid -3 is out of range")
}

// TestPidFileOwnerIsAllowedAndItsPostmastersChildrenAnswered: the owner of a
// postmaster_pid_files entry is an allowed user even when allowed_users does
// not name it, and of every allowed user's processes only the children of
// the postmaster it names are answered.
func TestPidFileOwnerIsAllowedAndItsPostmastersChildrenAnswered(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("handing the pid file to the fixture's database user needs root")
	}
	pidFile := t.TempDir() + "/postmaster.pid"
	require.NoError(t, os.WriteFile(pidFile, []byte("900\n"), 0o600))
	require.NoError(t, os.Chown(pidFile, 101, 101))
	s := fixtureService(t, func(c *ServiceConfig) {
		c.AllowedUsers = []string{"root"}
		c.PostmasterPidFiles = []string{pidFile}
	})
	resp, err := s.GetPidProcStat(context.Background(), request(1001, 1006, 1009))
	require.NoError(t, err)
	assert.Equal(t, []int64{1001}, answeredPids(resp), "101 owns the pid file; nobody is not allowed; root's kernel thread is no postmaster's child")
	assert.Equal(t, int64(2), resp.Summary.Denied)
}

// TestAPidFileNamingANonPostmasterAdmitsNothing: a pid file naming a pid
// whose process is not of an allowed user (a stale file, the pid reused) does
// not make that process's children database processes.
func TestAPidFileNamingANonPostmasterAdmitsNothing(t *testing.T) {
	pidFile := t.TempDir() + "/postmaster.pid"
	require.NoError(t, os.WriteFile(pidFile, []byte("1006\n"), 0o600)) // nobody's process, not an allowed user's
	s := fixtureService(t, func(c *ServiceConfig) { c.PostmasterPidFiles = []string{pidFile} })
	resp, err := s.GetPidProcStat(context.Background(), request(1001))
	require.NoError(t, err)
	assert.Empty(t, resp.PidProcData)
	assert.Equal(t, int64(1), resp.Summary.Denied)
}

func TestDefaultUsersAreThoseThatExist(t *testing.T) {
	s, err := NewService(ServiceConfig{ProcRoot: fixtureRoot}, nil, nil)
	if err != nil {
		assert.ErrorContains(t, err, "none of the default database users")
		return
	}
	for uid := range s.allowed {
		assert.NotEqual(t, int64(0), uid, "root is never allowed by default")
	}
}

func TestFailureCodeSaysWhetherRetryingMayHelp(t *testing.T) {
	assert.Equal(t, codes.Unavailable, failureCode(fmt.Errorf("pid 5: status: %w", unix.EMFILE)))
	assert.Equal(t, codes.Unavailable, failureCode(fmt.Errorf("pid 5: open: %w", unix.ENFILE)))
	assert.Equal(t, codes.Internal, failureCode(fmt.Errorf("pid 5: stat: %w", unix.EACCES)))
}
