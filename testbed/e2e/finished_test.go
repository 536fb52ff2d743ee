// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/groundtruth"
)

// finishedStatement is one statement of the finished-work session and what
// /proc says its processes used while it ran.
type finishedStatement struct {
	name     string
	sent     time.Time // just before it was sent: its query_start is after
	done     time.Time // just after it returned
	cpu      float64   // seconds, user + system, of every process it had
	procs    int       // how many processes it had
	written  float64   // bytes
	exitedIn int       // processes of it that exited before it ended
	// exitedCPU is what those used in their lives (part of cpu).
	exitedCPU float64
}

// finishedRun is what one dialect's finished-work session did and what
// gpotel's events said of it.
type finishedRun struct {
	sessID     int64
	statements []*finishedStatement
	sessionCPU float64                // every process the session had, at its end
	queries    []events.FinishedQuery // the session's query events
	sessions   []events.EndedSession  // its session events
}

var (
	finishedRunsMu sync.Mutex
	finishedRuns   = map[dialect.Dialect]*finishedRun{}
)

// finishedWork runs the finished-work session on a small cluster of the
// dialect once per test binary (the query and the session tests read the
// same run) and returns it.
func finishedWork(t *testing.T, opts cluster.Options) *finishedRun {
	t.Helper()
	finishedRunsMu.Lock()
	defer finishedRunsMu.Unlock()
	if r, ok := finishedRuns[opts.Dialect]; ok {
		return r
	}
	r := runFinishedWork(t, opts)
	finishedRuns[opts.Dialect] = r
	return r
}

// sessionBackend is one process of the test's session and its readings.
type sessionBackend struct {
	conn *pgx.Conn
	pid  int
}

