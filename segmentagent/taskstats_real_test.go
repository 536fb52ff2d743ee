package segmentagent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
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
)

// taskstatsService is a real-/proc service with taskstats on, or a skip
// when this machine cannot give taskstats (no root, no CAP_NET_ADMIN).
func taskstatsService(t *testing.T, users ...string) *Service {
	t.Helper()
	cfg := NewDefaultServiceConfig()
	cfg.AllowedUsers = users
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
	assert.Nil(t, info.GetProcIo(), "io comes from the record")
	assert.Nil(t, info.GetProcSchedstat(), "the run-queue wait comes from the record")
	assert.NotNil(t, info.GetProcStat(), "stat still gives the start time")
	assert.Contains(t, info.GetCmdline(), "sleep 3600")
	assert.Empty(t, info.GetUnread())

	fixture, _ := readOne(t, fixtureService(t), 1001)
	require.NotNil(t, fixture)
	assert.Equal(t, gpotelv1.ProcSource_PROC_SOURCE_PROCFS, fixture.GetSource(), "a fixture tree is never paired with the kernel's records")
	assert.Nil(t, fixture.GetTaskstats())
}

func TestRealExitRecordsAreKeptForAllowedUsersAndReadByCursor(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("starting a process as nobody needs root")
	}
	cfg := NewDefaultConfig()
	cfg.ListenAddress = "127.0.0.1:0"
	cfg.AllowedUsers = []string{"nobody"}
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
	burner := exec.Command("sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done")
	burner.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	require.NoError(t, burner.Run())
	root := exec.Command("true") // root's: never kept
	require.NoError(t, root.Run())
	after := time.Now()

	var got *gpotelv1.ExitRecord
	var resp *gpotelv1.GetExitRecordsResponse
	await.NoError(t, "the exit record of the nobody burner", func() error {
		resp, err = client.GetExitRecords(ctx, &gpotelv1.GetExitRecordsRequest{Epoch: first.GetEpoch(), Cursor: first.GetNextCursor()})
		if err != nil {
			return err
		}
		for _, r := range resp.GetRecords() {
			require.NotEqual(t, int64(root.Process.Pid), r.GetStats().GetPid(), "root's process passed the uid guard")
			require.Equal(t, int64(65534), r.GetStats().GetUid(), "only nobody's exits are kept")
			if r.GetStats().GetPid() == int64(burner.Process.Pid) {
				got = r
			}
		}
		if got == nil {
			return fmt.Errorf("no record of pid %d among %d", burner.Process.Pid, len(resp.GetRecords()))
		}
		return nil
	})
	s := got.GetStats()
	assert.Equal(t, int64(os.Getpid()), s.GetPpid(), "ppid: the reaping parent")
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
