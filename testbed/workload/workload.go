// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package workload drives named testbed sessions: a coordinator backend plus
// one backend per segment it touches, all sharing one sess_id, doing bounded
// amounts of real CPU, I/O and memory work (see testbed/README.md).
package workload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"golang.org/x/sync/errgroup"

	"github.com/gpotel/gpotel/testbed/cluster"
)

// Kind is what a session does.
type Kind string

// The session kinds.
const (
	// CPU runs arithmetic over generate_series on every backend of the session.
	CPU Kind = "cpu"
	// IO writes a temp table larger than temp_buffers (the backend itself
	// writes the evicted pages), flushes it to disk, drops it from the page
	// cache and reads it back, on every backend.
	IO Kind = "io"
	// ParallelCPU runs parallel sequential scans on every backend: each
	// statement starts parallel workers (backend_type 'parallel worker', with
	// leader_pid set) that belong to the session while it runs. On plain
	// PostgreSQL this is how one session spans several processes.
	ParallelCPU Kind = "parallel_cpu"
	// Memory holds MemoryBytes in local buffers and keeps sorting in work_mem.
	Memory Kind = "memory"
	// IdleInTransaction opens a transaction on every backend and sits idle in it.
	IdleInTransaction Kind = "idle_in_transaction"
	// Churn connects, runs one statement everywhere and disconnects, over and
	// over: every round is a new session with new pids.
	Churn Kind = "churn"
	// SegmentReplace keeps its coordinator backend but closes and reopens its
	// segment backends every Interval (new pids, same sess_id), doing CPU work.
	SegmentReplace Kind = "segment_replace"
	// HeldSort opens a transaction on every backend, sorts about MemoryBytes
	// in work_mem inside a cursor, fetches one row and keeps the cursor open,
	// idle, until the end: a large, long-lived memory context (Held).
	HeldSort Kind = "held_sort"
)

// Spec says what a session does and for how long.
type Spec struct {
	Name     string
	Kind     Kind
	Duration time.Duration // how long the work runs; 0 means 10s
	// Contents are the segments the session touches; nil means all of them.
	Contents []int
	// Interval is the churn round period or the segment replacement period
	// (defaults: 50ms for churn, Duration/3 for segment_replace).
	Interval time.Duration
	// IOBytes is how much each backend writes per I/O round (default 32 MiB).
	IOBytes int64
	// MemoryBytes is what each backend of a memory session holds (default 64 MiB).
	MemoryBytes int64
	// HotContent is the one segment that works in a skewed_cpu session.
	HotContent int
	// QueryDuration is how long each dispatched query of a skewed_cpu
	// session runs (default 10s), and, when set, makes a cpu session run
	// dispatched queries of that length instead of short statements.
	QueryDuration time.Duration
	// User to connect as; empty means the cluster's admin role.
	User string
	// SpillBytes is about how much each segment backend of a spill session
	// writes to temporary files (default 32 MiB).
	SpillBytes int64
	// Table is what a lock_holder session locks and a lock_waiter reads.
	Table string
	// Dispatched (io, memory): the coordinator backend runs one statement
	// for the whole Duration while the segment backends work, as
	// Greenplum's dispatcher waits in a query for its executors: the
	// session runs one long query, and cancelling it ends the work.
	Dispatched bool
}

func (s Spec) withDefaults() Spec {
	if s.Duration <= 0 {
		s.Duration = 10 * time.Second
	}
	if s.Interval <= 0 {
		switch s.Kind {
		case Churn:
			s.Interval = 50 * time.Millisecond
		default:
			s.Interval = s.Duration / 3
		}
	}
	if s.IOBytes <= 0 {
		s.IOBytes = 32 << 20
	}
	if s.MemoryBytes <= 0 {
		s.MemoryBytes = 64 << 20
	}
	if s.SpillBytes <= 0 {
		s.SpillBytes = 32 << 20
	}
	if s.QueryDuration <= 0 && s.Kind == SkewedCPU {
		s.QueryDuration = 10 * time.Second
	}
	if s.Name == "" {
		s.Name = string(s.Kind)
	}
	return s
}

