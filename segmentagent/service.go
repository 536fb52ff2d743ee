// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package segmentagent is gpotel's segment-host agent: a stateless gRPC
// service (yagpcc.GetQueryInfo) that reads /proc for the database processes
// the coordinator names. The Service is usable in-process; the Agent serves
// it over gRPC with TLS, health, reflection and its own telemetry.
package segmentagent

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/segmentagent/cgroup"
	"github.com/gpotel/gpotel/segmentagent/procfs"
	"github.com/gpotel/gpotel/segmentagent/taskstats"
)

// pidMaxLimit is PID_MAX_LIMIT on 64-bit Linux: no pid is larger.
const pidMaxLimit = 1 << 22

// pidsPerWorker keeps small requests on one goroutine and hands out big ones
// in blocks, so workers share the load without contending on every pid.
const pidsPerWorker = 64

// Service answers GetPidProcStat from a procfs root. It keeps no state
// between calls and is safe for concurrent use.
type Service struct {
	yagpcc.UnimplementedGetQueryInfoServer

	cfg     ServiceConfig
	host    *yagpcc.ProcHost
	allowed map[int64]struct{}
	// postmasters are the parents whose children are database processes.
	postmasters *postmasters
	pidMax      *pidMax
	readers     sync.Pool
	logger      *zap.Logger
	tel         *telemetry
	kernel      *TaskStatsService
	// clients keeps idle taskstats clients for the next request's workers:
	// a sync.Pool would drop them at every collection, and each drop costs a
	// dial and leaves a socket for the finalizer.
	clients chan *taskstats.Client
	// cgroups is nil when cgroups.disabled; unavailable lists what it cannot do here.
	cgroups     *cgroup.Inspector
	unavailable []string
	// deltas is the last answer per client that asks for delta answers.
	deltas    *AnswerMemory
	printSeed maphash.Seed
	prints    sync.Pool // *printScratch
}

var _ yagpcc.GetQueryInfoServer = (*Service)(nil)

// NewService checks the procfs root, reads the host constants and resolves
// the allowed users. A nil logger logs nothing; a nil meterProvider records nothing.
func NewService(cfg ServiceConfig, logger *zap.Logger, meterProvider metric.MeterProvider) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = zap.NewNop()
	}
	host, err := procfs.ReadHost(procfs.HostConfig{Root: cfg.ProcRoot, Hostname: cfg.Hostname}, logger)
	if err != nil {
		return nil, fmt.Errorf("procfs root %s: %w", cfg.ProcRoot, err)
	}
	allowed, err := resolveAllowedUIDs(cfg, logger)
	if err != nil {
		return nil, err
	}
	tel, err := newTelemetry(meterProvider)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	s := &Service{cfg: cfg, host: host, allowed: allowed, logger: logger, tel: tel, pidMax: newPidMax(cfg.ProcRoot)}
	s.postmasters = newPostmasters(cfg.ProcRoot, cfg.PostmasterPidFiles, s.AllowUID)
	s.cgroups, s.unavailable = newCgroups(cfg, logger)
	if _, err := procfs.ReadOnlineCPUs(cfg.SysRoot); err != nil {
		logger.Warn("cannot read the host's online CPUs; answers leave them out, and gpotel-top cannot tell an impossible CPU figure on this host",
			zap.String("sys_root", cfg.SysRoot), zap.Error(err))
	}
	s.readers.New = func() any { return procfs.NewReader(cfg.ProcRoot) }
	s.deltas, s.printSeed = NewAnswerMemory(cfg.DeltaClients), maphash.MakeSeed()
	s.prints.New = func() any { return &printScratch{} }
	s.clients = make(chan *taskstats.Client, max(cfg.ReadParallelism, 1))
	if s.kernel, err = NewTaskStatsService(cfg, s.allowProcess, logger, meterProvider); err != nil {
		return nil, err
	}
	uids := make([]int64, 0, len(allowed))
	for uid := range allowed {
		uids = append(uids, uid)
	}
	postmasterRule := "found from each parent's data directory"
	if len(cfg.PostmasterPidFiles) > 0 {
		postmasterRule = "named by postmaster_pid_files"
	}
	logger.Info("segment agent service ready", zap.String("proc_root", cfg.ProcRoot), zap.Int64s("allowed_uids", uids),
		zap.String("postmasters", postmasterRule),
		zap.String("hostname", host.Hostname), zap.Int64("clk_tck", host.ClkTck), zap.Int64("page_size", host.PageSize))
	return s, nil
}

