package segmentagent

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/segmentagent/taskstats"
)

// Defaults of TaskstatsConfig.
const (
	DefaultExitBufferSize        = 65536
	DefaultExitMaxAge            = time.Hour
	DefaultListenerReadBufferKiB = 4096
)

// TaskstatsConfig configures the kernel's taskstats interface, used when the
// agent has CAP_NET_ADMIN and reads the host's own /proc.
type TaskstatsConfig struct {
	// Enabled adds taskstats records to answers and keeps exit records.
	Enabled bool `mapstructure:"enabled"`
	// ExitBufferSize bounds the exit records kept; the oldest go first.
	ExitBufferSize int `mapstructure:"exit_buffer_size"`
	// ExitMaxAge drops records older than this; set it to the collector's
	// longest window.
	ExitMaxAge time.Duration `mapstructure:"exit_max_age"`
	// ListenerReadBufferKiB sizes the exit listener's socket: a burst of
	// exits larger than it is lost (and counted).
	ListenerReadBufferKiB int `mapstructure:"listener_read_buffer_kib"`
}

func newDefaultTaskstatsConfig() TaskstatsConfig {
	return TaskstatsConfig{Enabled: true, ExitBufferSize: DefaultExitBufferSize, ExitMaxAge: DefaultExitMaxAge,
		ListenerReadBufferKiB: DefaultListenerReadBufferKiB}
}

// taskstatsProbe says whether this agent can use taskstats, and why not.
type taskstatsProbe struct {
	availability gpotelv1.TaskStatsAvailability
	reason       string
}

func (p taskstatsProbe) available() bool {
	return p.availability == gpotelv1.TaskStatsAvailability_TASK_STATS_AVAILABILITY_AVAILABLE
}