func (s Spec) validate(c *cluster.Cluster) error {
	var errs []error
	switch s.Kind {
	case CPU, ParallelCPU, IO, Memory, IdleInTransaction, Churn, SegmentReplace, HeldSort, Spill:
	case LockHolder, LockWaiter:
		if !tableName.MatchString(s.Table) {
			errs = append(errs, fmt.Errorf("table %q: a lock workload needs a plain lower-case table name", s.Table))
		}
	case SkewedCPU:
		if _, ok := c.Instance(s.HotContent); !ok || s.HotContent < 0 {
			errs = append(errs, fmt.Errorf("hot content %d: no such segment in testbed %s", s.HotContent, c.ID))
		} else if s.Contents != nil && !slices.Contains(s.Contents, s.HotContent) {
			errs = append(errs, fmt.Errorf("hot content %d is not one of the session's contents %v", s.HotContent, s.Contents))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown workload kind %q", s.Kind))
	}
	for _, content := range s.Contents {
		if content < 0 {
			errs = append(errs, fmt.Errorf("content %d: list segments only, the coordinator is always part of a session", content))
		} else if _, ok := c.Instance(content); !ok {
			errs = append(errs, fmt.Errorf("content %d: no such segment in testbed %s", content, c.ID))
		}
	}
	if s.Kind == SegmentReplace && len(c.Segments) == 0 {
		errs = append(errs, errors.New("segment_replace needs a cluster with segments"))
	}
	return errors.Join(errs...)
}

// Session is a running workload session.
type Session struct {
	Name string
	Kind Kind

	cluster  *cluster.Cluster
	spec     Spec
	contents []int

	mu      sync.Mutex
	sessID  int
	pids    map[int][]int // live backends by content
	history map[int][]int // every backend pid the session ever had, by content
	sessIDs []int
	live    map[int]*backend // the newest backend of each content
	held    chan struct{}    // HeldSort, Spill, LockHolder: closed once every backend holds what it holds
	heldN   int
	// coordinatorEnded is the pid of the coordinator backend the server ended, its segment backends closed with it.
	coordinatorEnded int

	until  time.Time
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Start connects the session's backends and starts its work in the
// background; it returns once the first backends are connected. The work ends
// after spec.Duration, on Stop, or when ctx is done.
func Start(ctx context.Context, c *cluster.Cluster, spec Spec) (*Session, error) {
	spec = spec.withDefaults()
	if err := spec.validate(c); err != nil {
		return nil, err
	}
	s := &Session{Name: spec.Name, Kind: spec.Kind, cluster: c, spec: spec,
		pids: map[int][]int{}, history: map[int][]int{}, live: map[int]*backend{}, held: make(chan struct{}),
		done: make(chan struct{})}
	if spec.Contents != nil {
		s.contents = slices.Clone(spec.Contents)
	} else {
		for _, seg := range c.Segments {
			s.contents = append(s.contents, seg.Content)
		}
	}
	// Work checks the deadline between statements; the context (Stop, the
	// caller's ctx, a safety margin) cancels statements in flight.
	s.until = time.Now().Add(spec.Duration)
	runCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), s.until.Add(10*time.Second))
	s.cancel = cancel
	stopOnParent := context.AfterFunc(ctx, cancel)

	g, err := s.open(ctx)
	if err != nil {
		cancel()
		stopOnParent()
		return nil, fmt.Errorf("workload %s: %w", s.Name, err)
	}
	go func() {
		defer close(s.done)
		defer stopOnParent()
		defer cancel()
		watchCtx, stopWatching := context.WithCancel(runCtx)
		watching := make(chan struct{})
		go func() {
			defer close(watching)
			s.watchCoordinator(watchCtx, cancel)
		}()
		err := s.run(runCtx, g)
		stopWatching()
		<-watching
		s.closeGang(g)
		if pid := s.endedCoordinator(); pid != 0 {
			err = fmt.Errorf("coordinator backend %d: %w", pid, ErrCoordinatorEnded) // the work's errors follow from it
		} else if isCancellation(err) && (runCtx.Err() != nil || !time.Now().Before(s.until)) {
			err = nil // the deadline or Stop ended the work, as intended
		}
		if err != nil {
			err = fmt.Errorf("workload %s (%s): %w", s.Name, s.Kind, err)
		}
		s.err = err
	}()
	return s, nil
}

// SessID is the session's sess_id (for churn, the current round's).
func (s *Session) SessID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessID
}

// SessIDs lists every sess_id the session has had (one per round for churn).
func (s *Session) SessIDs() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sessIDs)
}

// CoordinatorPID is the pid of the session's live coordinator backend (0 between churn rounds).
func (s *Session) CoordinatorPID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.pids[cluster.CoordinatorContent]; len(p) > 0 {
		return p[0]
	}
	return 0
}

// Pids are the live backend pids by content id (-1 is the coordinator).
func (s *Session) Pids() map[int][]int { return s.copyOf(func() map[int][]int { return s.pids }) }

// History is every backend pid the session has had, by content id, live or not.
func (s *Session) History() map[int][]int { return s.copyOf(func() map[int][]int { return s.history }) }

