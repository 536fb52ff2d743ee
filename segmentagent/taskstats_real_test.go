// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/gpotel/gpotel/internal/await"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/segmentagent/internal/proctest"
)

// taskstatsService is a real-/proc service with taskstats on, or a skip
// when this machine cannot give taskstats (no root, no CAP_NET_ADMIN).
func taskstatsService(t *testing.T, users ...string) *Service {
	t.Helper()
	cfg := NewDefaultServiceConfig()
	cfg.AllowedUsers = users
	cfg.PostmasterPidFiles = []string{proctest.SelfAsPostmaster(t)}
	s, err := NewService(cfg, nil, nil)
	require.NoError(t, err)
	if a := s.TaskStats().Accounting(); a.GetTaskstats() != gpotelv1.TaskStatsAvailability_TASK_STATS_AVAILABILITY_AVAILABLE {
		t.Skipf("taskstats unavailable here: %s %s", a.GetTaskstats(), a.GetTaskstatsReason())
	}
	return s
}

func TestRealAnswerSaysItsSource(t *testing.T) {
	s := taskstatsService(t, strconv.Itoa(os.Getuid()))
	pid := startChild(t, exec.Command("sleep", "3600"))
	info, _ := readOne(t, s, pid)
	require.NotNil(t, info)
	assert.Equal(t, gpotelv1.ProcSource_PROC_SOURCE_TASKSTATS, info.GetSource())
	require.NotNil(t, info.GetTaskstats())
	assert.Equal(t, pid, info.GetTaskstats().GetPid())
	assert.Equal(t, int64(os.Getpid()), info.GetTaskstats().GetPpid())
	assert.Equal(t, "sleep", info.GetTaskstats().GetComm())
	assert.NotNil(t, info.GetTaskstats().GetDelays().GetCpu())
	assert.NotNil(t, info.GetProcIo(), "io is read exact, never from the record (rounded to 1024)")
	assert.Nil(t, info.GetProcSchedstat(), "the run-queue wait comes from the record")
	assert.NotNil(t, info.GetProcStat(), "stat still gives the start time")
	assert.Empty(t, info.GetCmdline())
	assert.Empty(t, info.GetUnread())

	fixture, _ := readOne(t, fixtureService(t), 1001)
	require.NotNil(t, fixture)
	assert.Equal(t, gpotelv1.ProcSource_PROC_SOURCE_PROCFS, fixture.GetSource(), "a fixture tree is never paired with the kernel's records")
	assert.Nil(t, fixture.GetTaskstats())
}

// TestRealBatchPairsEachProcessWithItsOwnRecord: the kernel's records of a
// request's processes come in batches; each answer carries its own process's.
func TestRealBatchPairsEachProcessWithItsOwnRecord(t *testing.T) {
	s := taskstatsService(t, strconv.Itoa(os.Getuid()))
	pids := proctest.SpawnSleepers(t, 2*pidsPerWorker+7)
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	pids = slices.Insert(pids, pidsPerWorker+3, int64(gone.Process.Pid))
	resp, err := s.GetPidProcStat(context.Background(), request(pids...))
	require.NoError(t, err)
	assert.Equal(t, &yagpcc.ProcReadSummary{Requested: int64(len(pids)), Answered: int64(len(pids) - 1), Vanished: 1}, resp.GetSummary())
	for _, info := range resp.GetPidProcData() {
		assert.Equal(t, gpotelv1.ProcSource_PROC_SOURCE_TASKSTATS, info.GetSource(), "pid %d", info.GetPid())
		assert.Equal(t, info.GetPid(), info.GetTaskstats().GetPid(), "the record answering pid %d", info.GetPid())
		assert.Equal(t, info.GetProcStat().GetPid(), info.GetTaskstats().GetPid(), "stat and record of pid %d", info.GetPid())
	}
}

