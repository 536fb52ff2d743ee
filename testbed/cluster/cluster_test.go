// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cluster_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/testbed/cluster"
)

func connect(t *testing.T, dsn string, params map[string]string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range params {
		cfg.RuntimeParams[k] = v
	}
	conn, err := pgx.ConnectConfig(await.Context(t), cfg)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func backendPID(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var pid int
	if err := conn.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// sessIDOf is a coordinator backend's sess_id.
func sessIDOf(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var id int
	if err := conn.QueryRow(context.Background(), cluster.MySessIDSQL).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// testbedSession opens a coordinator backend and one tagged backend per segment,
// the shape the workload package uses.
func testbedSession(t *testing.T, c *cluster.Cluster) (sessID int, pids map[int]int) {
	t.Helper()
	coord := connect(t, c.CoordinatorDSN, nil)
	sessID = sessIDOf(t, coord)
	pids = map[int]int{-1: backendPID(t, coord)}
	for _, seg := range c.Segments {
		conn := connect(t, seg.DSN, map[string]string{"application_name": fmt.Sprintf("%s%d", cluster.SessionTagPrefix, sessID)})
		pids[seg.Content] = backendPID(t, conn)
	}
	return sessID, pids
}

type activityRow struct{ segment, pid, sessID int }

func allSessions(t *testing.T, conn *pgx.Conn, query string) []activityRow {
	t.Helper()
	rows, err := conn.Query(context.Background(), query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	var out []activityRow
	for rows.Next() {
		var r activityRow
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		if err := rows.Scan(append([]any{&r.segment, &r.pid, &r.sessID}, make([]any, len(vals)-3)...)...); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return out
}

const (
	gp6AllSessions = `SELECT gp_execution_segment(), pid, sess_id FROM gp_dist_random('pg_stat_activity') UNION ALL SELECT -1, pid, sess_id FROM pg_stat_activity`
	gp7AllSessions = `SELECT gp_execution_segment(), pid, sess_id, backend_type FROM gp_dist_random('pg_stat_activity') UNION ALL SELECT -1, pid, sess_id, backend_type FROM pg_stat_activity`
)

func checkAllSessions(t *testing.T, c *cluster.Cluster, query string) {
	sessID, pids := testbedSession(t, c)
	receiver := connect(t, c.CoordinatorDSN, nil)
	receiverSession := sessIDOf(t, receiver)
	rows := allSessions(t, receiver, query)

	found := map[int]activityRow{}
	receiverSegments := map[int]bool{}
	for _, r := range rows {
		if r.sessID == sessID {
			found[r.segment] = r
		}
		if r.sessID == receiverSession && r.segment >= 0 {
			receiverSegments[r.segment] = true
		}
	}
	for content, pid := range pids {
		r, ok := found[content]
		if !ok {
			t.Errorf("session %d: no backend on content %d in %v", sessID, content, rows)
			continue
		}
		if r.pid != pid {
			t.Errorf("session %d on content %d: pid %d, want %d", sessID, content, r.pid, pid)
		}
	}
	if len(found) != len(pids) {
		t.Errorf("session %d: rows on contents %v, want exactly %v", sessID, found, pids)
	}
	// The query's own dblink backends serve the receiver's session, as Greenplum's QEs do.
	for _, seg := range c.Segments {
		if !receiverSegments[seg.Content] {
			t.Errorf("receiver session %d has no backend on content %d", receiverSession, seg.Content)
		}
	}
}

func TestGP6(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Hosts: 2, SegmentsPerHost: 1, Dialect: dialect.GP6})

	t.Run("AllSessionsQuerySharesSessIDAcrossSegments", func(t *testing.T) {
		checkAllSessions(t, c, gp6AllSessions)
	})
	t.Run("VersionNamesGreenplum6", func(t *testing.T) {
		conn := connect(t, c.CoordinatorDSN, nil)
		var v string
		if err := conn.QueryRow(context.Background(), "SELECT version()").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(v, "Greenplum Database 6.") || !strings.HasPrefix(v, "PostgreSQL 9.4") {
			t.Errorf("version() = %q", v)
		}
	})
	t.Run("SegmentConfigurationHasMirrorAndDownRows", func(t *testing.T) {
		checkSegmentConfiguration(t, c)
	})
	t.Run("StoppedSegmentIsMarkedDownAndSkipped", func(t *testing.T) {
		ctx := context.Background()
		if err := c.StopSegment(ctx, 1); err != nil {
			t.Fatal(err)
		}
		conn := connect(t, c.CoordinatorDSN, nil)
		segments := map[int]bool{}
		for _, r := range allSessions(t, conn, gp6AllSessions) {
			segments[r.segment] = true
		}
		if segments[1] || !segments[0] || !segments[-1] {
			t.Errorf("with content 1 stopped the query shows segments %v", segments)
		}
		var status string
		if err := conn.QueryRow(ctx, "SELECT status FROM gp_segment_configuration WHERE content = 1 AND role = 'p'").Scan(&status); err != nil {
			t.Fatal(err)
		}
		if status != "d" {
			t.Errorf("status of stopped content 1 is %q", status)
		}
		if err := c.StartSegment(ctx, 1); err != nil {
			t.Fatal(err)
		}
		checkAllSessions(t, c, gp6AllSessions)
	})
	t.Run("ActivityHasGP6Columns", func(t *testing.T) {
		conn := connect(t, c.CoordinatorDSN, nil)
		var waiting bool
		var reason, rsgname *string
		err := conn.QueryRow(context.Background(),
			"SELECT waiting, waiting_reason, rsgname FROM pg_stat_activity WHERE pid = pg_backend_pid()").Scan(&waiting, &reason, &rsgname)
		if err != nil {
			t.Fatal(err)
		}
		if waiting || reason != nil || rsgname == nil || *rsgname != "admin_group" {
			t.Errorf("own row: waiting=%v reason=%v rsgname=%v", waiting, reason, rsgname)
		}
	})
}

func TestGP7(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Hosts: 1, SegmentsPerHost: 2, Dialect: dialect.GP7})
	t.Run("AllSessionsQuerySharesSessIDAcrossSegments", func(t *testing.T) {
		checkAllSessions(t, c, gp7AllSessions)
	})
	t.Run("VersionNamesGreenplum7", func(t *testing.T) {
		conn := connect(t, c.CoordinatorDSN, nil)
		var v string
		if err := conn.QueryRow(context.Background(), "SELECT version()").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(v, "Greenplum Database 7.") || !strings.HasPrefix(v, "PostgreSQL 12") {
			t.Errorf("version() = %q", v)
		}
	})
	t.Run("SystemProcessesHaveSessIDZero", func(t *testing.T) {
		conn := connect(t, c.CoordinatorDSN, nil)
		var n, nonzero int
		err := conn.QueryRow(context.Background(),
			"SELECT count(*), count(*) FILTER (WHERE sess_id <> 0) FROM pg_stat_activity WHERE backend_type = 'checkpointer'").Scan(&n, &nonzero)
		if err != nil {
			t.Fatal(err)
		}
		if n != 1 || nonzero != 0 {
			t.Errorf("checkpointer rows %d, with sess_id<>0 %d", n, nonzero)
		}
	})
	t.Run("SegmentConfigurationHasMirrorAndDownRows", func(t *testing.T) {
		checkSegmentConfiguration(t, c)
	})
	t.Run("CoordinatorRestartChangesStartTime", func(t *testing.T) {
		startTime := func() time.Time {
			conn := connect(t, c.CoordinatorDSN, nil)
			var ts time.Time
			if err := conn.QueryRow(context.Background(), "SELECT pg_postmaster_start_time()").Scan(&ts); err != nil {
				t.Fatal(err)
			}
			return ts
		}
		before, pid := startTime(), c.Coordinator.PostmasterPID
		if err := c.RestartCoordinator(context.Background()); err != nil {
			t.Fatal(err)
		}
		if after := startTime(); !after.After(before) {
			t.Errorf("postmaster start time %v after restart, was %v", after, before)
		}
		if c.Coordinator.PostmasterPID == pid {
			t.Errorf("postmaster pid unchanged (%d) after restart", pid)
		}
		checkAllSessions(t, c, gp7AllSessions)
	})
}

func checkSegmentConfiguration(t *testing.T, c *cluster.Cluster) {
	conn := connect(t, c.CoordinatorDSN, nil)
	rows, err := conn.Query(context.Background(),
		"SELECT dbid, content, role, preferred_role, mode, status, port, hostname, address, datadir FROM gp_segment_configuration ORDER BY dbid")
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		dbid, content                 int
		role, preferred, mode, status string
		port                          int
		hostname, address, datadir    string
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.dbid, &r.content, &r.role, &r.preferred, &r.mode, &r.status, &r.port, &r.hostname, &r.address, &r.datadir); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	live := map[int]row{}
	var mirrors, down int
	for _, r := range got {
		switch {
		case r.role == "m":
			mirrors++
		case r.status == "d":
			down++
			if _, running := c.Instance(r.content); running {
				t.Errorf("down primary has content %d of a running instance", r.content)
			}
		default:
			live[r.content] = r
		}
	}
	if mirrors != 1 || down != 1 {
		t.Errorf("want one mirror and one down row, got %d and %d in %v", mirrors, down, got)
	}
	for _, in := range c.Instances() {
		r, ok := live[in.Content]
		if !ok || r.port != in.Port || r.hostname != in.Host || r.datadir != in.DataDir {
			t.Errorf("content %d: row %+v, want port %d host %s", in.Content, r, in.Port, in.Host)
		}
	}
}