// runFinishedWork opens a session (a coordinator backend and, on the
// Greenplum dialects, a backend per segment tagged with its sess_id), runs
// an I/O statement of several ticks, a short statement right after a
// snapshot (it starts and ends between two scrapes), and a statement some
// of whose processes exit before it ends (an extra segment backend on
// Greenplum, parallel workers on PostgreSQL), disconnects, and collects the
// events.
func runFinishedWork(t *testing.T, opts cluster.Options) *finishedRun {
	t.Helper()
	needBinaries(t)
	c := cluster.Start(t, opts)
	ctx := await.Context(t)
	const interval = 2 * time.Second
	s := launch(ctx, t, c, StackOptions{
		Binaries: bins, Config: configPath("testbed.yaml"), Dir: t.TempDir(), OTLPKeep: 10,
		CollectorArgs: []string{
			"--set=receivers::gpsession::collection_interval=" + interval.String(),
			"--set=receivers::gpsession::timeout=6s",
			"--set=receivers::gpsession::host_timeout=800ms",
		},
	})
	api := dialAPI(t, s.API)
	greenplum := opts.Dialect != dialect.PostgreSQL

	connect := func(dsn, app string) *sessionBackend {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		if app != "" {
			cfg.RuntimeParams["application_name"] = app
		}
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		return &sessionBackend{conn: conn, pid: int(conn.PgConn().PID())}
	}
	// The session starts after gpotel's first snapshot: one seen in the
	// first is partial (what it did before is unknown).
	waitFor(t, "the collector's first snapshot", func() (bool, string) {
		states, err := allSessions(ctx, api)
		return err == nil && len(states) > 0, fmt.Sprint(err)
	})
	coord := connect(c.CoordinatorDSN, "gpotel-finished")
	r := &finishedRun{sessID: int64(coord.pid)}
	if greenplum {
		if err := coord.conn.QueryRow(ctx, "SELECT sess_id FROM pg_catalog.pg_stat_activity WHERE pid = pg_backend_pid()").Scan(&r.sessID); err != nil {
			t.Fatal(err)
		}
	}
	tag := fmt.Sprintf("%s%d", cluster.SessionTagPrefix, r.sessID)
	backends := []*sessionBackend{coord}
	if greenplum {
		for _, seg := range c.Segments {
			backends = append(backends, connect(seg.DSN, tag))
		}
	}
	for _, b := range backends {
		for _, q := range []string{
			"SET temp_buffers = '800kB'",
			"SET temp_tablespaces = " + cluster.DiskTablespace,
			"CREATE TEMP TABLE gpotel_query_io (id integer, pad text)",
		} {
			if _, err := b.conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	if !greenplum {
		for _, q := range []string{
			"SET max_parallel_workers_per_gather = 2", "SET parallel_setup_cost = 0", "SET parallel_tuple_cost = 0",
			"SET min_parallel_table_scan_size = 0", "SET parallel_leader_participation = off",
			// Big enough that the statement outlasts a scrape interval: its
			// workers are seen alive (docs/pipeline.md, exited processes).
			"CREATE UNLOGGED TABLE gpotel_finished_parallel AS SELECT g::float8 AS x FROM generate_series(1, 2000000) g",
		} {
			if _, err := coord.conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		t.Cleanup(func() { _, _ = coord.conn.Exec(context.Background(), "DROP TABLE IF EXISTS gpotel_finished_parallel") })
	}
	pids := func() []int {
		var out []int
		for _, b := range backends {
			out = append(out, b.pid)
		}
		return out
	}
	waitFor(t, "the session in the API", func() (bool, string) {
		st, err := stateOf(ctx, api, int(r.sessID))
		return err == nil && st != nil, fmt.Sprint(err)
	})

	// exitedCPU is the CPU of the processes that exited during a statement,
	// by pid: their last reading before they went.
	var exitedMu sync.Mutex
	exitedCPU := map[int]float64{}
	run := func(st *finishedStatement, sql string, extra func(context.Context) error) {
		before, err := groundtruth.Sum(pids())
		if err != nil {
			t.Fatal(err)
		}
		st.sent = time.Now()
		g, gctx := errgroup.WithContext(ctx)
		for _, b := range backends {
			g.Go(func() error {
				_, err := b.conn.Exec(gctx, sql)
				return err
			})
		}
		if extra != nil {
			g.Go(func() error { return extra(gctx) })
		}
		if err := g.Wait(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		st.done = time.Now()
		after, err := groundtruth.Sum(pids())
		if err != nil {
			t.Fatal(err)
		}
		st.cpu = after.CPUSeconds() - before.CPUSeconds()
		st.procs = len(pids())
		st.written = float64(after.WriteBytes) - float64(before.WriteBytes)
		exitedMu.Lock()
		for _, cpu := range exitedCPU {
			st.exitedCPU += cpu
			st.exitedIn++
			st.procs++
		}
		st.cpu += st.exitedCPU
		clear(exitedCPU)
		exitedMu.Unlock()
		r.statements = append(r.statements, st)
	}

	// idleAfter waits for a snapshot that saw the session idle after st:
	// the statement's end is seen, not inferred from the next one's start
	// or from the session's end (docs/pipeline.md, query figures).
	idleAfter := func(st *finishedStatement) {
		waitFor(t, "a snapshot of the session idle after "+st.name, func() (bool, string) {
			ss, err := stateOf(ctx, api, int(r.sessID))
			if err != nil || ss == nil {
				return false, fmt.Sprint(err)
			}
			return ss.GetTime().AsTime().After(st.done) && ss.GetSessionInfo().GetState() == "idle", ss.GetSessionInfo().GetState()
		})
	}

	// An I/O statement of several ticks.
	io := &finishedStatement{name: "io"}
	run(io, ioQuery(4*time.Second), nil)
	idleAfter(io)

	// A short statement sent right after a snapshot, again while a scrape
	// fell between its sending and its return: it starts and ends between
	// two scrapes (the sink's snapshot times say when each was).
	for try := 1; ; try++ {
		last, err := stateOf(ctx, api, int(r.sessID))
		if err != nil || last == nil {
			t.Fatalf("the session is not served: %v", err)
		}
		waitFor(t, "a new snapshot", func() (bool, string) {
			st, err := stateOf(ctx, api, int(r.sessID))
			return err == nil && st != nil && st.GetTime().AsTime().After(last.GetTime().AsTime()), fmt.Sprint(err)
		})
		short := &finishedStatement{name: "between two scrapes"}
		run(short, cpuQuery(700*time.Millisecond), nil)
		idleAfter(short)
		var scrapes []sinkSnapshot
		waitFor(t, "the sink's snapshot after "+short.name, func() (bool, string) {
			scrapes = sinkSnapshots(snapshotsOf(s.Sink))
			return len(scrapes) > 0 && scrapes[len(scrapes)-1].at.After(short.done), fmt.Sprintf("%d snapshots", len(scrapes))
		})
		if scrapes[0].at.Before(short.sent) && snapshotsBetween(scrapes, short.sent, short.done) == 0 {
			break
		}
		const tries = 8
		if try == tries {
			t.Fatalf("in %d tries, a scrape fell inside the short statement each time", tries)
		}
		t.Logf("try %d: a scrape fell inside the short statement; again", try)
		r.statements = r.statements[:len(r.statements)-1]
	}

	// A statement some of whose processes exit before it ends.
	exiting := &finishedStatement{name: "with processes that exit before it ends"}
	if greenplum {
		run(exiting, cpuQuery(5*time.Second), func(ctx context.Context) error {
			// An extra executor of the session on the first segment: it works,
			// is seen by a scrape, and disconnects while the statement still
			// runs. (One that lives and dies between two scrapes is no
			// session's: its exit record counts in the cluster's unattributed
			// figures, docs/pipeline.md.)
			extra := connect(c.Segments[0].DSN, tag)
			if _, err := extra.conn.Exec(ctx, cpuQuery(1500*time.Millisecond)); err != nil {
				return err
			}
			if err := await.Poll(ctx, func() error {
				st, err := stateOf(ctx, api, int(r.sessID))
				if n := st.GetLastMetrics().GetSystemStat().GetProcesses(); err != nil || int(n) < len(backends)+1 {
					return fmt.Errorf("the extra executor not seen yet (%d processes, %v)", n, err)
				}
				return nil
			}); err != nil {
				return err
			}
			final, err := groundtruth.Read(extra.pid)
			if err != nil {
				return err
			}
			if err := extra.conn.Close(ctx); err != nil {
				return err
			}
			exitedMu.Lock()
			exitedCPU[extra.pid] = final.CPUSeconds()
			exitedMu.Unlock()
			return awaitExit(ctx, extra.pid)
		})
	} else {
		// The leader's parallel workers exit as the scan ends, before the
		// statement does; their last readings are their totals.
		stop := make(chan struct{})
		watched := make(chan error, 1)
		monitor := connect(c.CoordinatorDSN, "gpotel-finished-monitor")
		go func() { watched <- watchWorkers(ctx, monitor.conn, coord.pid, stop, &exitedMu, exitedCPU) }()
		run(exiting, "SELECT count(*) FROM gpotel_finished_parallel WHERE md5(md5(md5(x::text))) > 'f'", nil)
		close(stop)
		if err := <-watched; err != nil {
			t.Fatal(err)
		}
	}

	idleAfter(exiting)

	// The session ends: every process's last reading is its total.
	var total float64
	for _, b := range backends {
		final, err := groundtruth.Read(b.pid)
		if err != nil {
			t.Fatal(err)
		}
		total += final.CPUSeconds()
		if err := b.conn.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := awaitExit(ctx, b.pid); err != nil {
			t.Fatal(err)
		}
	}
	r.sessionCPU = total
	for _, st := range r.statements {
		r.sessionCPU += st.exitedCPU
	}

	waitFor(t, "the session's event", func() (bool, string) {
		r.queries, r.sessions = r.queries[:0], r.sessions[:0]
		for _, lr := range s.Sink.LogRecords() {
			switch lr.EventName() {
			case events.EventQueryEnd:
				q, err := pipelinetest.DecodeQueryEvent(lr.Attributes())
				if err == nil && q.Session.ID == r.sessID {
					r.queries = append(r.queries, q)
				}
			case events.EventSessionEnd:
				se, err := pipelinetest.DecodeSessionEvent(lr.Attributes())
				if err == nil && se.Session.ID == r.sessID {
					r.sessions = append(r.sessions, se)
				}
			}
		}
		return len(r.sessions) > 0, fmt.Sprintf("%d query events, no session event yet", len(r.queries))
	})
	return r
}

// watchWorkers reads the leader's parallel workers' /proc until stop,
// keeping each one's last reading; a worker is lost for at most one poll
// of its life's end.
func watchWorkers(ctx context.Context, monitor *pgx.Conn, leader int, stop <-chan struct{}, mu *sync.Mutex, last map[int]float64) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		rows, err := monitor.Query(ctx, "SELECT pid FROM pg_catalog.pg_stat_activity WHERE leader_pid = $1 AND pid <> $1", leader)
		if err != nil {
			return err
		}
		workers, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			return err
		}
		for _, pid := range workers {
			if p, err := groundtruth.Read(pid); err == nil {
				mu.Lock()
				last[pid] = p.CPUSeconds()
				mu.Unlock()
			}
		}
	}
}

// awaitExit waits until pid is gone.
func awaitExit(ctx context.Context, pid int) error {
	return await.Poll(ctx, func() error {
		if _, err := groundtruth.Read(pid); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("pid %d still runs", pid)
	})
}

// eventOf finds the query event of st: the one that started while it was
// sent and returned.
func (r *finishedRun) eventOf(st *finishedStatement) (*events.FinishedQuery, error) {
	var found []*events.FinishedQuery
	for i := range r.queries {
		q := &r.queries[i]
		if start := time.Unix(0, q.Start); !start.Before(st.sent) && !start.After(st.done) {
			found = append(found, q)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%s: %d query events started between %s and %s", st.name, len(found), st.sent.Format(time.StampMilli), st.done.Format(time.StampMilli))
	}
	return found[0], nil
}

// cpuTolerance is 5 % of a CPU figure from /proc, but at least two clock
// ticks for each process read: utime and stime count whole ticks, so each
// of the readings a figure is the difference of can be one tick short.
func cpuTolerance(truth float64, processes int) float64 {
	return max(0.05*truth, 2*float64(processes)/float64(groundtruth.ClockTicks()))
}

func eventCPU(c *pipeline.Counters) float64 {
	return float64(c[pipeline.CPUUser]+c[pipeline.CPUSystem]) / 1e9
}

// A finished query's event holds what /proc says its processes used: CPU
// (user + system) and bytes written within 5 %, on every testbed dialect,
// for a query of several ticks, one that started and ended between two
// scrapes, and one some of whose processes exited before it ended.
func TestQueryEventMatchesProc(t *testing.T) {
	for _, opts := range cluster.SmallClusters(2) {
		t.Run(string(opts.Dialect), func(t *testing.T) {
			r := finishedWork(t, opts)
			for _, st := range r.statements {
				q, err := r.eventOf(st)
				if err != nil {
					t.Error(err)
					continue
				}
				got := eventCPU(&q.Totals)
				t.Logf("%s: CPU %.3f s (truth %.3f s, %+.2f %%), written %d B (truth %.0f B), duration %.3f s, status %s, partial %v, %d processes exited before it ended",
					st.name, got, st.cpu, 100*(got-st.cpu)/st.cpu, q.Totals[pipeline.DiskWrite], st.written, float64(q.End-q.Start)/1e9, q.Status, q.Partial, st.exitedIn)
				if tol := cpuTolerance(st.cpu, st.procs); math.Abs(got-st.cpu) > tol {
					t.Errorf("%s: event CPU %.3f s, want %.3f s ± %.3f s (5 %%, at least two clock ticks a process: /proc's resolution)", st.name, got, st.cpu, tol)
				}
				if st.written > 1<<20 && !within(float64(q.Totals[pipeline.DiskWrite]), st.written, 0.05) {
					t.Errorf("%s: event written %d B, want %.0f B ± 5 %% (from /proc)", st.name, q.Totals[pipeline.DiskWrite], st.written)
				}
				if q.Status != events.QueryCompleted || q.Partial {
					t.Errorf("%s: status %s, partial %v; want completed, not partial", st.name, q.Status, q.Partial)
				}
			}
			if io := r.statements[0]; io.written < 1<<20 {
				t.Errorf("the I/O statement wrote %.0f B by /proc: not enough to check write bytes", io.written)
			}
			if ex := r.statements[2]; ex.exitedIn == 0 {
				t.Errorf("%s: no process exited before it ended", ex.name)
			}
			seen := map[int64]int{}
			for _, q := range r.queries {
				seen[q.Start]++
			}
			for start, n := range seen {
				if n > 1 {
					t.Errorf("the query that started at %s has %d events", time.Unix(0, start), n)
				}
			}
		})
	}
}

// A session that ran several queries and disconnected: its event's
// lifetime CPU is its processes' /proc totals, the exited ones included,
// within 5 %.
func TestSessionEventMatchesProc(t *testing.T) {
	for _, opts := range cluster.SmallClusters(2) {
		t.Run(string(opts.Dialect), func(t *testing.T) {
			r := finishedWork(t, opts)
			if len(r.sessions) != 1 {
				t.Fatalf("%d session events, want 1", len(r.sessions))
			}
			se := r.sessions[0]
			got := eventCPU(&se.Totals)
			t.Logf("session %d: CPU %.3f s (truth %.3f s, %+.2f %%), %d queries, %.1f s, partial %v",
				r.sessID, got, r.sessionCPU, 100*(got-r.sessionCPU)/r.sessionCPU, se.Queries, float64(se.End-se.Start)/1e9, se.Partial)
			if !within(got, r.sessionCPU, 0.05) {
				t.Errorf("session event CPU %.3f s, want %.3f s ± 5 %% (its processes' /proc totals)", got, r.sessionCPU)
			}
			if se.Queries < int64(len(r.statements)) || se.Partial {
				t.Errorf("session event %d queries, partial %v; want at least %d, not partial", se.Queries, se.Partial, len(r.statements))
			}
			if !slices.ContainsFunc(r.queries, func(q events.FinishedQuery) bool { return q.End <= se.End }) {
				t.Error("no query event ended before the session did")
			}
		})
	}
}
