// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/gpsql"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// On every dialect of the testbed, the lock-wait statement answers at most
// one row per waiting session, naming the one holder that blocks it: a
// queued ACCESS EXCLUSIVE behind readers and a ROW EXCLUSIVE holder, with
// more readers queued behind it, is one row naming the strongest holder,
// not waiters × holders.
func TestLockWaitsNameOneBlockerPerWaitingSession(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testbed per dialect")
	}
	const readers, queued = 3, 5
	for _, opts := range cluster.SmallClusters(1) {
		t.Run(string(opts.Dialect), func(t *testing.T) {
			c := cluster.Start(t, opts)
			ctx := await.Context(t)
			connect := func() *pgx.Conn {
				conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = conn.Close(context.Background()) })
				return conn
			}
			exec := func(conn *pgx.Conn, sqls ...string) {
				for _, sql := range sqls {
					if _, err := conn.Exec(ctx, sql); err != nil {
						t.Fatalf("%s: %v", sql, err)
					}
				}
			}
			// A Greenplum session's id is the coordinator's session counter's
			// number, never its backend's pid (testbed/README.md).
			sessionOf := func(conn *pgx.Conn) int64 {
				if opts.Dialect == dialect.PostgreSQL {
					return int64(conn.PgConn().PID())
				}
				var id int64
				if err := conn.QueryRow(ctx, cluster.MySessIDSQL).Scan(&id); err != nil {
					t.Fatal(err)
				}
				return id
			}
			admin := connect()
			exec(admin, "CREATE TABLE gpotel_contended (i integer)")
			for range readers {
				exec(connect(), "BEGIN", "SELECT count(*) FROM gpotel_contended")
			}
			writer := connect()
			writerSession := sessionOf(writer)
			exec(writer, "BEGIN", "LOCK TABLE gpotel_contended IN ROW EXCLUSIVE MODE")

			// Statements that wait until the test ends and closes their connections.
			waitIn := func(conn *pgx.Conn, sql string) {
				go func() { _, _ = conn.Exec(context.Background(), sql) }()
			}
			alter := connect()
			alterSession := sessionOf(alter)
			waitIn(alter, "ALTER TABLE gpotel_contended ADD COLUMN j integer")
			await.NoError(t, "the ALTER TABLE waits", func() error { return waiting(ctx, admin, 1) })
			for range queued {
				conn := connect()
				exec(conn, "BEGIN")
				waitIn(conn, "SELECT count(*) FROM gpotel_contended")
			}
			await.NoError(t, "the readers queue behind it", func() error { return waiting(ctx, admin, 1+queued) })

			src := newPGSource(testbedConfig(c))
			t.Cleanup(src.Close)
			st, err := src.Discover(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := admin.Query(ctx, gpsql.LockWaits(src.shape(st.Dialect, src.columns)))
			if err != nil {
				t.Fatal(err)
			}
			seen := map[int64]bool{}
			var alterBlocker int64
			var alterBlockerMode string
			n := 0
			for rows.Next() {
				n++
				var session, segment, blocker int64
				var mode, lockType, blockerMode string
				var relation, xid *string
				if err := rows.Scan(&session, &segment, &mode, &lockType, &relation, &xid, &blocker, &blockerMode); err != nil {
					t.Fatal(err)
				}
				if seen[session] {
					t.Errorf("session %d answered twice", session)
				}
				seen[session] = true
				if session == alterSession {
					alterBlocker, alterBlockerMode = blocker, blockerMode
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if n > 1+queued {
				t.Errorf("%d rows for %d waiting sessions", n, 1+queued)
			}
			if alterBlocker != writerSession || alterBlockerMode != "RowExclusiveLock" {
				t.Errorf("the ALTER TABLE's blocker: session %d in %q, want the writer %d in RowExclusiveLock", alterBlocker, alterBlockerMode, writerSession)
			}
		})
	}
}

// waiting checks that n lock requests on gpotel_contended wait.
func waiting(ctx context.Context, conn *pgx.Conn, n int) error {
	var got int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE relation = 'gpotel_contended'::regclass AND NOT granted").Scan(&got); err != nil {
		return err
	}
	if got != n {
		return errors.New(fmt.Sprint(got, " waiting"))
	}
	return nil
}