// Host returns the constants every answer carries.
func (s *Service) Host() *yagpcc.ProcHost { return s.copyHost() }

// TaskStats is the exit-record service on the same host; Start it to listen.
func (s *Service) TaskStats() *TaskStatsService { return s.kernel }

// copyHost is the host's constants, and the CPUs online now: read at each
// answer, since a CPU can be brought online or taken off at any time.
func (s *Service) copyHost() *yagpcc.ProcHost {
	h := &yagpcc.ProcHost{Hostname: s.host.Hostname, ClkTck: s.host.ClkTck, PageSize: s.host.PageSize,
		BootTimeUnix: s.host.BootTimeUnix, KernelRelease: s.host.KernelRelease, Accounting: s.kernel.Accounting(),
		Unavailable: s.unavailable}
	if n, err := procfs.ReadOnlineCPUs(s.cfg.SysRoot); err == nil {
		h.Cpus = &n
	}
	return h
}

// AllowUID is the uid guard: whether a process of this real uid may be looked at.
func (s *Service) AllowUID(uid int64) bool {
	_, ok := s.allowed[uid]
	return ok
}

// allowProcess admits a database process: of an allowed uid, a postmaster
// or a postmaster's child (the collector reads the postmasters too: their
// cutime and cstime are what their reaped children used).
func (s *Service) allowProcess(pid, uid, ppid int64) bool {
	return s.AllowUID(uid) && (s.postmasters.is(ppid) || s.postmasters.is(pid))
}

// readResult is what became of one requested process.
type readResult struct {
	info    *yagpcc.GpPidProcInfo
	outcome procfs.Outcome
	err     error
	// group of an answered process; groupErr says why it has none.
	group    cgroup.Group
	groupErr error
}

type counts struct {
	answered, vanished, denied, failed, invalid int64
	unreadByFile                                map[string]int64
}

