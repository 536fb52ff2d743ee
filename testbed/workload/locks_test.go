// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workload_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/workload"
)

// A spill session's segment backends hold sorts in temporary files, and
// Greenplum's workfile view counts exactly those files per segment, under
// the command count its coordinator's running statement dispatched (the
// count in the coordinator's title plus one), as Greenplum records the
// count of the statement that made a workfile.
func TestSpillSessionHoldsWorkfilesTheViewCounts(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Hosts: 1, SegmentsPerHost: 2, Dialect: dialect.GP6})
	s := start(t, c, workload.Spec{Name: "spill", Kind: workload.Spill, Duration: untilStopped, SpillBytes: 8 << 20})
	<-s.Held()
	ctx := await.Context(t)
	conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	view, counts := map[int]int64{}, map[int]int64{}
	rows, _ := conn.Query(ctx, `SELECT segid, command_cnt, size::bigint FROM gp_toolkit.gp_workfile_usage_per_query WHERE sess_id = $1`, s.SessID())
	var seg int
	var ccnt, size int64
	if _, err := pgx.ForEachRow(rows, []any{&seg, &ccnt, &size}, func() error { view[seg], counts[seg] = size, ccnt; return nil }); err != nil {
		t.Fatal(err)
	}
	title, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", s.CoordinatorPID()))
	if err != nil {
		t.Fatal(err)
	}
	var running int64
	if m := regexp.MustCompile(` cmd([0-9]+) `).FindSubmatch(title); m != nil {
		running, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	for _, in := range c.Segments {
		if running == 0 || counts[in.Content] != running+1 {
			t.Errorf("segment %d: the view's command_cnt is %d; the coordinator's running statement is cmd%d (title %q)", in.Content, counts[in.Content], running, title)
		}
	}
	for _, in := range c.Segments {
		onDisk := tempFileBytes(t, in.DataDir, s.Pids()[in.Content])
		if onDisk < 4<<20 || view[in.Content] != onDisk {
			t.Errorf("segment %d: the view says %d bytes, its temporary directory holds %d for the session's backend", in.Content, view[in.Content], onDisk)
		}
	}
	if view[cluster.CoordinatorContent] != 0 {
		t.Errorf("the coordinator, which only waits, has %d bytes of workfiles", view[cluster.CoordinatorContent])
	}
}

// tempFileBytes sums the temporary files of the backends pids in dataDir.
func tempFileBytes(t *testing.T, dataDir string, pids []int) int64 {
	t.Helper()
	var total int64
	for _, pid := range pids {
		files, err := filepath.Glob(filepath.Join(dataDir, "base", "pgsql_tmp", fmt.Sprintf("pgsql_tmp%d.*", pid)))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if st, err := os.Stat(f); err == nil {
				total += st.Size()
			}
		}
	}
	return total
}

// A session that reads a table another session locked waits for it, and
// Greenplum's cluster-wide pg_locks shows the wait and every holder.
func TestLockWaiterWaitsBehindTheHolder(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Hosts: 1, SegmentsPerHost: 2, Dialect: dialect.GP7})
	holder := start(t, c, workload.Spec{Name: "holder", Kind: workload.LockHolder, Table: "gpotel_locked", Duration: untilStopped})
	<-holder.Held()
	waiter := start(t, c, workload.Spec{Name: "waiter", Kind: workload.LockWaiter, Table: "gpotel_locked", Duration: untilStopped})
	ctx := await.Context(t)
	conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	await.NoError(t, "the waiter's lock wait in pg_locks", func() error {
		var waiting, held int
		err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE mppsessionid = $1 AND NOT granted AND mode = 'AccessShareLock' AND gp_segment_id = -1),
				count(DISTINCT gp_segment_id) FILTER (WHERE mppsessionid = $2 AND granted AND mode = 'AccessExclusiveLock')
			FROM pg_locks WHERE relation = 'gpotel_locked'::regclass`, waiter.SessID(), holder.SessID()).Scan(&waiting, &held)
		if err != nil {
			return err
		}
		if waiting != 1 || held != 1+len(c.Segments) {
			return fmt.Errorf("waiting rows %d (want 1), holder's instances %d (want %d)", waiting, held, 1+len(c.Segments))
		}
		return nil
	})
}

// A holder and a waiter started at once both make their table if it is
// missing: neither fails on the other's CREATE (PostgreSQL's CREATE TABLE
// IF NOT EXISTS is not safe against a concurrent one: a duplicate key in
// pg_type).
func TestLockWorkloadsStartTogether(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Dialect: dialect.PostgreSQL})
	ctx := await.Context(t)
	for i := range 20 {
		table := fmt.Sprintf("gpotel_together_%d", i)
		errs := make(chan error, 2)
		for _, kind := range []workload.Kind{workload.LockHolder, workload.LockWaiter} {
			go func() {
				s, err := workload.Start(ctx, c, workload.Spec{Name: string(kind), Kind: kind, Table: table, Duration: 200 * time.Millisecond})
				if err == nil {
					err = s.Wait()
				}
				errs <- err
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		}
	}
}

// A run whose statement the server cancelled, whose session it terminated
// or whose coordinator connection it closed was ended by the server (a
// workload rule, gpotel-top's k and K), however it is wrapped; any other
// error is a failure.
func TestACancelOrTerminateIsTheServerEndingTheWork(t *testing.T) {
	for code, want := range map[string]bool{"57014": true, "57P01": true, "22012": false, "08006": false} {
		err := fmt.Errorf("workload w (spill): gpseg-1 pid 1: %w", &pgconn.PgError{Code: code})
		if got := workload.EndedByServer(err); got != want {
			t.Errorf("SQLSTATE %s: EndedByServer %v, want %v", code, got, want)
		}
	}
	if err := fmt.Errorf("workload w (idle_in_transaction): coordinator backend 1: %w", workload.ErrCoordinatorEnded); !workload.EndedByServer(err) {
		t.Error("a coordinator connection the server closed is the server ending the work")
	}
	if workload.EndedByServer(context.Canceled) {
		t.Error("a context cancelled by the caller is not the server ending the work")
	}
}
