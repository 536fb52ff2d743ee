// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpotel/gpotel/testbed/cluster"
)

// cpuStatement takes about 50-100 ms of one core, so the deadline is checked often.
const cpuStatement = `SELECT sum(sqrt(g::float8) * ln(g::float8 + 1)) FROM generate_series(1, 300000) g`

// burnCPU runs arithmetic statements back to back until the deadline.
func burnCPU(ctx context.Context, b *backend, until time.Time) error {
	for time.Now().Before(until) {
		if _, err := b.conn.Exec(ctx, cpuStatement); err != nil {
			return err
		}
	}
	return nil
}

// parallelCPU builds a table for the backend and scans it with two parallel
// workers per statement until the deadline; the table goes at the end.
func (s *Session) parallelCPU(ctx context.Context, b *backend) error {
	table := fmt.Sprintf("public.gpotel_parallel_%d", b.pid)
	for _, q := range []string{
		"SET max_parallel_workers_per_gather = 2",
		"SET parallel_setup_cost = 0",
		"SET parallel_tuple_cost = 0",
		"SET min_parallel_table_scan_size = 0",
		// The leader only gathers, so the scan's work is done by the workers while it runs.
		"SET parallel_leader_participation = off",
		// Unlogged: parallel workers cannot read temp tables.
		fmt.Sprintf("CREATE UNLOGGED TABLE %s AS SELECT g::float8 AS x FROM generate_series(1, 500000) g", table),
	} {
		if _, err := b.conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = b.conn.Exec(dctx, "DROP TABLE IF EXISTS "+table)
	}()
	for time.Now().Before(s.until) {
		if _, err := b.conn.Exec(ctx, fmt.Sprintf("SELECT sum(sqrt(x) * ln(x + 1)) FROM %s", table)); err != nil {
			return err
		}
	}
	return nil
}

// rowBytes is roughly what one row of the I/O and memory tables occupies on a page.
const rowBytes = 560