// probeTaskstats asks the kernel once for the agent's own record.
func probeTaskstats(cfg ServiceConfig) taskstatsProbe {
	switch {
	case !cfg.Taskstats.Enabled:
		return taskstatsProbe{gpotelv1.TaskStatsAvailability_TASK_STATS_AVAILABILITY_DISABLED, "taskstats.enabled is false"}
	case filepath.Clean(cfg.ProcRoot) != DefaultProcRoot:
		// The kernel answers for real pids; a fixture tree's pids are not those.
		return taskstatsProbe{gpotelv1.TaskStatsAvailability_TASK_STATS_AVAILABILITY_DISABLED, "proc_root is not /proc"}
	}
	c, err := taskstats.Dial()
	if err != nil {
		return taskstatsProbe{gpotelv1.TaskStatsAvailability_TASK_STATS_AVAILABILITY_UNSUPPORTED, err.Error()}
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Task(os.Getpid()); err != nil {
		if errors.Is(err, taskstats.ErrPermission) {
			return taskstatsProbe{gpotelv1.TaskStatsAvailability_TASK_STATS_AVAILABILITY_NO_PERMISSION, err.Error()}
		}
		return taskstatsProbe{gpotelv1.TaskStatsAvailability_TASK_STATS_AVAILABILITY_UNSUPPORTED, err.Error()}
	}
	return taskstatsProbe{availability: gpotelv1.TaskStatsAvailability_TASK_STATS_AVAILABILITY_AVAILABLE}
}

// logTaskstatsOnce tells the operator at start what the kernel accounting can give.
func logTaskstatsOnce(logger *zap.Logger, p taskstatsProbe, procRoot string) {
	if p.available() {
		logger.Info("taskstats available: per-process records and exit records from the kernel")
	} else if p.availability != gpotelv1.TaskStatsAvailability_TASK_STATS_AVAILABILITY_DISABLED {
		logger.Warn("taskstats unavailable: /proc figures only, exited processes are not counted; run the agent as root or grant CAP_NET_ADMIN",
			zap.String("availability", p.availability.String()), zap.String("reason", p.reason))
	}
	if !delayacctEnabled(procRoot) {
		logger.Info("kernel.task_delayacct is 0: block I/O, swap-in, reclaim, thrashing, compaction, write-protect-copy and IRQ delays are not measured; " +
			"turn on with `sysctl -w kernel.task_delayacct=1` (or boot with `delayacct`)")
	}
}

// delayacctEnabled reads kernel.task_delayacct; it can change at any time.
func delayacctEnabled(procRoot string) bool {
	b, err := os.ReadFile(filepath.Join(procRoot, "sys/kernel/task_delayacct"))
	return err == nil && bytes.Equal(bytes.TrimSpace(b), []byte("1"))
}

// recordFromStats copies a decoded struct taskstats into its wire form.
func recordFromStats(s *taskstats.Stats) *gpotelv1.TaskStatsRecord {
	d := func(x taskstats.Delay) *gpotelv1.Delay { return &gpotelv1.Delay{Count: x.Count, TotalNs: x.TotalNs} }
	delays := &gpotelv1.TaskDelays{Cpu: d(s.CPUDelay), Blkio: d(s.BlkioDelay), Swapin: d(s.SwapinDelay), Freepages: d(s.FreepagesDelay)}
	if s.HasThrashing {
		delays.Thrashing = d(s.ThrashingDelay)
	}
	if s.HasCompact {
		delays.Compact = d(s.CompactDelay)
	}
	if s.HasWpcopy {
		delays.Wpcopy = d(s.WpcopyDelay)
	}
	if s.HasIRQ {
		delays.Irq = d(s.IRQDelay)
	}
	return &gpotelv1.TaskStatsRecord{
		Version: uint32(s.Version), Pid: int64(s.PID), Tgid: int64(s.TGID), Ppid: int64(s.PPID), Uid: int64(s.UID),
		Comm: s.Comm, ExitCode: s.ExitCode, Flags: uint32(s.Flag), BeginTimeUnix: s.BeginTime, ElapsedUs: s.ElapsedUs,
		UserUs: s.UserUs, SystemUs: s.SystemUs, CpuRunRealNs: s.CPURunRealNs, CpuRunVirtualNs: s.CPURunVirtualNs,
		MinorFaults: s.MinorFaults, MajorFaults: s.MajorFaults, HiwaterRssKb: s.HiwaterRSSKiB, HiwaterVmKb: s.HiwaterVMKiB,
		ReadChars: s.ReadChars, WriteChars: s.WriteChars, ReadSyscalls: s.ReadSyscalls, WriteSyscalls: s.WriteSyscalls,
		ReadBytes: s.ReadBytes, WriteBytes: s.WriteBytes, CancelledWriteBytes: s.CancelledWrite,
		VoluntaryCtxtSwitches: s.VoluntaryCtxSw, NonvoluntaryCtxtSwitches: s.InvoluntaryCtxSw,
		Delays: delays,
	}
}

// taskstatsClient returns a pooled Client, or nil when taskstats is not available.
func (s *Service) taskstatsClient() *taskstats.Client {
	if !s.kernel.probe.available() {
		return nil
	}
	if c, ok := s.clients.Get().(*taskstats.Client); ok {
		return c
	}
	c, err := taskstats.Dial()
	if err != nil {
		s.logger.Debug("taskstats client", zap.Error(err))
		return nil
	}
	return c
}

// beginTimeSlack is how far taskstats' start second may be from stat's start
// for both to describe one process: btime64 is truncated to the second.
const beginTimeSlack = 2

// addTaskstats attaches the process's taskstats record and reports whether
// it did. The record is kept only when it describes the process procfs read:
// same real uid, same start second (a reused pid is not).
func (s *Service) addTaskstats(c *taskstats.Client, info *yagpcc.GpPidProcInfo) bool {
	if c == nil || s.host.GetClkTck() <= 0 {
		return false
	}
	st, err := c.Task(int(info.GetPid()))
	if err != nil {
		return false
	}
	start := s.host.GetBootTimeUnix() + info.GetProcStat().GetStarttime()/s.host.GetClkTck()
	if int64(st.UID) != info.GetProcStatus().GetUidReal() || abs(int64(st.BeginTime)-start) > beginTimeSlack { // #nosec G115 -- unix seconds
		return false
	}
	info.Taskstats = recordFromStats(st)
	info.Source = gpotelv1.ProcSource_PROC_SOURCE_TASKSTATS
	return true
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