func TestPostgreSQLInstallsNothing(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Dialect: dialect.PostgreSQL})
	if len(c.Segments) != 0 || len(c.Hosts) != 1 || c.Hosts[0].Name != cluster.CoordinatorHost {
		t.Fatalf("hosts %+v segments %+v", c.Hosts, c.Segments)
	}
	conn := connect(t, c.CoordinatorDSN, nil)
	var v string
	var schemas int
	err := conn.QueryRow(context.Background(),
		"SELECT version(), (SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'gp%')").Scan(&v, &schemas)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(v, "Greenplum") || schemas != 0 {
		t.Errorf("plain PostgreSQL expected: version %q, gp schemas %d", v, schemas)
	}
}

func TestDownLeavesNothing(t *testing.T) {
	ctx := context.Background()
	c, err := cluster.Up(ctx, cluster.Options{Hosts: 1, SegmentsPerHost: 1, Dialect: dialect.GP6})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Processes()); n < 2 {
		t.Errorf("only %d processes found for a running cluster", n)
	}
	loaded, err := cluster.Load(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := loaded.Down(ctx); err != nil {
		t.Fatal(err)
	}
	assertGone(t, c)
	if err := c.Down(ctx); err != nil {
		t.Errorf("second Down: %v", err)
	}
}