// AllPids is the flat, sorted list of live backend pids.
func (s *Session) AllPids() []int {
	var out []int
	for _, p := range s.Pids() {
		out = append(out, p...)
	}
	sort.Ints(out)
	return out
}

func (s *Session) copyOf(which func() map[int][]int) map[int][]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int][]int{}
	for k, v := range which() {
		out[k] = slices.Clone(v)
	}
	return out
}

// Wait blocks until the work is over and its backends are closed.
func (s *Session) Wait() error {
	<-s.done
	return s.err
}

// Stop ends the work early and waits for the backends to close.
func (s *Session) Stop() error {
	s.cancel()
	return s.Wait()
}

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

// backend is one connection of the session.
type backend struct {
	content int
	pid     int
	dataDir string
	conn    *pgx.Conn
	sock    socket // conn's, for the watch of the coordinator (coordinator.go)
	// use serializes the work and OnBackend on conn.
	use sync.Mutex
	// closing: the session closes it (under Session.mu).
	closing bool
}

// Held is closed once every backend of a HeldSort session holds its sort,
// every segment backend of a Spill session its temporary files, every
// backend of a LockHolder session its lock.
func (s *Session) Held() <-chan struct{} { return s.held }

// OnBackend runs fn on the connection of the session's live backend of
// content (-1: the coordinator), while no work statement runs on it: for a
// HeldSort session, inside its open transaction, beside the held cursor.
func (s *Session) OnBackend(ctx context.Context, content int, fn func(ctx context.Context, conn *pgx.Conn) error) error {
	s.mu.Lock()
	b := s.live[content]
	s.mu.Unlock()
	if b == nil {
		return fmt.Errorf("workload %s has no live backend on content %d", s.Name, content)
	}
	b.use.Lock()
	defer b.use.Unlock()
	return fn(ctx, b.conn)
}

// gang is the session's backends: the coordinator first.
type gang []*backend

func (s *Session) connect(ctx context.Context, in cluster.Instance, sessID int) (*backend, error) {
	cfg, err := pgx.ParseConfig(in.DSN)
	if err != nil {
		return nil, err
	}
	if s.spec.User != "" {
		cfg.User = s.spec.User
	}
	if in.Content == cluster.CoordinatorContent {
		cfg.RuntimeParams["application_name"] = "gpotel-workload " + s.Name
	} else {
		// The tag is how a segment backend names the coordinator session it serves.
		cfg.RuntimeParams["application_name"] = fmt.Sprintf("%s%d gpotel-workload %s", cluster.SessionTagPrefix, sessID, s.Name)
	}
	// Cancel statements on the server when ctx ends, instead of dropping the socket.
	cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: 3 * time.Second}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect gpseg%d: %w", in.Content, err)
	}
	sock, ok := conn.PgConn().Conn().(socket)
	if !ok {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("connect gpseg%d: a %T connection has no socket to watch", in.Content, conn.PgConn().Conn())
	}
	return &backend{content: in.Content, conn: conn, sock: sock, pid: int(conn.PgConn().PID()), dataDir: in.DataDir}, nil
}

// open connects a coordinator backend and the segment backends that carry its sess_id.
func (s *Session) open(ctx context.Context) (gang, error) {
	coord, err := s.connect(ctx, s.cluster.Coordinator, 0)
	if err != nil {
		return nil, err
	}
	// On Greenplum the coordinator's sess_id is its session counter's
	// number (testbed/README.md); on PostgreSQL a session is its backend.
	g := gang{coord}
	sessID := coord.pid
	if s.cluster.Dialect.Greenplum() {
		if err := coord.conn.QueryRow(ctx, cluster.MySessIDSQL).Scan(&sessID); err != nil {
			s.closeGang(g)
			return nil, fmt.Errorf("sess_id of the coordinator backend: %w", err)
		}
		// Tagged, its server log lines name con<sess_id>, as every line of
		// a Greenplum session does (testbed/README.md); its application_name
		// shows without the tag.
		tagged := fmt.Sprintf("%s%d gpotel-workload %s", cluster.SessionTagPrefix, sessID, s.Name)
		if _, err := coord.conn.Exec(ctx, "SET application_name = '"+strings.ReplaceAll(tagged, "'", "''")+"'"); err != nil {
			s.closeGang(g)
			return nil, fmt.Errorf("tag the coordinator backend: %w", err)
		}
	}
	segs, err := s.connectSegments(ctx, sessID)
	if err != nil {
		s.closeGang(g)
		return nil, err
	}
	g = append(g, segs...)
	s.mu.Lock()
	s.sessID = sessID
	s.sessIDs = append(s.sessIDs, sessID)
	s.mu.Unlock()
	for _, b := range g {
		s.track(b)
	}
	return g, nil
}