// TestRealExitRecordsAreKeptForDatabaseProcessesAndReadByCursor: a nobody
// shell stands for a postmaster (its pid file is nobody's, and nobody the
// only allowed user); the exit of its child is kept, the exit of a root
// process (another user, and no postmaster's child) is not.
func TestRealExitRecordsAreKeptForDatabaseProcessesAndReadByCursor(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("starting a process as nobody needs root")
	}
	postmaster := exec.Command("sh", "-c", "read go; (i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done); exec sleep 3600")
	postmaster.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	trigger, err := postmaster.StdinPipe()
	require.NoError(t, err)
	pm := startChild(t, postmaster)
	pidFile := filepath.Join(t.TempDir(), "postmaster.pid")
	require.NoError(t, os.WriteFile(pidFile, fmt.Appendf(nil, "%d\n", pm), 0o600))
	require.NoError(t, os.Chown(pidFile, 65534, 65534))

	cfg := NewDefaultConfig()
	cfg.ListenAddress = "127.0.0.1:0"
	cfg.AllowedUsers = []string{"nobody"}
	cfg.PostmasterPidFiles = []string{pidFile}
	agent, err := New(cfg, nil)
	require.NoError(t, err)
	if a := agent.Service().TaskStats().Accounting(); a.GetTaskstats() != gpotelv1.TaskStatsAvailability_TASK_STATS_AVAILABILITY_AVAILABLE {
		t.Skipf("taskstats unavailable here: %s %s", a.GetTaskstats(), a.GetTaskstatsReason())
	}
	require.NoError(t, agent.Start(context.Background()))
	t.Cleanup(func() { _ = agent.Shutdown(context.Background()) })
	client := gpotelv1.NewTaskStatsClient(dial(t, agent.Addr(), nil))
	ctx := context.Background()

	first, err := client.GetExitRecords(ctx, &gpotelv1.GetExitRecordsRequest{})
	require.NoError(t, err)
	require.True(t, first.GetAccounting().GetExitRecords(), "the listener runs")

	before := time.Now()
	_, err = trigger.Write([]byte("go\n")) // the postmaster's child burns and exits
	require.NoError(t, err)
	root := exec.Command("true") // root's, the test binary's child: never kept
	require.NoError(t, root.Run())

	var got *gpotelv1.ExitRecord
	var resp *gpotelv1.GetExitRecordsResponse
	await.NoError(t, "the exit record of the postmaster's child", func() error {
		resp, err = client.GetExitRecords(ctx, &gpotelv1.GetExitRecordsRequest{Epoch: first.GetEpoch(), Cursor: first.GetNextCursor()})
		if err != nil {
			return err
		}
		for _, r := range resp.GetRecords() {
			require.NotEqual(t, int64(root.Process.Pid), r.GetStats().GetPid(), "root's process passed the guard")
			require.Equal(t, int64(65534), r.GetStats().GetUid(), "only nobody's exits are kept")
			require.Equal(t, pm, r.GetStats().GetPpid(), "only the postmaster's children's exits are kept")
			got = r
		}
		if got == nil {
			return fmt.Errorf("no record of a child of %d among %d", pm, len(resp.GetRecords()))
		}
		return nil
	})
	after := time.Now()
	s := got.GetStats()
	assert.Positive(t, s.GetUserUs()+s.GetSystemUs())
	assert.Positive(t, s.GetCpuRunVirtualNs())
	assert.True(t, got.GetStartTimeUnixNano() >= before.Add(-time.Second).UnixNano() && got.GetStartTimeUnixNano() <= after.UnixNano(),
		"start %v outside [%v, %v]", time.Unix(0, got.GetStartTimeUnixNano()), before, after)

	again, err := client.GetExitRecords(ctx, &gpotelv1.GetExitRecordsRequest{Epoch: first.GetEpoch(), Cursor: first.GetNextCursor()})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(again.GetRecords()), len(resp.GetRecords()), "a retried call returns at least what it returned before")
	for i, r := range resp.GetRecords() {
		assert.Equal(t, r.GetSequence(), again.GetRecords()[i].GetSequence(), "retried call, record %d", i)
	}
	later, err := client.GetExitRecords(ctx, &gpotelv1.GetExitRecordsRequest{Epoch: again.GetEpoch(), Cursor: again.GetNextCursor()})
	require.NoError(t, err)
	for _, r := range later.GetRecords() {
		assert.NotEqual(t, got.GetSequence(), r.GetSequence(), "a record comes once past its cursor")
	}
}

// TestWithoutCapNetAdminTheAgentSaysSoOnceAndReadsProcfs runs this binary
// without CAP_NET_ADMIN (setpriv drops it from the bounding set).
func TestWithoutCapNetAdminTheAgentSaysSoOnceAndReadsProcfs(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil || os.Getuid() != 0 {
		t.Skip("needs root and setpriv (util-linux) to drop CAP_NET_ADMIN")
	}
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(setpriv, "--bounding-set", "-net_admin", "--inh-caps", "-net_admin", self)
	cmd.Env = append(os.Environ(), childModeEnv+"=no-net-admin")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "child: %s", stderr.String())
	var got noNetAdminReport
	require.NoError(t, json.Unmarshal(out, &got), "child said %q", out)
	assert.Equal(t, "no_permission", got.Availability)
	assert.Equal(t, int64(0), got.Available)
	assert.Equal(t, int64(1), got.Answered, "procfs still answers")
	assert.Equal(t, gpotelv1.ProcSource_PROC_SOURCE_PROCFS.String(), got.Source)
	assert.Equal(t, 1, strings.Count(stderr.String(), "taskstats unavailable"), "logged once: %s", stderr.String())
}

type noNetAdminReport struct {
	Availability string
	Available    int64
	Answered     int64
	Source       string
}

// noNetAdminChild builds a service, asks twice for its own process and
// reports the self-metric and the answers' source on stdout.
func noNetAdminChild() {
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(os.Stderr), zap.InfoLevel))
	reader := sdkmetric.NewManualReader()
	cfg := NewDefaultServiceConfig()
	cfg.AllowedUsers = []string{strconv.Itoa(os.Getuid())}
	// It asks about itself: its parent, the test binary, stands for the postmaster.
	pidFile, err := os.CreateTemp("", "gpotel-no-net-admin-*.pid")
	if err == nil {
		defer func() { _ = os.Remove(pidFile.Name()) }()
		_, err = fmt.Fprintf(pidFile, "%d\n", os.Getppid())
		_ = pidFile.Close()
		cfg.PostmasterPidFiles = []string{pidFile.Name()}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(6)
	}
	s, err := NewService(cfg, logger, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err == nil {
		err = s.TaskStats().Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(6)
	}
	var rep noNetAdminReport
	for range 2 {
		resp, err := s.GetPidProcStat(context.Background(), &yagpcc.GetPidProcInfoReq{SegmentProcess: []*yagpcc.SegmentProcess{{Pid: int64(os.Getpid())}}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(7)
		}
		rep.Answered = resp.GetSummary().GetAnswered()
		if len(resp.GetPidProcData()) > 0 {
			rep.Source = resp.GetPidProcData()[0].GetSource().String()
		}
	}
	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == MetricTaskstatsAvailable && len(g.DataPoints) == 1 {
				rep.Available = g.DataPoints[0].Value
				v, _ := g.DataPoints[0].Attributes.Value(AttrAvailability)
				rep.Availability = v.AsString()
			}
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(rep)
	os.Exit(0)
}