// GetPidProcStat reads every distinct requested process. Processes that have
// exited or are not allowed are left out of the answer and counted in its
// summary; a process whose optional files failed is answered with them listed
// in unread. The call fails only when processes were asked for, none was
// answered, and at least one failed (vanished and denied ones are not
// failures: a session that ended is a normal answer).
func (s *Service) GetPidProcStat(ctx context.Context, req *yagpcc.GetPidProcInfoReq) (*yagpcc.GetPidProcInfoResponse, error) {
	start := time.Now()
	if n := len(req.GetDeltaClient()); n > MaxDeltaClientName {
		s.tel.record(ctx, requestInvalid, time.Since(start).Seconds(), nil)
		return nil, status.Errorf(codes.InvalidArgument, "delta_client of %d bytes, more than %d", n, MaxDeltaClientName)
	}
	work, invalid, err := s.distinctProcesses(req.GetSegmentProcess())
	if err != nil {
		s.tel.record(ctx, requestInvalid, time.Since(start).Seconds(), nil)
		return nil, err
	}
	if invalid > 0 {
		s.logger.Debug("pids that name no process on this host dropped", zap.Int64("invalid", invalid))
	}
	results := make([]readResult, len(work))
	if err := s.readAll(ctx, work, results); err != nil {
		s.tel.record(ctx, requestCancelled, time.Since(start).Seconds(), nil)
		return nil, status.FromContextError(err).Err()
	}

	resp := &yagpcc.GetPidProcInfoResponse{Host: s.copyHost(), PidProcData: make([]*yagpcc.GpPidProcInfo, 0, len(work))}
	s.addCgroups(resp, results)
	c := counts{invalid: invalid}
	var firstFailure error
	for i := range results {
		r := &results[i]
		switch r.outcome {
		case procfs.Answered:
			c.answered++
			r.info.GpSegmentId, r.info.SessId = work[i].GetGpSegmentId(), work[i].GetSessId()
			resp.PidProcData = append(resp.PidProcData, r.info)
			for _, u := range r.info.Unread {
				if c.unreadByFile == nil {
					c.unreadByFile = make(map[string]int64)
				}
				c.unreadByFile[unreadFile(u)]++
			}
		case procfs.Vanished:
			c.vanished++
		case procfs.Denied:
			c.denied++
			s.logger.Debug("process not allowed", zap.Int64("pid", work[i].GetPid()))
		case procfs.Failed:
			c.failed++
			if firstFailure == nil {
				firstFailure = fmt.Errorf("pid %d: %w", work[i].GetPid(), r.err)
			}
			if c.unreadByFile == nil {
				c.unreadByFile = make(map[string]int64)
			}
			c.unreadByFile[unreadFile(r.err.Error())]++
		}
	}
	// An invalid pid is not a database process of this host: the summary counts it denied.
	resp.Summary = &yagpcc.ProcReadSummary{Requested: int64(len(work)) + invalid, Answered: c.answered,
		Vanished: c.vanished, Denied: c.denied + invalid, Failed: c.failed}

	outcome := requestOK
	if c.failed > 0 {
		outcome = requestPartial
		s.logger.Warn("some processes could not be read", zap.Int64("failed", c.failed),
			zap.Int64("answered", c.answered), zap.NamedError("first", firstFailure))
	}
	if c.failed > 0 && c.answered == 0 {
		s.tel.record(ctx, requestFailed, time.Since(start).Seconds(), &c)
		return nil, status.Errorf(failureCode(firstFailure),
			"none of the %d requested processes could be read (%d failed, %d vanished, %d denied); first failure: %v",
			int64(len(work))+invalid, c.failed, c.vanished, c.denied+invalid, firstFailure)
	}
	if req.GetDeltaClient() != "" {
		s.leaveOutUnchanged(req, resp)
	}
	s.tel.record(ctx, outcome, time.Since(start).Seconds(), &c)
	return resp, nil
}

// distinctProcesses checks the request and drops repeated pids, keeping the
// first entry of each (a pid names one process on this host), and pids that
// name no process here at all (≤ 0, above pid_max): one bad row must not
// cost the whole host its answer. It returns how many pids it dropped so.
func (s *Service) distinctProcesses(procs []*yagpcc.SegmentProcess) (work []*yagpcc.SegmentProcess, invalid int64, err error) {
	if len(procs) > s.cfg.MaxPidsPerRequest {
		return nil, 0, status.Errorf(codes.InvalidArgument, "%d processes requested, more than max_pids_per_request %d",
			len(procs), s.cfg.MaxPidsPerRequest)
	}
	seen := make(map[int64]struct{}, len(procs))
	work = make([]*yagpcc.SegmentProcess, 0, len(procs))
	limit, reread := s.pidMax.get(), false
	for _, p := range procs {
		pid := p.GetPid()
		if _, dup := seen[pid]; dup {
			continue
		}
		seen[pid] = struct{}{}
		if pid > limit && !reread {
			limit, reread = s.pidMax.read(), true
		}
		if pid <= 0 || pid > limit {
			invalid++
			continue
		}
		work = append(work, p)
	}
	return work, invalid, nil
}

// pidMax is the kernel's largest pid (kernel/pid_max), read at start and
// again when a request names a larger pid: an operator may raise it.
type pidMax struct {
	path string
	max  atomic.Int64
}

func newPidMax(procRoot string) *pidMax {
	m := &pidMax{path: filepath.Join(procRoot, "sys", "kernel", "pid_max")}
	m.read()
	return m
}

func (m *pidMax) get() int64 { return m.max.Load() }

// read reads pid_max; without the file, PID_MAX_LIMIT bounds every pid.
func (m *pidMax) read() int64 {
	v := int64(pidMaxLimit)
	if b, err := readBounded(m.path, 64); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && n <= pidMaxLimit {
			v = n
		}
	}
	m.max.Store(v)
	return v
}

