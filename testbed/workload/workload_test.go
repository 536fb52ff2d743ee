package workload_test

import (
	"context"
	"os"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/groundtruth"
	"github.com/gpotel/gpotel/testbed/workload"
)

func start(t *testing.T, c *cluster.Cluster, spec workload.Spec) *workload.Session {
	t.Helper()
	s, err := workload.Start(context.Background(), c, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func sum(t *testing.T, pids []int) groundtruth.Total {
	t.Helper()
	total, err := groundtruth.Sum(pids)
	if err != nil {
		t.Fatal(err)
	}
	if len(total.Exited) > 0 {
		t.Fatalf("session backends exited early: %v", total.Exited)
	}
	return total
}

// sessionRows returns the pids the all-sessions query shows for sessID, by segment.
func sessionRows(t *testing.T, c *cluster.Cluster, sessID int) map[int][]int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT gp_segment_id, pid FROM gp_dist_random('pg_stat_activity') WHERE sess_id = $1
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

func itoa(i int) string { return strconv.Itoa(i) }

func TestWorkloads(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Hosts: 2, SegmentsPerHost: 1, Dialect: cluster.DialectGP7})

	t.Run("CPUSessionBurnsUserTimeOnEveryBackend", func(t *testing.T) {
		s := start(t, c, workload.Spec{Name: "cpu", Kind: workload.CPU, Duration: 2 * time.Second})
		pids := s.Pids()
		if len(pids) != 1+len(c.Segments) {
			t.Fatalf("pids %v: want the coordinator and %d segments", pids, len(c.Segments))
		}
		if got := sessionRows(t, c, s.SessID()); !samePids(got, pids) {
			t.Errorf("all-sessions query shows %v for sess_id %d, session has %v", got, s.SessID(), pids)
		}
		before := map[int]groundtruth.Process{}
		for _, pid := range s.AllPids() {
			p, err := groundtruth.Read(pid)
			if err != nil {
				t.Fatal(err)
			}
			before[pid] = p
		}
		time.Sleep(1500 * time.Millisecond)
		for pid, b := range before {
			p, err := groundtruth.Read(pid)
			if err != nil {
				t.Fatal(err)
			}
			if p.UserSeconds <= b.UserSeconds {
				t.Errorf("pid %d: utime %.2fs did not grow from %.2fs", pid, p.UserSeconds, b.UserSeconds)
			}
		}
		if err := s.Wait(); err != nil {
			t.Fatal(err)
		}
		assertExited(t, s.History())
	})

	t.Run("ParallelWorkersShareTheSessID", func(t *testing.T) {
		s := start(t, c, workload.Spec{Name: "parallel", Kind: workload.ParallelCPU, Duration: 3 * time.Second})
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		seen := map[int]bool{}
		for deadline := time.Now().Add(2500 * time.Millisecond); len(seen) < 1+len(c.Segments) && time.Now().Before(deadline); {
			rows, err := conn.Query(ctx, `SELECT gp_segment_id FROM gp_dist_random('pg_stat_activity') WHERE sess_id = $1 AND backend_type = 'parallel worker'
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
		}
		if len(seen) != 1+len(c.Segments) {
			t.Errorf("parallel workers with sess_id %d seen on %v, want the coordinator and every segment", s.SessID(), seen)
		}
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("IOSessionBackendsWriteAndReadTheDisk", func(t *testing.T) {
		const perRound = 16 << 20
		s := start(t, c, workload.Spec{Name: "io", Kind: workload.IO, Duration: 2 * time.Second, IOBytes: perRound})
		pids := s.AllPids()
		before := map[int]groundtruth.Process{}
		for _, pid := range pids {
			p, _ := groundtruth.Read(pid)
			before[pid] = p
		}
		time.Sleep(1500 * time.Millisecond)
		for _, pid := range pids {
			p, err := groundtruth.Read(pid)
			if err != nil {
				t.Fatal(err)
			}
			if w := p.WriteBytes - before[pid].WriteBytes; w < perRound/2 {
				t.Errorf("pid %d wrote %d bytes, want at least %d", pid, w, perRound/2)
			}
			if r := p.ReadBytes - before[pid].ReadBytes; r == 0 {
				t.Errorf("pid %d read nothing from disk", pid)
			}
		}
		if err := s.Wait(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("MemorySessionHoldsMemoryBytes", func(t *testing.T) {
		const hold = 48 << 20
		s := start(t, c, workload.Spec{Name: "mem", Kind: workload.Memory, Duration: 2 * time.Second, MemoryBytes: hold})
		deadline := time.Now().Add(1800 * time.Millisecond)
		peak := map[int]uint64{}
		for time.Now().Before(deadline) {
			for _, pid := range s.AllPids() {
				if p, err := groundtruth.Read(pid); err == nil && p.RSSBytes > peak[pid] {
					peak[pid] = p.RSSBytes
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		for pid, rss := range peak {
			if rss < hold/2 {
				t.Errorf("pid %d peaked at %d MiB RSS, want at least %d MiB", pid, rss>>20, hold>>21)
			}
		}
		if len(peak) != 1+len(c.Segments) {
			t.Errorf("saw %d backends, want %d", len(peak), 1+len(c.Segments))
		}
		if err := s.Wait(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("IdleInTransactionShowsOnEveryBackend", func(t *testing.T) {
		s := start(t, c, workload.Spec{Name: "idle", Kind: workload.IdleInTransaction, Duration: 5 * time.Second})
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var states []string
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			states = nil
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
			if len(states) == 1+len(c.Segments) {
				break
			}
		}
		if len(states) != 1+len(c.Segments) {
			t.Errorf("%d backends idle in transaction, want %d", len(states), 1+len(c.Segments))
		}
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		assertExited(t, s.History())
	})

	t.Run("ChurnMakesNewSessionsAndLeavesNoBackends", func(t *testing.T) {
		s := start(t, c, workload.Spec{Name: "churn", Kind: workload.Churn, Duration: time.Second, Interval: 20 * time.Millisecond})
		if err := s.Wait(); err != nil {
			t.Fatal(err)
		}
		ids := s.SessIDs()
		if len(ids) < 3 {
			t.Errorf("only %d churn rounds in 1s", len(ids))
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
		s := start(t, c, workload.Spec{Name: "replace", Kind: workload.SegmentReplace, Duration: 2 * time.Second, Interval: 400 * time.Millisecond})
		sessID, coord := s.SessID(), s.CoordinatorPID()
		first := s.Pids()
		deadline := time.Now().Add(1500 * time.Millisecond)
		for time.Now().Before(deadline) && samePids(s.Pids(), first) {
			time.Sleep(20 * time.Millisecond)
		}
		replaced := s.Pids()
		if samePids(replaced, first) {
			t.Fatalf("segment backends never replaced: %v", first)
		}
		if s.SessID() != sessID || s.CoordinatorPID() != coord {
			t.Errorf("sess_id %d coordinator %d changed to %d %d", sessID, coord, s.SessID(), s.CoordinatorPID())
		}
		if err := s.Wait(); err != nil {
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
		s := start(t, c, workload.Spec{Name: "long", Kind: workload.CPU, Duration: time.Minute})
		begin := time.Now()
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(begin); d > 10*time.Second {
			t.Errorf("Stop took %v", d)
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
	c := cluster.Start(t, cluster.Options{Dialect: cluster.DialectPostgreSQL})

	t.Run("ParallelSessionShowsWorkersWithLeaderPID", func(t *testing.T) {
		s := start(t, c, workload.Spec{Name: "parallel", Kind: workload.ParallelCPU, Duration: 3 * time.Second})
		if p := s.Pids(); len(p) != 1 || len(p[-1]) != 1 {
			t.Fatalf("pids %v: want one coordinator backend", p)
		}
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		workers := 0
		for deadline := time.Now().Add(2 * time.Second); workers == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE leader_pid = $1 AND backend_type = 'parallel worker'",
				s.CoordinatorPID()).Scan(&workers)
			if err != nil {
				t.Fatal(err)
			}
		}
		if workers == 0 {
			t.Error("no parallel worker with the session's leader_pid seen in 2s")
		}
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("IOSessionWritesOnPlainPostgreSQL", func(t *testing.T) {
		s := start(t, c, workload.Spec{Name: "io", Kind: workload.IO, Duration: time.Second, IOBytes: 8 << 20})
		pid := s.CoordinatorPID()
		before, err := groundtruth.Read(pid)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(800 * time.Millisecond)
		after, err := groundtruth.Read(pid)
		if err != nil {
			t.Fatal(err)
		}
		if after.WriteBytes-before.WriteBytes < 4<<20 {
			t.Errorf("backend %d wrote %d bytes", pid, after.WriteBytes-before.WriteBytes)
		}
		if err := s.Wait(); err != nil {
			t.Fatal(err)
		}
	})
}