func assertGone(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	if left := c.Processes(); len(left) != 0 {
		t.Errorf("processes left behind: %v", left)
	}
	for _, dir := range []string{c.Dir, c.DiskDir, c.Cgroups.Root} {
		if dir == "" {
			continue
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("directory %s left behind (stat: %v)", dir, err)
		}
	}
}

// TestCleanupAfterFailedTest runs a test that fails right after Start in a child
// process and checks that its cluster is gone anyway.
func TestCleanupAfterFailedTest(t *testing.T) {
	if dir := os.Getenv("GPOTEL_TESTBED_FAILING_CHILD"); dir != "" {
		cluster.Start(t, cluster.Options{Dir: dir, Hosts: 1, SegmentsPerHost: 1, Dialect: dialect.GP7})
		t.Fatal("failing on purpose with the cluster up")
	}
	parent, err := os.MkdirTemp("", "gpotel-testbed-fail-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(parent) }()
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := parent + "/cluster"
	cmd := exec.Command(os.Args[0], "-test.run=^TestCleanupAfterFailedTest$", "-test.v")
	cmd.Env = append(os.Environ(), "GPOTEL_TESTBED_FAILING_CHILD="+dir)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "failing on purpose") {
		t.Fatalf("child test should have failed on purpose: err=%v\n%s", err, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster dir %s left behind after a failed test:\n%s", dir, out)
	}
	if left := taggedProcesses(dir); len(left) != 0 {
		t.Errorf("postgres processes for %s left behind: %v", dir, left)
	}
}

// taggedProcesses finds processes whose command line mentions dir.
func taggedProcesses(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), dir+"/") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestOrphanOfKilledTestIsReaped kills a test process that holds a cluster
// (as a test timeout would) and checks that the next Up takes that cluster down.
func TestOrphanOfKilledTestIsReaped(t *testing.T) {
	if os.Getenv("GPOTEL_TESTBED_KILLED_CHILD") != "" {
		c := cluster.Start(t, cluster.Options{Dialect: dialect.PostgreSQL})
		fmt.Printf("DIR=%s\n", c.Dir)
		_ = os.Stdout.Sync()
		select {} // wait to be killed
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOrphanOfKilledTestIsReaped$")
	cmd.Env = append(os.Environ(), "GPOTEL_TESTBED_KILLED_CHILD=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	var out string
	for !strings.Contains(out, "\n") {
		n, err := stdout.Read(buf)
		if err != nil {
			t.Fatalf("child: %v (output %q)", err, out)
		}
		out += string(buf[:n])
	}
	dir := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(out, "\n", 2)[0], "DIR="))
	orphan, err := cluster.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if len(orphan.Processes()) == 0 {
		t.Fatal("the orphan's postgres should outlive the killed test")
	}
	cluster.Start(t, cluster.Options{Dialect: dialect.PostgreSQL})
	assertGone(t, orphan)
}

func TestDownAfterASegmentWasKilled(t *testing.T) {
	c, err := cluster.Up(context.Background(), cluster.Options{Hosts: 1, SegmentsPerHost: 1, Dialect: dialect.GP7})
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(c.Segments[0].PostmasterPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := c.Down(context.Background()); err != nil {
		t.Errorf("down with a killed segment: %v", err)
	}
	assertGone(t, c)
}
