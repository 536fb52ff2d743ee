// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package memctx answers GetMemoryContexts: the memory contexts of any
// backend of an instance on this host, read from the server log after
// pg_log_backend_memory_contexts(pid), or from the server's rows-returning
// function where it has one. See segmentagent/README.md.
package memctx

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/internal/gpsql"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// pidMaxLimit is PID_MAX_LIMIT on 64-bit Linux.
const pidMaxLimit = 1 << 22

// pollInterval is how often the log is looked at while a backend answers.
const pollInterval = 20 * time.Millisecond

// Service serves gpotel.v1.MemoryContexts. Safe for concurrent use.
type Service struct {
	gpotelv1.UnimplementedMemoryContextsServer

	cfg      Config
	procRoot string
	hostname string
	allow    func(uid int64) bool
	logger   *zap.Logger
	inFlight chan struct{}
	limit    *pidLimiter
	// hostRate is the host's bucket over the requests that signal a backend.
	hostRate *rate.Limiter
	now      func() time.Time
}

var _ gpotelv1.MemoryContextsServer = (*Service)(nil)

// NewService checks cfg. allow is the agent's uid guard.
func NewService(cfg Config, procRoot, hostname string, allow func(uid int64) bool, logger *zap.Logger) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Service{cfg: cfg, procRoot: procRoot, hostname: hostname, allow: allow, logger: logger,
		inFlight: make(chan struct{}, cfg.MaxInFlight), limit: newPIDLimiter(cfg.MinInterval),
		hostRate: rate.NewLimiter(rate.Limit(cfg.MaxRate), cfg.MaxBurst), now: time.Now}, nil
}

// GetMemoryContexts implements gpotelv1.MemoryContextsServer.
func (s *Service) GetMemoryContexts(ctx context.Context, req *gpotelv1.GetMemoryContextsRequest) (*gpotelv1.GetMemoryContextsResponse, error) {
	pid := req.GetPid()
	if pid <= 0 || pid > pidMaxLimit {
		return nil, status.Errorf(codes.InvalidArgument, "pid %d is not a process id", pid)
	}
	timeout := s.cfg.Timeout
	if d := req.GetTimeout(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 || d.AsDuration() > MaxTimeout {
			return nil, status.Errorf(codes.InvalidArgument, "timeout %v must be between 0 and %s", d.AsDuration(), MaxTimeout)
		}
		if d.AsDuration() > 0 {
			timeout = d.AsDuration()
		}
	}
	if len(s.cfg.DataDirectories) == 0 {
		return nil, status.Error(codes.FailedPrecondition, "memory contexts are off on this agent: memory_contexts.data_directories is empty")
	}
	in, ps, err := s.instanceOf(pid)
	if err != nil {
		return nil, err
	}
	// The host's bucket, then the pid's: a refusal by either signals nothing
	// and takes nothing from the other.
	now := s.now()
	reservation := s.hostRate.ReserveN(now, 1)
	if wait := reservation.DelayFrom(now); !reservation.OK() || wait > 0 {
		reservation.CancelAt(now)
		return nil, status.Errorf(codes.ResourceExhausted, "%s answers at most %d memory-context requests at once and then one every %s, from every "+
			"caller (memory_contexts.max_burst, max_rate): try again in %s",
			s.hostname, s.cfg.MaxBurst, time.Duration(float64(time.Second)/s.cfg.MaxRate).Round(time.Millisecond), wait.Round(time.Millisecond))
	}
	if err := s.limit.admit(pid, now); err != nil {
		reservation.CancelAt(now)
		return nil, err
	}
	defer s.limit.release(pid)

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case s.inFlight <- struct{}{}:
		defer func() { <-s.inFlight }()
	case <-ctx.Done():
		return nil, status.Errorf(codes.DeadlineExceeded, "pid %d: %d memory-context requests already in flight on %s (max_in_flight) for %s",
			pid, s.cfg.MaxInFlight, s.hostname, timeout)
	}
	resp, err := s.read(ctx, in, ps, pid, req.GetSummary(), timeout)
	if err != nil {
		s.logger.Debug("memory contexts not read", zap.Int64("pid", pid), zap.Error(err))
		return nil, err
	}
	return resp, nil
}

