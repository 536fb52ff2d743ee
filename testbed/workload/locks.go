// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/testbed/cluster"
)

// Workloads for the figures Greenplum keeps itself: spill and lock waits.
const (
	// Spill runs one dispatched query whose segment backends sort about
	// SpillBytes under the smallest work_mem, so the sort goes to temporary
	// files, and hold the sorted result open (a cursor) until the end,
	// active in a statement of the query's command count as Greenplum's
	// executors are; the coordinator backend is active meanwhile, as a
	// dispatcher is, and cancelling it ends the executors and their files.
	// Held is closed once every segment backend holds its files.
	Spill Kind = "spill"
	// LockHolder takes LOCK TABLE Spec.Table IN ACCESS EXCLUSIVE MODE on
	// every backend, as Greenplum dispatches it, and keeps it until the end;
	// Held is closed once every backend holds it.
	LockHolder Kind = "lock_holder"
	// LockWaiter reads Spec.Table on its coordinator backend: behind a
	// LockHolder it waits for the lock.
	LockWaiter Kind = "lock_waiter"
)

// tableName is what Spec.Table may be: a plain lower-case identifier.
var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// spill sorts on a segment backend until its sort sits in temporary files,
// then holds them, in a statement of the count dispatched (dispatchSQL);
// the coordinator backend waits in the query.
func (s *Session) spill(ctx context.Context, b *backend, backends int, dispatched string) error {
	sorters := backends - 1
	hold := fmt.Sprintf("SELECT pg_sleep_until('%s')", pgTime(s.until))
	if sorters == 0 { // plain PostgreSQL: the one backend sorts
		sorters, hold = 1, ""
	} else if b.content == cluster.CoordinatorContent {
		return s.holdOnCoordinator(ctx, b, hold)
	}
	// A sorted row takes about 50 bytes in a run on disk.
	rows := max(s.spec.SpillBytes/50, 1)
	return s.holdInTransaction(ctx, b, sorters, []string{
		dispatched + "SET work_mem = '64kB'",
		"BEGIN",
		fmt.Sprintf("DECLARE gpotel_spill CURSOR FOR SELECT g, md5(g::text) AS h FROM generate_series(1, %d) g ORDER BY h", rows),
		"FETCH 1 FROM gpotel_spill",
	}, hold)
}

// lockHolder takes the table's lock on every backend and keeps it; the
// coordinator backend then waits in a statement, as a session that locked a
// table and works on does.
func (s *Session) lockHolder(ctx context.Context, b *backend, backends int) error {
	t := s.spec.Table
	if err := createTable(ctx, b.conn, t); err != nil {
		return err
	}
	hold := ""
	if b.content == cluster.CoordinatorContent {
		hold = fmt.Sprintf("SELECT pg_sleep_until('%s')", pgTime(s.until))
	}
	return s.holdInTransaction(ctx, b, backends, []string{"BEGIN", fmt.Sprintf("LOCK TABLE %s IN ACCESS EXCLUSIVE MODE", t)}, hold)
}

// lockWaiter reads the table on the coordinator; its segment backends stay idle.
func (s *Session) lockWaiter(ctx context.Context, b *backend) error {
	if b.content != cluster.CoordinatorContent {
		return nil
	}
	// Started before its holder (the demo restarts both on their own), it
	// must not fail on a table the holder has not made yet.
	if err := createTable(ctx, b.conn, s.spec.Table); err != nil {
		return err
	}
	_, err := b.conn.Exec(ctx, fmt.Sprintf("SELECT count(*) FROM %s", s.spec.Table))
	return err
}

// createTable makes the table if it is missing. CREATE TABLE IF NOT EXISTS
// is not safe against a concurrent one (a duplicate key in pg_type): the
// makers of one table take turns under a transaction-level advisory lock.
func createTable(ctx context.Context, conn *pgx.Conn, table string) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", "gpotel workload table "+table); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (g integer)", table))
		return err
	})
}

// holdInTransaction runs steps on the backend, counts it as holding (Held
// closes after `of` backends), then runs hold, a statement that lasts until
// the end, or waits for the end; and rolls back.
func (s *Session) holdInTransaction(ctx context.Context, b *backend, of int, steps []string, hold string) error {
	b.use.Lock()
	for _, q := range steps {
		if _, err := b.conn.Exec(ctx, q); err != nil {
			b.use.Unlock()
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	s.markHeld(of)
	if hold != "" {
		if _, err := b.conn.Exec(ctx, hold); err != nil {
			b.use.Unlock()
			return fmt.Errorf("%s: %w", hold, err)
		}
	}
	b.use.Unlock()
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(s.until)):
	}
	b.use.Lock()
	defer b.use.Unlock()
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := b.conn.Exec(rctx, "ROLLBACK")
	return err
}

// holdOnCoordinator runs one statement that lasts until the end.
func (s *Session) holdOnCoordinator(ctx context.Context, b *backend, sql string) error {
	b.use.Lock()
	defer b.use.Unlock()
	_, err := b.conn.Exec(ctx, sql)
	return err
}

// markHeld counts one more backend holding; the last of `of` closes Held.
func (s *Session) markHeld(of int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.heldN++; s.heldN == of {
		close(s.held)
	}
}
