// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
// A kernel before 5.14 (RHEL 7 and 8) has no such sysctl: there delay
// accounting is on unless the kernel was booted with nodelayacct.
func delayacctEnabled(procRoot string) bool {
	b, err := os.ReadFile(filepath.Join(procRoot, "sys/kernel/task_delayacct"))
	if errors.Is(err, fs.ErrNotExist) {
		return !bootedWith(procRoot, "nodelayacct")
	}
	return err == nil && bytes.Equal(bytes.TrimSpace(b), []byte("1"))
}

// maxCmdlineBytes bounds /proc/cmdline: the kernel's COMMAND_LINE_SIZE is
// at most a few KiB on every architecture.
const maxCmdlineBytes = 64 << 10

// bootedWith tells a word of the kernel's command line; true, to claim
// nothing, when the command line cannot be read whole.
func bootedWith(procRoot, word string) bool {
	f, err := os.Open(filepath.Join(procRoot, "cmdline")) // #nosec G304 -- under the configured proc root
	if err != nil {
		return true
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxCmdlineBytes+1))
	if err != nil || len(b) > maxCmdlineBytes {
		return true
	}
	return slices.Contains(strings.Fields(string(b)), word)
}

// taskRecord keeps the messages of one record in one allocation.
type taskRecord struct {
	record gpotelv1.TaskStatsRecord
	delays gpotelv1.TaskDelays
	delay  [8]gpotelv1.Delay
}

// recordFromStats copies a decoded struct taskstats into its wire form.
func recordFromStats(s *taskstats.Stats) *gpotelv1.TaskStatsRecord {
	t := new(taskRecord)
	d := func(i int, x taskstats.Delay) *gpotelv1.Delay {
		t.delay[i].Count, t.delay[i].TotalNs = x.Count, x.TotalNs
		return &t.delay[i]
	}
	t.delays.Cpu, t.delays.Blkio, t.delays.Swapin, t.delays.Freepages = d(0, s.CPUDelay), d(1, s.BlkioDelay), d(2, s.SwapinDelay), d(3, s.FreepagesDelay)
	if s.HasThrashing {
		t.delays.Thrashing = d(4, s.ThrashingDelay)
	}
	if s.HasCompact {
		t.delays.Compact = d(5, s.CompactDelay)
	}
	if s.HasWpcopy {
		t.delays.Wpcopy = d(6, s.WpcopyDelay)
	}
	if s.HasIRQ {
		t.delays.Irq = d(7, s.IRQDelay)
	}
	r := &t.record
	r.Version, r.Pid, r.Tgid, r.Ppid, r.Uid = uint32(s.Version), int64(s.PID), int64(s.TGID), int64(s.PPID), int64(s.UID)
	r.Comm, r.ExitCode, r.Flags, r.BeginTimeUnix, r.ElapsedUs = s.Comm, s.ExitCode, uint32(s.Flag), s.BeginTime, s.ElapsedUs
	r.UserUs, r.SystemUs, r.CpuRunRealNs, r.CpuRunVirtualNs = s.UserUs, s.SystemUs, s.CPURunRealNs, s.CPURunVirtualNs
	r.MinorFaults, r.MajorFaults, r.HiwaterRssKb, r.HiwaterVmKb = s.MinorFaults, s.MajorFaults, s.HiwaterRSSKiB, s.HiwaterVMKiB
	r.ReadChars, r.WriteChars, r.ReadSyscalls, r.WriteSyscalls = s.ReadChars, s.WriteChars, s.ReadSyscalls, s.WriteSyscalls
	r.ReadBytes, r.WriteBytes, r.CancelledWriteBytes = s.ReadBytes, s.WriteBytes, s.CancelledWrite
	r.VoluntaryCtxtSwitches, r.NonvoluntaryCtxtSwitches = s.VoluntaryCtxSw, s.InvoluntaryCtxSw
	r.Delays = &t.delays
	return r
}

// taskstatsClient returns an idle Client or a new one, or nil when taskstats
// is not available.
func (s *Service) taskstatsClient() *taskstats.Client {
	if !s.kernel.probe.available() {
		return nil
	}
	select {
	case c := <-s.clients:
		return c
	default:
	}
	c, err := taskstats.Dial()
	if err != nil {
		s.logger.Debug("taskstats client", zap.Error(err))
		return nil
	}
	return c
}

// releaseTaskstatsClient keeps c for a later request, or closes it when as
// many are idle as workers can use.
func (s *Service) releaseTaskstatsClient(c *taskstats.Client) {
	select {
	case s.clients <- c:
	default:
		_ = c.Close()
	}
}

// beginTimeSlack is how far taskstats' start second may be from stat's start
// for both to describe one process: btime64 is truncated to the second.
const beginTimeSlack = 2

// addTaskstats attaches the kernel's record st to the process procfs read
// and reports whether it did. The record is kept only when it describes that
// process: same real uid, same start second (a reused pid is not).
func (s *Service) addTaskstats(st *taskstats.Stats, info *yagpcc.GpPidProcInfo) bool {
	if s.host.GetClkTck() <= 0 {
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