// instanceOf finds the served instance whose postmaster is pid's parent,
// after the uid guard.
func (s *Service) instanceOf(pid int64) (instance, processState, error) {
	ps, err := readProcess(s.procRoot, pid)
	if err != nil {
		return instance{}, ps, status.Errorf(codes.Internal, "pid %d: %v", pid, err)
	}
	if !ps.exists {
		return instance{}, ps, status.Errorf(codes.NotFound, "pid %d does not exist on %s", pid, s.hostname)
	}
	if !s.allow(ps.uid) {
		return instance{}, ps, status.Errorf(codes.PermissionDenied, "pid %d runs as uid %d, which this agent may not inspect (allowed_users)", pid, ps.uid)
	}
	var errs []error
	for _, dir := range s.cfg.DataDirectories {
		in, err := readInstance(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if in.postmasterPID == ps.ppid {
			return in, ps, nil
		}
	}
	msg := fmt.Sprintf("pid %d is not a backend of an instance this agent serves on %s (its parent is %d)", pid, s.hostname, ps.ppid)
	if len(errs) > 0 {
		msg += fmt.Sprintf("; instances not running or unreadable: %v", errors.Join(errs...))
	}
	return instance{}, ps, status.Error(codes.NotFound, msg)
}

// read does one request: connect, find the log, signal, read the block.
func (s *Service) read(
	ctx context.Context, in instance, ps processState, pid int64, summary bool, timeout time.Duration,
) (*gpotelv1.GetMemoryContextsResponse, error) {
	conn, err := connect(ctx, s.procRoot, in, s.cfg.DatabaseUser, s.cfg.Database)
	if err != nil {
		return nil, status.Error(contextCode(ctx, codes.Unavailable), err.Error())
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	settings, err := readSettings(ctx, conn)
	if err != nil {
		return nil, status.Error(contextCode(ctx, codes.Unavailable), err.Error())
	}
	resp := &gpotelv1.GetMemoryContextsResponse{Pid: pid, Hostname: s.hostname, DataDirectory: in.dataDir, ServerVersion: settings.version}

	if settings.hasRowsFunction {
		contexts, err := queryRowsFunction(ctx, conn, pid, summary, timeout.Seconds())
		if err != nil {
			return nil, s.signalError(ctx, pid, settings, gpsql.ContextsFunction, err)
		}
		resp.Source, resp.LoggedAt = gpsql.ContextsFunction, timestamppb.Now()
		if resp.Contexts, err = toProto(contexts); err != nil {
			return nil, status.Errorf(codes.ResourceExhausted, "pid %d: %v", pid, err)
		}
		return resp, nil
	}
	if !settings.hasLogFunction {
		return nil, status.Errorf(codes.FailedPrecondition,
			"server %q has neither %s nor %s: it cannot show another backend's memory contexts; on Greenplum 6 the server's own account of a session's "+
				"memory is session_state.session_level_memory_consumption (extension gp_internal_tools), which gpotel reads as gpotel.session.vmem.usage and "+
				"GetClusterTop's vmem_bytes",
			settings.version, gpsql.LogFunction, gpsql.ContextsFunction)
	}
	format, src, err := chooseLog(ctx, conn, settings, in, s.procRoot)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "instance %s: %v", in.dataDir, err)
	}
	mark, err := newMark()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "pid %d: %v", pid, err)
	}
	t, err := openTail(src, format, mark)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "instance %s: %s log: %v", in.dataDir, format.Name(), err)
	}
	defer t.close()

	// Whatever the server logs after the mark was logged after it, so a
	// block found after it was written after the signal below.
	if err := logMark(ctx, conn, pid, mark); err != nil {
		return nil, status.Errorf(contextCode(ctx, codes.FailedPrecondition), "instance %s: writing the agent's mark into the server log: %v", in.dataDir, err)
	}
	ok, err := signalBackend(ctx, conn, pid)
	if err != nil {
		return nil, s.signalError(ctx, pid, settings, gpsql.LogFunction, err)
	}
	if !ok {
		return nil, status.Errorf(codes.NotFound, "pid %d is not a PostgreSQL server process of %s (the server says)", pid, in.dataDir)
	}
	block, err := s.await(ctx, t, pid, ps, timeout)
	if err != nil {
		return nil, err
	}
	contexts := block.contexts
	if summary {
		contexts = Summarize(contexts)
	}
	resp.Source, resp.LoggedAt = format.Name(), timestamppb.Now()
	if resp.Contexts, err = toProto(contexts); err != nil {
		return nil, status.Errorf(codes.ResourceExhausted, "pid %d: %v", pid, err)
	}
	resp.GrandTotal = toProtoContext(Context{Name: "Grand total", Counters: block.grand, Aggregated: len(block.contexts)})
	return resp, nil
}

