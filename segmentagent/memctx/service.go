// Package memctx answers GetMemoryContexts: the memory contexts of any
// backend of an instance on this host, read from the server log after
// pg_log_backend_memory_contexts(pid), or from the server's rows-returning
// function where it has one. See segmentagent/README.md.
package memctx

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

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

	mu    sync.Mutex
	busy  map[int64]bool
	asked map[int64]time.Time // when each pid was last asked
}

var _ gpotelv1.MemoryContextsServer = (*Service)(nil)

// NewService checks cfg. allow is the agent's uid guard.
func NewService(cfg Config, procRoot, hostname string, allow func(uid int64) bool, logger *zap.Logger) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.DatabaseUser == "" {
		u, err := user.Current()
		if err != nil {
			return nil, fmt.Errorf("memory_contexts.database_user is empty and the agent's OS user is unknown: %w", err)
		}
		cfg.DatabaseUser = u.Username
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Service{cfg: cfg, procRoot: procRoot, hostname: hostname, allow: allow, logger: logger,
		inFlight: make(chan struct{}, cfg.MaxInFlight), busy: map[int64]bool{}, asked: map[int64]time.Time{}}, nil
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
	if err := s.admit(pid); err != nil {
		return nil, err
	}
	defer s.release(pid)

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case s.inFlight <- struct{}{}:
		defer func() { <-s.inFlight }()
	case <-ctx.Done():
		return nil, status.Errorf(codes.DeadlineExceeded, "pid %d: %d memory-context requests already in flight on %s (max_in_flight) for %s",
			pid, s.cfg.MaxInFlight, s.hostname, timeout)
	}
	resp, err := s.read(ctx, pid, req.GetSummary(), timeout)
	if err != nil {
		s.logger.Debug("memory contexts not read", zap.Int64("pid", pid), zap.Error(err))
		return nil, err
	}
	return resp, nil
}

// admit enforces one request per pid at a time and one per MinInterval.
func (s *Service) admit(pid int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.busy[pid] {
		return status.Errorf(codes.ResourceExhausted, "pid %d: another memory-context request for it is in flight", pid)
	}
	if last, ok := s.asked[pid]; ok && now.Sub(last) < s.cfg.MinInterval {
		return status.Errorf(codes.ResourceExhausted, "pid %d was asked %s ago; at most one request per pid every %s (min_interval)",
			pid, now.Sub(last).Round(time.Millisecond), s.cfg.MinInterval)
	}
	if len(s.asked) > 4096 {
		for p, t := range s.asked {
			if now.Sub(t) >= s.cfg.MinInterval {
				delete(s.asked, p)
			}
		}
	}
	s.busy[pid], s.asked[pid] = true, now
	return nil
}

func (s *Service) release(pid int64) {
	s.mu.Lock()
	delete(s.busy, pid)
	s.mu.Unlock()
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
func (s *Service) read(ctx context.Context, pid int64, summary bool, timeout time.Duration) (*gpotelv1.GetMemoryContextsResponse, error) {
	in, ps, err := s.instanceOf(pid)
	if err != nil {
		return nil, err
	}
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
			return nil, s.signalError(ctx, pid, settings, RowsFunction, err)
		}
		resp.Source, resp.LoggedAt = RowsFunction, timestamppb.Now()
		resp.Contexts = toProto(contexts)
		return resp, nil
	}
	if !settings.hasLogFunction {
		return nil, status.Errorf(codes.FailedPrecondition,
			"server %q has neither %s nor %s: it cannot show another backend's memory contexts (Greenplum 6 and 7 lack both; use gp_toolkit.session_level_memory_consumption there)",
			settings.version, logFunction, RowsFunction)
	}
	format, src, err := chooseLog(settings, in, s.procRoot)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "instance %s: %v", in.dataDir, err)
	}
	t, err := openTail(src, format)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "instance %s: %s log: %v", in.dataDir, format.Name(), err)
	}
	defer t.close()

	ok, err := signalBackend(ctx, conn, pid)
	if err != nil {
		return nil, s.signalError(ctx, pid, settings, logFunction, err)
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
	resp.Contexts = toProto(contexts)
	resp.GrandTotal = toProtoContext(Context{Name: "Grand total", Counters: block.grand, Aggregated: len(block.contexts)})
	return resp, nil
}

func (s *Service) signalError(ctx context.Context, pid int64, st serverSettings, fn string, err error) error {
	if isPermissionDenied(err) {
		return status.Errorf(codes.PermissionDenied,
			"role %q may not run %s; as a superuser run: GRANT EXECUTE ON FUNCTION pg_catalog.%s(integer) TO %s; (%v)",
			st.currentUser, fn, logFunction, quoteIdent(st.currentUser), err)
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
			return nil, status.Errorf(codes.Internal, "pid %d: its memory-context block in %s does not parse: %v", pid, t.name, bc.err)
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
			return nil, status.Errorf(codes.DeadlineExceeded,
				"pid %d did not log its memory contexts within %s (a backend busy in a system call or a long computation answers only at its next interrupt check)", pid, timeout)
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

func toProto(cs []Context) []*gpotelv1.MemoryContext {
	out := make([]*gpotelv1.MemoryContext, len(cs))
	for i := range cs {
		out[i] = toProtoContext(cs[i])
	}
	return out
}

func toProtoContext(c Context) *gpotelv1.MemoryContext {
	return &gpotelv1.MemoryContext{Name: c.Name, Ident: c.Ident, Type: c.Type, Level: int32(min(c.Level, 1<<30)), Path: c.Path,
		TotalBytes: c.TotalBytes, TotalNblocks: c.TotalBlocks, FreeBytes: c.FreeBytes, FreeChunks: c.FreeChunks,
		UsedBytes: c.UsedBytes, AggregatedContexts: int32(min(c.Aggregated, 1<<30))}
}
