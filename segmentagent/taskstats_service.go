// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.uber.org/zap"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/segmentagent/taskstats"
)

// Self-metrics of the taskstats service.
const (
	MetricTaskstatsAvailable = "gpotel.agent.taskstats.available"
	MetricExitRecords        = "gpotel.agent.exit_records"
	MetricTaskstatsSkipped   = "gpotel.agent.taskstats.skipped"

	// AttrAvailability is on gpotel.agent.taskstats.available.
	AttrAvailability = "availability"
	// AttrReason names why a taskstats message was skipped.
	AttrReason = "reason"
)

// maxExitRecordsPerCall bounds one answer (about 300 bytes a record).
const maxExitRecordsPerCall = 10000

// TaskStatsService keeps the final taskstats record of every exiting
// database process (the agent's guard: an allowed uid whose parent is a
// postmaster) and serves them with a
// cursor (gpotel.v1.TaskStats). Start it to listen; it answers (with the
// reason) even when taskstats is unavailable.
type TaskStatsService struct {
	gpotelv1.UnimplementedTaskStatsServer

	cfg      TaskstatsConfig
	procRoot string
	probe    taskstatsProbe
	allow    func(pid, uid, ppid int64) bool
	buf      *exitBuffer
	logger   *zap.Logger
	now      func() time.Time

	exitRecords metric.Int64Counter
	skipped     metric.Int64Counter

	mu        sync.Mutex
	listening bool
	skips     uint64
	cancel    context.CancelFunc
	done      chan struct{}
}

var _ gpotelv1.TaskStatsServer = (*TaskStatsService)(nil)

// NewTaskStatsService probes the kernel once and logs what it can give.
func NewTaskStatsService(cfg ServiceConfig, allow func(pid, uid, ppid int64) bool, logger *zap.Logger, mp metric.MeterProvider) (*TaskStatsService, error) {
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = zap.NewNop()
	}
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	s := &TaskStatsService{
		cfg: cfg.Taskstats, procRoot: cfg.ProcRoot, probe: probeTaskstats(cfg), allow: allow, logger: logger, now: time.Now,
		buf: newExitBuffer(cfg.Taskstats.ExitBufferSize, cfg.Taskstats.ExitMaxAge, uint64(time.Now().UnixNano())), // #nosec G115 -- after 1970
	}
	logTaskstatsOnce(logger, s.probe, cfg.ProcRoot)
	m := mp.Meter(meterName)
	var errs [3]error
	s.exitRecords, errs[0] = m.Int64Counter(MetricExitRecords, metric.WithUnit("{record}"),
		metric.WithDescription("Exit records, by outcome: kept, not_allowed (not a database process), dropped (buffer full), expired (older than exit_max_age)."))
	s.skipped, errs[1] = m.Int64Counter(MetricTaskstatsSkipped, metric.WithUnit("{message}"),
		metric.WithDescription("taskstats messages skipped, by reason: truncated, oversized, unknown_version, malformed, no_stats, overrun (the kernel "+
			"dropped records)."))
	avail := attribute.NewSet(attribute.String(AttrAvailability, availabilityName(s.probe.availability)))
	_, errs[2] = m.Int64ObservableGauge(MetricTaskstatsAvailable, metric.WithUnit("1"),
		metric.WithDescription("1 when the agent reads taskstats and keeps exit records; 0 with the availability saying why not."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			v := int64(0)
			if s.Listening() {
				v = 1
			}
			o.Observe(v, metric.WithAttributeSet(avail))
			return nil
		}))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	return s, nil
}

func availabilityName(a gpotelv1.TaskStatsAvailability) string {
	switch a {
	case gpotelv1.TaskStatsAvailability_TASK_STATS_AVAILABILITY_AVAILABLE:
		return "available"
	case gpotelv1.TaskStatsAvailability_TASK_STATS_AVAILABILITY_NO_PERMISSION:
		return "no_permission"
	case gpotelv1.TaskStatsAvailability_TASK_STATS_AVAILABILITY_UNSUPPORTED:
		return "unsupported"
	case gpotelv1.TaskStatsAvailability_TASK_STATS_AVAILABILITY_DISABLED:
		return "disabled"
	}
	return "unknown"
}

// Start registers the exit listener when taskstats is available; without it
// Start does nothing and answers keep saying why.
func (s *TaskStatsService) Start() error {
	if !s.probe.available() {
		return nil
	}
	l, err := taskstats.Listen(s.cfg.ListenerReadBufferKiB << 10)
	if err != nil {
		s.probe = taskstatsProbe{gpotelv1.TaskStatsAvailability_TASK_STATS_AVAILABILITY_UNSUPPORTED, err.Error()}
		s.logger.Warn("taskstats exit listener could not register: exited processes are not counted", zap.Error(err))
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.listening, s.cancel, s.done = true, cancel, make(chan struct{})
	s.mu.Unlock()
	go func() {
		defer close(s.done)
		defer func() { _ = l.Close() }()
		if err := l.Run(ctx, s.record, s.skip); err != nil {
			s.logger.Error("taskstats exit listener stopped: exited processes are no longer counted", zap.Error(err))
		}
		s.mu.Lock()
		s.listening = false
		s.mu.Unlock()
	}()
	return nil
}

// Stop ends the listener; records kept so far stay readable.
func (s *TaskStatsService) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// Listening reports whether exit records are being kept.
func (s *TaskStatsService) Listening() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listening
}

