// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workload_test

import (
	"context"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/groundtruth"
	"github.com/gpotel/gpotel/testbed/workload"
)

// untilStopped is the Duration of a workload that the test stops itself once
// it has seen what it checks: the test waits on the condition, never on the clock.
const untilStopped = time.Hour

func start(t *testing.T, c *cluster.Cluster, spec workload.Spec) *workload.Session {
	t.Helper()
	s, err := workload.Start(context.Background(), c, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// sessionRows returns the pids the all-sessions query shows for sessID, by segment.
func sessionRows(t *testing.T, c *cluster.Cluster, sessID int) map[int][]int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	rows, err := conn.Query(ctx, `SELECT gp_execution_segment(), pid FROM gp_dist_random('pg_stat_activity') WHERE sess_id = $1
		UNION ALL SELECT -1, pid FROM pg_stat_activity WHERE sess_id = $1`, sessID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][]int{}
	for rows.Next() {
		var seg, pid int
		if err := rows.Scan(&seg, &pid); err != nil {
			t.Fatal(err)
		}
		out[seg] = append(out[seg], pid)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// segmentSessIDs is the sess_id the segments' pg_stat_activity shows for
// each of pids that it lists.
func segmentSessIDs(t *testing.T, conn *pgx.Conn, pids []int) map[int]int {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT pid, sess_id FROM gp_dist_random('pg_stat_activity') WHERE pid = ANY($1)`, pids)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int{}
	for rows.Next() {
		var pid, id int
		if err := rows.Scan(&pid, &id); err != nil {
			t.Fatal(err)
		}
		out[pid] = id
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func samePids(a, b map[int][]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		x, y := slices.Clone(v), slices.Clone(b[k])
		sort.Ints(x)
		sort.Ints(y)
		if !slices.Equal(x, y) {
			return false
		}
	}
	return true
}

func assertExited(t *testing.T, history map[int][]int) {
	t.Helper()
	for content, pids := range history {
		for _, pid := range pids {
			if _, err := os.Stat("/proc/" + itoa(pid)); err == nil {
				t.Errorf("backend %d on content %d still alive after the session ended", pid, content)
			}
		}
	}
}

// mustRun fails the test at once when the workload has ended: a wait for
// something the workload should show would otherwise last until the deadline.
func mustRun(t *testing.T, s *workload.Session) {
	t.Helper()
	select {
	case <-s.Done():
		t.Fatalf("workload %s ended early: %v", s.Name, s.Wait())
	default:
	}
}

// distinct says whether no sess_id appears twice.
func distinct(ids []int) bool {
	seen := map[int]bool{}
	for _, id := range ids {
		if seen[id] {
			return false
		}
		seen[id] = true
	}
	return true
}

func itoa(i int) string { return strconv.Itoa(i) }

// untilAll reads every pid until ok(first reading, latest reading) holds for
// all of them or the test's deadline comes; it returns the pids for which it
// never held, with their first and latest readings.
func untilAll(t *testing.T, pids []int, ok func(before, now groundtruth.Process) bool) map[int][2]groundtruth.Process {
	t.Helper()
	before := map[int]groundtruth.Process{}
	for _, pid := range pids {
		p, err := groundtruth.Read(pid)
		if err != nil {
			t.Fatal(err)
		}
		before[pid] = p
	}
	deadline := await.Deadline(t)
	for {
		pending := map[int][2]groundtruth.Process{}
		for _, pid := range pids {
			now, err := groundtruth.Read(pid)
			if err != nil {
				t.Fatalf("pid %d: %v", pid, err)
			}
			if !ok(before[pid], now) {
				pending[pid] = [2]groundtruth.Process{before[pid], now}
			}
		}
		if len(pending) == 0 || time.Now().After(deadline) {
			return pending
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestWorkloads(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Hosts: 2, SegmentsPerHost: 1, Dialect: dialect.GP7})

	t.Run("CPUSessionBurnsUserTimeOnEveryBackend", func(t *testing.T) {
		s := start(t, c, workload.Spec{Name: "cpu", Kind: workload.CPU, Duration: untilStopped})
		pids := s.Pids()
		if len(pids) != 1+len(c.Segments) {
			t.Fatalf("pids %v: want the coordinator and %d segments", pids, len(c.Segments))
		}
		if got := sessionRows(t, c, s.SessID()); !samePids(got, pids) {
			t.Errorf("all-sessions query shows %v for sess_id %d, session has %v", got, s.SessID(), pids)
		}
		for pid, r := range untilAll(t, s.AllPids(), func(before, now groundtruth.Process) bool {
			return now.UserSeconds >= before.UserSeconds+0.05
		}) {
			t.Errorf("pid %d: utime %.2fs did not grow from %.2fs", pid, r[1].UserSeconds, r[0].UserSeconds)
		}
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		assertExited(t, s.History())
	})

	t.Run("ParallelWorkersShareTheSessID", func(t *testing.T) {
		s := start(t, c, workload.Spec{Name: "parallel", Kind: workload.ParallelCPU, Duration: untilStopped})
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close(ctx) }()
		seen := map[int]bool{}
		await.Until(t, "parallel workers on the coordinator and every segment", func() bool {
			mustRun(t, s)
			rows, err := conn.Query(ctx, `SELECT gp_execution_segment() FROM gp_dist_random('pg_stat_activity') WHERE sess_id = $1 AND backend_type = 'parallel worker'
				UNION ALL SELECT -1 FROM pg_stat_activity WHERE sess_id = $1 AND backend_type = 'parallel worker'`, s.SessID())
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var seg int
				_ = rows.Scan(&seg)
				seen[seg] = true
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return len(seen) == 1+len(c.Segments)
		})
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("IOSessionBackendsWriteAndReadTheDisk", func(t *testing.T) {
		const perRound = 16 << 20
		s := start(t, c, workload.Spec{Name: "io", Kind: workload.IO, Duration: untilStopped, IOBytes: perRound})
		for pid, r := range untilAll(t, s.AllPids(), func(before, now groundtruth.Process) bool {
			return now.WriteBytes-before.WriteBytes >= perRound/2 && now.ReadBytes > before.ReadBytes
		}) {
			t.Errorf("pid %d wrote %d and read %d bytes, want at least %d written and some read from disk",
				pid, r[1].WriteBytes-r[0].WriteBytes, r[1].ReadBytes-r[0].ReadBytes, perRound/2)
		}
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("MemorySessionHoldsMemoryBytes", func(t *testing.T) {
		const hold = 48 << 20
		s := start(t, c, workload.Spec{Name: "mem", Kind: workload.Memory, Duration: untilStopped, MemoryBytes: hold})
		for pid, r := range untilAll(t, s.AllPids(), func(_, now groundtruth.Process) bool {
			return now.RSSBytes >= hold/2
		}) {
			t.Errorf("pid %d holds %d MiB RSS, want at least %d MiB", pid, r[1].RSSBytes>>20, hold>>21)
		}
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("IdleInTransactionShowsOnEveryBackend", func(t *testing.T) {
		s := start(t, c, workload.Spec{Name: "idle", Kind: workload.IdleInTransaction, Duration: untilStopped})
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close(ctx) }()
		await.Until(t, "every backend of the session idle in transaction", func() bool {
			mustRun(t, s)
			var states []string
			rows, err := conn.Query(ctx, `SELECT state FROM gp_dist_random('pg_stat_activity') WHERE sess_id = $1
				UNION ALL SELECT state FROM pg_stat_activity WHERE sess_id = $1`, s.SessID())
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var st string
				_ = rows.Scan(&st)
				if st == "idle in transaction" {
					states = append(states, st)
				}
			}
			return len(states) == 1+len(c.Segments)
		})
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		assertExited(t, s.History())
	})

	t.Run("ChurnMakesNewSessionsAndLeavesNoBackends", func(t *testing.T) {
		s := start(t, c, workload.Spec{Name: "churn", Kind: workload.Churn, Duration: untilStopped, Interval: 20 * time.Millisecond})
		await.Until(t, "three churn rounds", func() bool {
			mustRun(t, s)
			return len(s.SessIDs()) >= 3
		})
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		ids := s.SessIDs()
		if !distinct(ids) {
			t.Errorf("churn rounds reused a sess_id: %v", ids)
		}
		if h := s.History(); len(h[-1]) != len(ids) || len(h[0]) != len(ids) {
			t.Errorf("history %v for %d rounds", h, len(ids))
		}
		assertExited(t, s.History())
		if p := s.Pids(); len(p) != 0 {
			t.Errorf("live pids after the end: %v", p)
		}
	})

	t.Run("SegmentReplaceKeepsSessIDWithNewPids", func(t *testing.T) {
		s := start(t, c, workload.Spec{Name: "replace", Kind: workload.SegmentReplace, Duration: untilStopped, Interval: 400 * time.Millisecond})
		sessID, coord := s.SessID(), s.CoordinatorPID()
		first := s.Pids()
		// Replaced means every segment has a live backend that is not one of
		// the first ones and that the catalog shows in the session: between
		// closing the old backends and connecting the new ones a content has
		// none, which differs from first as well.
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close(ctx) }()
		await.Until(t, "a new backend of the session on every segment", func() bool {
			mustRun(t, s)
			live := s.Pids()
			var fresh []int
			for _, seg := range c.Segments {
				p := live[seg.Content]
				if len(p) == 0 || slices.ContainsFunc(p, func(pid int) bool { return slices.Contains(first[seg.Content], pid) }) {
					return false
				}
				fresh = append(fresh, p...)
			}
			shown := segmentSessIDs(t, conn, fresh)
			for _, pid := range fresh {
				if id, ok := shown[pid]; ok && id != sessID {
					t.Fatalf("replacement backend %d is in session %d, want %d", pid, id, sessID)
				}
			}
			return len(shown) == len(fresh)
		})
		if s.SessID() != sessID || s.CoordinatorPID() != coord {
			t.Errorf("sess_id %d coordinator %d changed to %d %d", sessID, coord, s.SessID(), s.CoordinatorPID())
		}
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		h := s.History()
		for _, seg := range c.Segments {
			if len(h[seg.Content]) < 2 {
				t.Errorf("content %d had pids %v, want a replacement", seg.Content, h[seg.Content])
			}
		}
		assertExited(t, h)
	})

	t.Run("StopEndsEarly", func(t *testing.T) {
		// An hour-long workload: that Stop returns at all, inside the test's
		// deadline, is what shows it ended the work early.
		s := start(t, c, workload.Spec{Name: "long", Kind: workload.CPU, Duration: untilStopped})
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		assertExited(t, s.History())
	})

	t.Run("OrdinaryUserSessionIsAttributedToIt", func(t *testing.T) {
		for _, kind := range []workload.Kind{workload.IO, workload.ParallelCPU} {
			s := start(t, c, workload.Spec{Name: "user-" + string(kind), Kind: kind, Duration: untilStopped, User: cluster.UserRole, IOBytes: 4 << 20})
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
			if err != nil {
				t.Fatal(err)
			}
			var users []string
			await.Until(t, "the session's backends on the coordinator and every segment", func() bool {
				mustRun(t, s)
				users = nil
				rows, err := conn.Query(ctx, `SELECT usename || '/' || rsgname FROM gp_dist_random('pg_stat_activity') WHERE sess_id = $1
				UNION ALL SELECT usename || '/' || rsgname FROM pg_stat_activity WHERE sess_id = $1 AND backend_type = 'client backend'`, s.SessID())
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					var u string
					_ = rows.Scan(&u)
					users = append(users, u)
				}
				return len(users) >= 1+len(c.Segments)
			})
			_ = conn.Close(ctx)
			if slices.ContainsFunc(users, func(u string) bool { return u != cluster.UserRole+"/default_group" }) {
				t.Errorf("%s session backends run as %v, want %d of %s/default_group", kind, users, 1+len(c.Segments), cluster.UserRole)
			}
			if err := s.Stop(); err != nil {
				t.Fatalf("%s as %s: %v", kind, cluster.UserRole, err)
			}
		}
	})

	t.Run("SkewedCPURunsDispatchedQueriesWorkedOnOneSegment", func(t *testing.T) {
		hot := c.Segments[len(c.Segments)-1].Content
		s := start(t, c, workload.Spec{Name: "skewed", Kind: workload.SkewedCPU, HotContent: hot, Duration: untilStopped, QueryDuration: time.Second})
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close(ctx) }()
		// The coordinator backend is active in one query after another, as a dispatcher is.
		var starts []time.Time
		await.Until(t, "two queries on the coordinator backend", func() bool {
			mustRun(t, s)
			var state string
			var start *time.Time
			if err := conn.QueryRow(ctx, "SELECT state, query_start FROM pg_catalog.pg_stat_activity WHERE pid = $1",
				s.CoordinatorPID()).Scan(&state, &start); err != nil {
				t.Fatal(err)
			}
			if state == "active" && start != nil && (len(starts) == 0 || start.After(starts[len(starts)-1])) {
				starts = append(starts, *start)
			}
			return len(starts) >= 2
		})
		// Meanwhile only the hot segment's backend works.
		var hotPids, coldPids []int
		for content, p := range s.Pids() {
			if content == hot {
				hotPids = append(hotPids, p...)
			} else {
				coldPids = append(coldPids, p...)
			}
		}
		sum := func(pids []int) float64 {
			total, err := groundtruth.Sum(pids)
			if err != nil {
				t.Fatal(err)
			}
			return total.CPUSeconds()
		}
		hotBefore, coldBefore := sum(hotPids), sum(coldPids)
		for pid, r := range untilAll(t, hotPids, func(before, now groundtruth.Process) bool {
			return now.UserSeconds >= before.UserSeconds+0.5
		}) {
			t.Errorf("hot pid %d: utime %.2fs did not grow from %.2fs", pid, r[1].UserSeconds, r[0].UserSeconds)
		}
		hotUsed, coldUsed := sum(hotPids)-hotBefore, sum(coldPids)-coldBefore
		t.Logf("queries started %v; meanwhile hot segment %.2fs CPU, the others %.3fs", starts, hotUsed, coldUsed)
		if coldUsed > 0.1*hotUsed {
			t.Errorf("the coordinator and cold segments used %.2fs CPU while the hot one used %.2fs, want at most a tenth", coldUsed, hotUsed)
		}
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		assertExited(t, s.History())
	})

	// A dispatched I/O session is one long query: the coordinator backend
	// stays in one statement while every segment backend writes, and
	// cancelling that statement, as a DBA would, ends the whole session.
	t.Run("DispatchedIOIsOneQueryThatACancelEnds", func(t *testing.T) {
		s := start(t, c, workload.Spec{Name: "io", Kind: workload.IO, Duration: untilStopped, IOBytes: 4 << 20, Dispatched: true})
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close(ctx) }()
		coordinatorQuery := func() (string, time.Time) {
			var query string
			var start time.Time
			if err := conn.QueryRow(ctx, "SELECT query, query_start FROM pg_catalog.pg_stat_activity WHERE pid = $1 AND state = 'active'",
				s.CoordinatorPID()).Scan(&query, &start); err != nil {
				return "", time.Time{}
			}
			return query, start
		}
		var query string
		var started time.Time
		await.Until(t, "the coordinator backend in its one statement", func() bool {
			mustRun(t, s)
			query, started = coordinatorQuery()
			return strings.Contains(query, "pg_sleep_until")
		})
		var segments []int
		for content, p := range s.Pids() {
			if content != cluster.CoordinatorContent {
				segments = append(segments, p...)
			}
		}
		for pid, r := range untilAll(t, segments, func(before, now groundtruth.Process) bool {
			return now.WriteBytes >= before.WriteBytes+1<<20
		}) {
			t.Errorf("segment pid %d: write_bytes %d did not grow from %d", pid, r[1].WriteBytes, r[0].WriteBytes)
		}
		if q, at := coordinatorQuery(); q != query || !at.Equal(started) {
			t.Errorf("the coordinator ran %q from %v, then %q from %v: want one statement", query, started, q, at)
		}
		if _, err := conn.Exec(ctx, "SELECT pg_cancel_backend($1)", s.CoordinatorPID()); err != nil {
			t.Fatal(err)
		}
		await.Until(t, "the session to end", func() bool {
			select {
			case <-s.Done():
				return true
			default:
				return false
			}
		})
		if err := s.Wait(); err == nil || !strings.Contains(err.Error(), "57014") {
			t.Errorf("the workload ended with %v, want the cancel (SQLSTATE 57014)", err)
		}
		assertExited(t, s.History())
	})

	t.Run("UnknownContentIsRejected", func(t *testing.T) {
		if _, err := workload.Start(context.Background(), c, workload.Spec{Kind: workload.CPU, Contents: []int{99}}); err == nil {
			t.Error("no error for content 99")
		}
	})
}

func TestPostgreSQLDialect(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Dialect: dialect.PostgreSQL})

	t.Run("ParallelSessionShowsWorkersWithLeaderPID", func(t *testing.T) {
		s := start(t, c, workload.Spec{Name: "parallel", Kind: workload.ParallelCPU, Duration: untilStopped})
		if p := s.Pids(); len(p) != 1 || len(p[-1]) != 1 {
			t.Fatalf("pids %v: want one coordinator backend", p)
		}
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close(ctx) }()
		await.Until(t, "a parallel worker with the session's leader_pid", func() bool {
			mustRun(t, s)
			workers := 0
			err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE leader_pid = $1 AND backend_type = 'parallel worker'",
				s.CoordinatorPID()).Scan(&workers)
			if err != nil {
				t.Fatal(err)
			}
			return workers > 0
		})
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("IOSessionWritesOnPlainPostgreSQL", func(t *testing.T) {
		s := start(t, c, workload.Spec{Name: "io", Kind: workload.IO, Duration: untilStopped, IOBytes: 8 << 20})
		for pid, r := range untilAll(t, s.AllPids(), func(before, now groundtruth.Process) bool {
			return now.WriteBytes-before.WriteBytes >= 4<<20
		}) {
			t.Errorf("backend %d wrote %d bytes", pid, r[1].WriteBytes-r[0].WriteBytes)
		}
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
	})
}