// ioLoop makes the backend itself write: with temp_buffers at its minimum, a
// temp table larger than that is written out by the backend as it evicts
// local buffers (temp tables bypass shared buffers, the checkpointer and WAL),
// into the cluster's disk tablespace.
// Then the workload fsyncs the file and drops it from the page cache, so the
// backend's read-back reaches the disk.
func (s *Session) ioLoop(ctx context.Context, b *backend) error {
	for _, q := range []string{
		// temp_buffers can change only before the session's first temp table access.
		"SET temp_buffers = '800kB'",
		// The data dir may be on tmpfs, which accounts no write_bytes; this tablespace is on disk.
		"SET temp_tablespaces = " + cluster.DiskTablespace,
		"CREATE TEMP TABLE gpotel_io (id integer, pad text)",
	} {
		if _, err := b.conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	rows := s.spec.IOBytes / rowBytes
	for time.Now().Before(s.until) {
		if _, err := b.conn.Exec(ctx, "TRUNCATE gpotel_io"); err != nil {
			return err
		}
		if _, err := b.conn.Exec(ctx, "INSERT INTO gpotel_io SELECT g, repeat(md5(g::text), 16) FROM generate_series(1, $1::integer) g", rows); err != nil {
			return err
		}
		var rel string
		if err := b.conn.QueryRow(ctx, "SELECT pg_relation_filepath('gpotel_io')").Scan(&rel); err != nil {
			return err
		}
		if err := dropFromPageCache(filepath.Join(b.dataDir, rel)); err != nil {
			return err
		}
		if _, err := b.conn.Exec(ctx, "SELECT count(*), sum(length(pad)) FROM gpotel_io"); err != nil {
			return err
		}
	}
	return nil
}

// dropFromPageCache flushes a relation's files (the main 1 GB segment and any
// further ones) and asks the kernel to forget their pages.
func dropFromPageCache(path string) error {
	for i := 0; ; i++ {
		p := path
		if i > 0 {
			p = fmt.Sprintf("%s.%d", path, i)
		}
		f, err := os.Open(p)
		if os.IsNotExist(err) && i > 0 {
			return nil
		}
		if err != nil {
			return err
		}
		err = unix.Fdatasync(int(f.Fd()))
		if err == nil {
			err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		}
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
}

// memoryLoop holds MemoryBytes in the backend's local buffers (allocated on
// first use and kept until the backend exits) and keeps sorting in work_mem.
func (s *Session) memoryLoop(ctx context.Context, b *backend) error {
	kb := s.spec.MemoryBytes / 1024
	for _, q := range []string{
		fmt.Sprintf("SET temp_buffers = '%dkB'", kb),
		fmt.Sprintf("SET work_mem = '%dkB'", kb),
		"CREATE TEMP TABLE gpotel_mem (id integer, pad text)",
		fmt.Sprintf("INSERT INTO gpotel_mem SELECT g, repeat(md5(g::text), 16) FROM generate_series(1, %d) g", s.spec.MemoryBytes*8/10/rowBytes),
	} {
		if _, err := b.conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	// About 100 bytes of sort memory per row keeps the sort inside work_mem.
	sortRows := s.spec.MemoryBytes / 200
	for time.Now().Before(s.until) {
		if _, err := b.conn.Exec(ctx, "SELECT count(*) FROM (SELECT g FROM generate_series(1, $1::integer) g ORDER BY g DESC) s", sortRows); err != nil {
			return err
		}
	}
	return nil
}

// heldSort sorts about MemoryBytes of rows in work_mem inside a cursor,
// fetches the first row (which runs the whole sort) and keeps the cursor
// and its transaction open until the end.
func (s *Session) heldSort(ctx context.Context, b *backend, backends int) error {
	// About 150 bytes of sort memory per row; work_mem with room so it never spills.
	rows := s.spec.MemoryBytes / 150
	return s.holdInTransaction(ctx, b, backends, []string{
		fmt.Sprintf("SET work_mem = '%dkB'", 2*s.spec.MemoryBytes/1024),
		"BEGIN",
		fmt.Sprintf("DECLARE gpotel_held CURSOR FOR SELECT g, md5(g::text) AS h FROM generate_series(1, %d) g ORDER BY h", rows),
		"FETCH 1 FROM gpotel_held",
	}, "")
}

// idleInTransaction takes an xid and sits idle in the open transaction.
func (s *Session) idleInTransaction(ctx context.Context, b *backend) error {
	if _, err := b.conn.Exec(ctx, "BEGIN"); err != nil {
		return err
	}
	if _, err := b.conn.Exec(ctx, "SELECT txid_current()"); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(s.until)):
	}
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := b.conn.Exec(rctx, "ROLLBACK")
	return err
}

// churn runs short sessions back to back: each round connects everywhere,
// runs one small statement and disconnects.
func (s *Session) churn(ctx context.Context, g gang) error {
	for {
		err := eachBackend(ctx, g, func(ctx context.Context, b *backend) error {
			_, err := b.conn.Exec(ctx, "SELECT count(*) FROM generate_series(1, 10000)")
			return err
		})
		s.closeGang(g)
		if err != nil {
			return err
		}
		if !sleepUntil(ctx, time.Now().Add(s.spec.Interval), s.until) {
			return nil
		}
		if g, err = s.open(ctx); err != nil {
			return err
		}
	}
}

// segmentReplace burns CPU everywhere and replaces the segment backends every
// Interval, keeping the coordinator backend and so the sess_id.
func (s *Session) segmentReplace(ctx context.Context, g gang) error {
	coord, segs := g[0], g[1:]
	defer func() { s.closeGang(segs) }()
	for {
		roundEnd := time.Now().Add(s.spec.Interval)
		if roundEnd.After(s.until) {
			roundEnd = s.until
		}
		err := eachBackend(ctx, append(gang{coord}, segs...), func(ctx context.Context, b *backend) error {
			return burnCPU(ctx, b, roundEnd)
		})
		if err != nil || !time.Now().Before(s.until) || ctx.Err() != nil {
			s.closeGang(gang{coord})
			return err
		}
		s.closeGang(segs)
		// The new backends serve the same session: its sess_id, which on
		// Greenplum is a counter and not the coordinator's pid.
		fresh, err := s.connectSegments(ctx, s.SessID())
		if err != nil {
			segs = nil
			s.closeGang(gang{coord})
			return err
		}
		segs = fresh
		for _, b := range segs {
			s.track(b)
		}
	}
}

// sleepUntil waits for next (capped at the deadline); false means the work is over.
func sleepUntil(ctx context.Context, next, until time.Time) bool {
	if next.After(until) {
		next = until
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(next)):
	}
	return time.Now().Before(until)
}