var (
	exitKept       = metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrOutcome, "kept")))
	exitNotAllowed = metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrOutcome, "not_allowed")))
)

// record keeps the process-level record of one exit notification.
func (s *TaskStatsService) record(m taskstats.Message) {
	task := m.Task
	if task == nil || (m.Group == nil && !task.LastOfGroup()) {
		return // a thread of a live process ended
	}
	ctx := context.Background()
	if s.allow == nil || !s.allow(int64(task.PID), int64(task.UID), int64(task.PPID)) {
		s.exitRecords.Add(ctx, 1, exitNotAllowed)
		return
	}
	r := recordFromStats(task)
	if g := m.Group; g != nil {
		// The kernel sums only CPU, run totals, delays and context switches
		// over a thread group; identity and I/O come from the last thread.
		gr := recordFromStats(g)
		r.UserUs, r.SystemUs, r.CpuRunRealNs, r.CpuRunVirtualNs = gr.UserUs, gr.SystemUs, gr.CpuRunRealNs, gr.CpuRunVirtualNs
		r.VoluntaryCtxtSwitches, r.NonvoluntaryCtxtSwitches, r.Delays = gr.VoluntaryCtxtSwitches, gr.NonvoluntaryCtxtSwitches, gr.Delays
		r.Pid = gr.Pid
	}
	now := s.now()
	full, expired := s.buf.add(&gpotelv1.ExitRecord{
		Stats:             r,
		StartTimeUnixNano: now.UnixNano() - int64(task.ElapsedUs)*1000, // #nosec G115 -- µs since start fit
		ExitTimeUnixNano:  now.UnixNano(),
	})
	s.exitRecords.Add(ctx, 1, exitKept)
	s.countLosses(ctx, full, expired)
}

var (
	exitDropped = metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrOutcome, "dropped")))
	exitExpired = metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrOutcome, "expired")))
)

func (s *TaskStatsService) countLosses(ctx context.Context, full, expired int) {
	if full > 0 {
		s.exitRecords.Add(ctx, int64(full), exitDropped)
	}
	if expired > 0 {
		s.exitRecords.Add(ctx, int64(expired), exitExpired)
	}
}

func (s *TaskStatsService) skip(err error) {
	reason := "malformed"
	for _, r := range []struct {
		err  error
		name string
	}{
		{taskstats.ErrTruncated, "truncated"}, {taskstats.ErrOversized, "oversized"},
		{taskstats.ErrUnknownVersion, "unknown_version"}, {taskstats.ErrNoStats, "no_stats"}, {taskstats.ErrOverrun, "overrun"},
	} {
		if errors.Is(err, r.err) {
			reason = r.name
			break
		}
	}
	if errors.Is(err, taskstats.ErrOverrun) {
		s.buf.overrun() // said to the collector: records it will never get
	}
	s.mu.Lock()
	s.skips++
	first := s.skips == 1
	s.mu.Unlock()
	if first {
		s.logger.Warn("taskstats message skipped (counted in gpotel.agent.taskstats.skipped)", zap.String("reason", reason), zap.Error(err))
	}
	s.skipped.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrReason, reason))))
}

// Accounting says what the host's kernel accounting gives right now.
func (s *TaskStatsService) Accounting() *gpotelv1.KernelAccounting {
	dropped, expired := s.buf.losses()
	s.mu.Lock()
	skips := s.skips
	s.mu.Unlock()
	return &gpotelv1.KernelAccounting{
		Taskstats: s.probe.availability, TaskstatsReason: s.probe.reason,
		DelayacctEnabled: delayacctEnabled(s.procRoot), ExitRecords: s.Listening(),
		ExitRecordsDropped: dropped + expired, ExitMessagesSkipped: skips,
	}
}

// GetExitRecords answers the records after the request's cursor.
func (s *TaskStatsService) GetExitRecords(ctx context.Context, req *gpotelv1.GetExitRecordsRequest) (*gpotelv1.GetExitRecordsResponse, error) {
	limit := maxExitRecordsPerCall
	if m := int(req.GetMaxRecords()); m > 0 && m < limit {
		limit = m
	}
	p := s.buf.since(req.GetEpoch(), req.GetCursor(), limit, s.now())
	s.countLosses(ctx, 0, p.expired)
	return &gpotelv1.GetExitRecordsResponse{
		Epoch: s.buf.epoch, Records: p.records, NextCursor: p.nextCursor, Missed: p.missed, More: p.more,
		Accounting: s.Accounting(), KernelOverruns: p.overruns,
	}, nil
}