func (s *Service) signalError(ctx context.Context, pid int64, st serverSettings, fn string, err error) error {
	if isPermissionDenied(err) {
		return status.Errorf(codes.PermissionDenied,
			"role %q may not run %s; as a superuser run: GRANT EXECUTE ON FUNCTION pg_catalog.%s(integer) TO %s; (%v)",
			st.currentUser, fn, gpsql.LogFunction, quoteIdent(st.currentUser), err)
	}
	return status.Errorf(contextCode(ctx, codes.Internal), "pid %d: %s: %v", pid, fn, err)
}

// await reads the log until the pid's block is complete, the pid exits, or ctx ends.
func (s *Service) await(ctx context.Context, t *tail, pid int64, ps processState, timeout time.Duration) (*blockBuilder, error) {
	bc := &blockCollector{pid: pid}
	collect := bc.add
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		if err := t.poll(s.cfg.MaxLogBytes, collect); err != nil {
			if errors.Is(err, errReadLimit) {
				return nil, status.Errorf(codes.ResourceExhausted, "pid %d: read %d bytes of %s without its complete block (max_log_bytes)", pid, s.cfg.MaxLogBytes, t.name)
			}
			return nil, status.Errorf(codes.Internal, "pid %d: reading %s: %v", pid, t.name, err)
		}
		if bc.err != nil {
			code := codes.Internal
			if errors.Is(bc.err, errBeyondBounds) {
				code = codes.ResourceExhausted
			}
			return nil, status.Errorf(code, "pid %d: its memory-context block in %s: %v", pid, t.name, bc.err)
		}
		if bc.complete() {
			return bc.block, nil
		}
		now, err := readProcess(s.procRoot, pid)
		if err == nil && (!now.exists || now.startTime != ps.startTime) {
			// One last look: it may have logged everything just before exiting.
			_ = t.poll(s.cfg.MaxLogBytes, collect)
			if bc.complete() && bc.err == nil {
				return bc.block, nil
			}
			return nil, status.Errorf(codes.NotFound, "pid %d exited before it logged its memory contexts", pid)
		}
		select {
		case <-ctx.Done():
			if !t.synced {
				return nil, status.Errorf(codes.DeadlineExceeded, "pid %d: the agent's mark did not reach %s within %s (does the server log there?)", pid, t.name, timeout)
			}
			return nil, status.Errorf(codes.DeadlineExceeded,
				"pid %d did not log its memory contexts within %s (a backend busy in a system call or a long computation answers only at its next interrupt "+
					"check)", pid, timeout)
		case <-ticker.C:
		}
	}
}

// contextCode keeps DeadlineExceeded when the request's time ran out.
func contextCode(ctx context.Context, otherwise codes.Code) codes.Code {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return codes.DeadlineExceeded
	}
	if ctx.Err() != nil {
		return codes.Canceled
	}
	return otherwise
}

func quoteIdent(s string) string {
	out := []byte{'"'}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			out = append(out, '"')
		}
		out = append(out, s[i])
	}
	return string(append(out, '"'))
}

// MaxAnswerBytes bounds the rows of one answer: names, idents and the
// ancestors' names each row repeats as its path.
const MaxAnswerBytes = 8 << 20

// toProto turns the contexts into rows, each with its ancestors' names.
func toProto(cs []Context) ([]*gpotelv1.MemoryContext, error) {
	pathBytes := make([]int, len(cs))
	total := 0
	for i, c := range cs {
		if p := c.Parent; p >= 0 && p < i {
			pathBytes[i] = pathBytes[p] + len(cs[p].Name) + 16
		}
		total += 64 + len(c.Name) + len(c.Ident) + len(c.Type) + pathBytes[i]
		if total > MaxAnswerBytes {
			return nil, fmt.Errorf("%w: the %d contexts with their paths make more than %d bytes (MaxAnswerBytes)", errBeyondBounds, len(cs), MaxAnswerBytes)
		}
	}
	out := make([]*gpotelv1.MemoryContext, len(cs))
	for i := range cs {
		out[i] = toProtoContext(cs[i])
		if p := cs[i].Parent; p >= 0 && p < i {
			path := make([]string, 0, len(out[p].Path)+1)
			out[i].Path = append(append(path, out[p].Path...), cs[p].Name)
		}
	}
	return out, nil
}

func toProtoContext(c Context) *gpotelv1.MemoryContext {
	return &gpotelv1.MemoryContext{Name: c.Name, Ident: c.Ident, Type: c.Type, Level: int32(min(c.Level, 1<<30)),
		TotalBytes: c.TotalBytes, TotalNblocks: c.TotalBlocks, FreeBytes: c.FreeBytes, FreeChunks: c.FreeChunks,
		UsedBytes: c.UsedBytes, AggregatedContexts: int32(min(c.Aggregated, 1<<30))}
}