func (s *Session) connectSegments(ctx context.Context, sessID int) ([]*backend, error) {
	out := make([]*backend, len(s.contents))
	eg, ectx := errgroup.WithContext(ctx)
	for i, content := range s.contents {
		in, _ := s.cluster.Instance(content)
		eg.Go(func() error {
			b, err := s.connect(ectx, in, sessID)
			out[i] = b
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		for _, b := range out {
			if b != nil {
				_ = b.conn.Close(context.Background())
			}
		}
		return nil, err
	}
	return out, nil
}

func (s *Session) track(b *backend) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pids[b.content] = append(s.pids[b.content], b.pid)
	s.history[b.content] = append(s.history[b.content], b.pid)
	s.live[b.content] = b
}

func (s *Session) untrack(b *backend) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pids[b.content] = slices.DeleteFunc(s.pids[b.content], func(p int) bool { return p == b.pid })
	if len(s.pids[b.content]) == 0 {
		delete(s.pids, b.content)
	}
	if s.live[b.content] == b {
		delete(s.live, b.content)
	}
}

// closeGang closes backends and waits until their processes have exited, so
// that "the session ended" means its pids are gone.
func (s *Session) closeGang(g gang) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.mu.Lock()
	for _, b := range g {
		if b != nil {
			b.closing = true
		}
	}
	s.mu.Unlock()
	for _, b := range g {
		if b != nil {
			_ = b.conn.Close(ctx)
		}
	}
	for _, b := range g {
		if b != nil {
			waitExit(ctx, b.pid)
			s.untrack(b)
		}
	}
}

func waitExit(ctx context.Context, pid int) {
	for {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// run dispatches on the kind; each returns when ctx is done or on error.
func (s *Session) run(ctx context.Context, g gang) error {
	switch s.Kind {
	case CPU:
		if s.spec.QueryDuration > 0 {
			return s.dispatch(ctx, g, func(*backend) bool { return true })
		}
		return eachBackend(ctx, g, func(ctx context.Context, b *backend) error { return burnCPU(ctx, b, s.until) })
	case ParallelCPU:
		return eachBackend(ctx, g, s.parallelCPU)
	case IO:
		return s.maybeDispatched(ctx, g, s.ioLoop)
	case Memory:
		return s.maybeDispatched(ctx, g, s.memoryLoop)
	case IdleInTransaction:
		return eachBackend(ctx, g, s.idleInTransaction)
	case Churn:
		return s.churn(ctx, g)
	case SegmentReplace:
		return s.segmentReplace(ctx, g)
	case HeldSort:
		return eachBackend(ctx, g, func(ctx context.Context, b *backend) error { return s.heldSort(ctx, b, len(g)) })
	case Spill:
		dispatched := s.dispatchSQL(g)
		return eachBackend(ctx, g, func(ctx context.Context, b *backend) error { return s.spill(ctx, b, len(g), dispatched) })
	case LockHolder:
		return eachBackend(ctx, g, func(ctx context.Context, b *backend) error { return s.lockHolder(ctx, b, len(g)) })
	case LockWaiter:
		return eachBackend(ctx, g, s.lockWaiter)
	case SkewedCPU:
		return s.dispatch(ctx, g, func(b *backend) bool { return b.content == s.spec.HotContent })
	}
	return fmt.Errorf("unknown kind %q", s.Kind)
}

func eachBackend(ctx context.Context, g gang, work func(context.Context, *backend) error) error {
	eg, ectx := errgroup.WithContext(ctx)
	for _, b := range g {
		eg.Go(func() error {
			if err := work(ectx, b); err != nil {
				return fmt.Errorf("gpseg%d pid %d: %w", b.content, b.pid, err)
			}
			return nil
		})
	}
	return eg.Wait()
}

// EndedByServer tells whether err is the server ending the work: a
// statement cancelled (57014) or the session terminated (57P01, or its
// coordinator connection closed: ErrCoordinatorEnded), as an
// administrator, gpotel-top's k and K or a workload rule in enforce do.
func EndedByServer(err error) bool {
	var pgErr *pgconn.PgError
	return errors.Is(err, ErrCoordinatorEnded) ||
		errors.As(err, &pgErr) && (pgErr.Code == "57014" || pgErr.Code == "57P01")
}

// isCancellation tells errors caused by ending the work from real failures.
func isCancellation(err error) bool {
	var pgErr *pgconn.PgError
	return err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		pgconn.Timeout(err) || errors.As(err, &pgErr) && pgErr.Code == "57014" // query_canceled
}
