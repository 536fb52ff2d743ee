// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
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

// ioCountsStatement reads the instance's postgresql.conf twenty times (a
// few read calls each) and sleeps, so that its CPU stays far below its
// time and no cap scales its share (docs/pipeline.md, query figures).
const ioCountsStatement = `SELECT pg_sleep(0.3), (SELECT sum(length(pg_read_binary_file('postgresql.conf'))) FROM generate_series(1, 20))`

// ioCounts are the figures TestIOCountsAreExact compares, and /proc's.
var ioCounts = []struct {
	figure pipeline.Figure
	proc   func(groundtruth.Total) uint64
}{
	{pipeline.SyscallsRead, func(t groundtruth.Total) uint64 { return t.ReadSyscalls }},
	{pipeline.SyscallsWrite, func(t groundtruth.Total) uint64 { return t.WriteSyscalls }},
	{pipeline.CharsRead, func(t groundtruth.Total) uint64 { return t.ReadChars }},
	{pipeline.CharsWrite, func(t groundtruth.Total) uint64 { return t.WriteChars }},
}

// A Greenplum session whose processes (its coordinator backend and one
// per segment) make fewer than 1024 read calls each runs one statement
// that reads files, then disconnects. Its query's event holds exactly the
// read and write calls and chars /proc/<pid>/io counted while it ran, and
// its session's event exactly what they counted over their lives: the
// kernel's taskstats rounds each down to a multiple of 1024 (265 read
// calls read 0), /proc/<pid>/io does not.
func TestIOCountsAreExact(t *testing.T) {
	needBinaries(t)
	c := cluster.Start(t, cluster.Options{Hosts: 1, SegmentsPerHost: 2, Dialect: dialect.GP7})
	ctx := await.Context(t)
	s := launch(ctx, t, c, StackOptions{
		Binaries: bins, Config: configPath("testbed.yaml"), Dir: t.TempDir(), OTLPKeep: 10,
		CollectorArgs: []string{"--set=receivers::gpsession::collection_interval=2s"},
	})
	api := dialAPI(t, s.API)
	waitFor(t, "the collector's first snapshot", func() (bool, string) {
		states, err := allSessions(ctx, api)
		return err == nil && len(states) > 0, fmt.Sprint(err)
	})

	connect := func(dsn, app string) *pgx.Conn {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["application_name"] = app
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		return conn
	}
	coord := connect(c.CoordinatorDSN, "gpotel-iocounts")
	var sessID int64
	if err := coord.QueryRow(ctx, "SELECT sess_id FROM pg_catalog.pg_stat_activity WHERE pid = pg_backend_pid()").Scan(&sessID); err != nil {
		t.Fatal(err)
	}
	conns := []*pgx.Conn{coord}
	for _, seg := range c.Segments {
		conns = append(conns, connect(seg.DSN, fmt.Sprintf("%s%d", cluster.SessionTagPrefix, sessID)))
	}
	var pids []int
	for _, conn := range conns {
		pids = append(pids, int(conn.PgConn().PID()))
	}
	// seenIdleAfter waits for a snapshot after t that saw the session
	// idle with every one of its processes.
	seenIdleAfter := func(what string, after time.Time) {
		waitFor(t, what, func() (bool, string) {
			st, err := stateOf(ctx, api, int(sessID))
			if err != nil || st == nil {
				return false, fmt.Sprint(err)
			}
			n := st.GetLastMetrics().GetSystemStat().GetProcesses()
			return st.GetTime().AsTime().After(after) && st.GetSessionInfo().GetState() == "idle" && int(n) == len(pids),
				fmt.Sprintf("%s at %s, %d processes", st.GetSessionInfo().GetState(), st.GetTime().AsTime(), n)
		})
	}
	seenIdleAfter("a snapshot of the session's processes before the statement", time.Now())

	before, err := groundtruth.Sum(pids)
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for _, conn := range conns {
		g.Go(func() error {
			_, err := conn.Exec(gctx, ioCountsStatement)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	done := time.Now()
	after, err := groundtruth.Sum(pids)
	if err != nil {
		t.Fatal(err)
	}
	seenIdleAfter("a snapshot of the session idle after the statement", done)
	final, err := groundtruth.Sum(pids)
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		p, err := groundtruth.Read(pid)
		if err != nil {
			t.Fatal(err)
		}
		if p.ReadSyscalls >= 1024 {
			t.Fatalf("pid %d made %d read calls: the test is of processes that make fewer than 1024", pid, p.ReadSyscalls)
		}
	}
	for _, conn := range conns {
		if err := conn.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, pid := range pids {
		if err := awaitExit(ctx, pid); err != nil {
			t.Fatal(err)
		}
	}

	var queries []events.FinishedQuery
	var sessions []events.EndedSession
	waitFor(t, "the session's event", func() (bool, string) {
		queries, sessions = queries[:0], sessions[:0]
		for _, lr := range s.Sink.LogRecords() {
			switch lr.EventName() {
			case events.EventQueryEnd:
				if q, err := pipelinetest.DecodeQueryEvent(lr.Attributes()); err == nil && q.Session.ID == sessID {
					queries = append(queries, q)
				}
			case events.EventSessionEnd:
				if se, err := pipelinetest.DecodeSessionEvent(lr.Attributes()); err == nil && se.Session.ID == sessID {
					sessions = append(sessions, se)
				}
			}
		}
		return len(sessions) > 0, fmt.Sprintf("%d query events, no session event yet", len(queries))
	})
	var query *events.FinishedQuery
	for i := range queries {
		if start := time.Unix(0, queries[i].Start); !start.Before(sent) && !start.After(done) {
			query = &queries[i]
		}
	}
	if query == nil || len(sessions) != 1 {
		t.Fatalf("%d query events (none of the statement sent at %s), %d session events", len(queries), sent.Format(time.StampMilli), len(sessions))
	}
	for _, c := range ioCounts {
		name := pipeline.Figures[c.figure].Metric.Session + " " + pipeline.Figures[c.figure].Value
		want := int64(c.proc(after) - c.proc(before)) // #nosec G115 -- counts of one statement
		t.Logf("%s: query %d (/proc %d), session %d (/proc %d)", name, query.Totals[c.figure], want, sessions[0].Totals[c.figure], c.proc(final))
		if query.Totals[c.figure] != want {
			t.Errorf("query %s: %d, /proc/<pid>/io counted %d over the statement", name, query.Totals[c.figure], want)
		}
		if c.proc(after) != c.proc(final) {
			t.Logf("%s: /proc counted %d more while the session was idle", name, c.proc(final)-c.proc(after))
		}
		if got := sessions[0].Totals[c.figure]; got != int64(c.proc(final)) { // #nosec G115 -- counts
			t.Errorf("session %s: %d, /proc/<pid>/io counted %d over its processes' lives", name, got, c.proc(final))
		}
	}
	if query.Partial || sessions[0].Partial {
		t.Errorf("query partial %v, session partial %v: both were seen from their start", query.Partial, sessions[0].Partial)
	}
}