// readAll reads work into results with up to ReadParallelism goroutines, each
// with its own Reader. It stops at once when ctx ends and returns ctx's error.
func (s *Service) readAll(ctx context.Context, work []*yagpcc.SegmentProcess, results []readResult) error {
	workers := min(s.cfg.ReadParallelism, (len(work)+pidsPerWorker-1)/pidsPerWorker)
	var next atomic.Int64
	readBlocks := func() error {
		r := s.readers.Get().(*procfs.Reader)
		defer s.readers.Put(r)
		b := processBlock{reader: r, kernel: s.taskstatsClient()}
		if b.kernel != nil {
			defer s.releaseTaskstatsClient(b.kernel)
		}
		for {
			from := int(next.Add(pidsPerWorker)) - pidsPerWorker
			if from >= len(work) {
				return nil
			}
			to := min(from+pidsPerWorker, len(work))
			if err := s.readBlock(ctx, &b, work[from:to], results[from:to]); err != nil {
				return err
			}
		}
	}
	if workers <= 1 {
		if err := readBlocks(); err != nil {
			return err
		}
		return ctx.Err()
	}
	var g errgroup.Group
	for range workers {
		g.Go(readBlocks)
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// processBlock is what one reading goroutine reuses from block to block.
type processBlock struct {
	reader   *procfs.Reader
	kernel   *taskstats.Client // nil without taskstats
	pids     []int             // asked of the kernel, in one batch
	at       []int             // pids[j] is the block's process at[j]
	attached []bool            // pids[j]'s record was kept
}

// readBlock reads one block of processes. With taskstats: every /proc file
// of each but schedstat, then the kernel's records of those answered in one batch;
// a process whose record is missing or does not match is read again from
// every /proc file, as every process is without taskstats.
func (s *Service) readBlock(ctx context.Context, b *processBlock, work []*yagpcc.SegmentProcess, results []readResult) error {
	done := ctx.Done()
	b.pids, b.at = b.pids[:0], b.at[:0]
	for i, p := range work {
		select {
		case <-done:
			return ctx.Err()
		default:
		}
		res := &results[i]
		if b.kernel == nil {
			s.readProcfs(b.reader, p.GetPid(), res)
			continue
		}
		res.info, res.outcome, res.err = b.reader.ReadCore(p.GetPid(), s.allowProcess)
		if res.outcome == procfs.Answered {
			b.pids, b.at = append(b.pids, int(p.GetPid())), append(b.at, i)
		}
	}
	if len(b.pids) > 0 {
		b.attached = slices.Grow(b.attached[:0], len(b.pids))[:len(b.pids)]
		b.kernel.Tasks(b.pids, func(j int, st *taskstats.Stats, err error) {
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				s.logger.Debug("no taskstats record, reading /proc instead", zap.Error(err))
			}
			b.attached[j] = err == nil && s.addTaskstats(st, results[b.at[j]].info)
		})
		for j, ok := range b.attached {
			if !ok {
				s.readProcfs(b.reader, work[b.at[j]].GetPid(), &results[b.at[j]])
			}
		}
	}
	if s.cgroups != nil && s.cgroups.ResolvesGroups() {
		for i := range results {
			if res := &results[i]; res.outcome == procfs.Answered {
				res.group, res.groupErr = s.cgroups.GroupOf(work[i].GetPid())
			}
		}
	}
	return nil
}

// readProcfs reads one process from every /proc file.
func (s *Service) readProcfs(r *procfs.Reader, pid int64, res *readResult) {
	res.info, res.outcome, res.err = r.Read(pid, s.allowProcess)
	if res.outcome == procfs.Answered {
		res.info.Source = gpotelv1.ProcSource_PROC_SOURCE_PROCFS
	}
}

// failureCode tells a caller whether retrying may help: running out of file
// descriptors or memory passes, a file of unknown shape does not.
func failureCode(err error) codes.Code {
	for _, transient := range []error{unix.EMFILE, unix.ENFILE, unix.ENOMEM, unix.EAGAIN} {
		if errors.Is(err, transient) {
			return codes.Unavailable
		}
	}
	return codes.Internal
}
