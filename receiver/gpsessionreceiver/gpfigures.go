// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/gpsql"
)

// greenplumFigures are what the server keeps itself about its sessions,
// read on their own interval (gpsql: workfiles, lock waits, session memory).
type greenplumFigures struct {
	at time.Time // when the read finished
	// Spill is every session's current workfiles per command and segment;
	// SpillErr says why there are none to read (absent, not 0).
	Spill    []spillRow
	SpillErr error
	// Waits are the sessions waiting for a lock, each with the one that
	// blocks it (the statement picks it: gpsql.LockWaits).
	Waits    []lockWait
	WaitsErr error
	// Memory is Greenplum's vmem per session and segment; MemoryErr says
	// why there is none (the dialect has no such view, or it is missing).
	Memory    []sessionMemoryRow
	MemoryErr error
}

type spillRow struct {
	Session, CommandCount, Segment, Bytes, Files int64
}

type sessionMemoryRow struct {
	Session, Segment, VmemMB int64
	Runaway                  bool
	QEs, ActiveQEs           int64
}

// lockWait is one waiting session and the session that blocks it.
type lockWait struct {
	Session, Segment int64
	WantedMode       string
	Object           string // schema.relation, "transaction <xid>", or the lock type
	Blocker          int64
	BlockerMode      string
}

// readGreenplumFigures runs the guarded statements on conn: one failing
// leaves its figure absent with the reason, never the others.
func readGreenplumFigures(ctx context.Context, conn *pgx.Conn, shape gpsql.Shape) *greenplumFigures {
	f := &greenplumFigures{}
	if ok, err := guard(ctx, conn, gpsql.HasWorkfiles(shape)); err != nil || !ok {
		f.SpillErr = cmp.Or(err, error(absentError("the server has no workfile view the monitoring role may read")))
	} else {
		f.Spill, f.SpillErr = collect(ctx, conn, gpsql.Workfiles(shape), func(r pgx.CollectableRow) (spillRow, error) {
			var s spillRow
			return s, r.Scan(&s.Session, &s.CommandCount, &s.Segment, &s.Bytes, &s.Files)
		})
	}
	f.Waits, f.WaitsErr = collect(ctx, conn, gpsql.LockWaits(shape), func(r pgx.CollectableRow) (lockWait, error) {
		var w lockWait
		var lockType string
		var relation, xid *string
		err := r.Scan(&w.Session, &w.Segment, &w.WantedMode, &lockType, &relation, &xid, &w.Blocker, &w.BlockerMode)
		w.Object = lockObject(lockType, relation, xid)
		return w, err
	})
	if len(f.Waits) > gpsql.MaxLockWaits {
		f.Waits = f.Waits[:gpsql.MaxLockWaits]
		f.WaitsErr = partialError(fmt.Sprintf("more than %d sessions wait for a lock: the %d of the lowest session ids were read (gpsql.MaxLockWaits)",
			gpsql.MaxLockWaits, gpsql.MaxLockWaits))
	}
	f.Memory, f.MemoryErr = readSessionMemory(ctx, conn, shape)
	f.at = time.Now()
	return f
}

// readSessionMemory reads Greenplum's vmem per session and segment, or
// says why the server has none.
func readSessionMemory(ctx context.Context, conn *pgx.Conn, shape gpsql.Shape) ([]sessionMemoryRow, error) {
	guardText := gpsql.HasSessionMemory(shape)
	if guardText == "" {
		return nil, absentError(string(shape.Dialect) + " keeps no per-session memory view")
	}
	if ok, err := guard(ctx, conn, guardText); err != nil || !ok {
		return nil, cmp.Or(err, error(absentError(gpsql.SessionMemoryMissing(shape.Dialect))))
	}
	return collect(ctx, conn, gpsql.SessionMemory(shape), func(r pgx.CollectableRow) (sessionMemoryRow, error) {
		var m sessionMemoryRow
		return m, r.Scan(&m.Session, &m.Segment, &m.VmemMB, &m.Runaway, &m.QEs, &m.ActiveQEs)
	})
}

// absentError says why the server offers no view for a figure: the figure
// is absent, which is no failed read.
type absentError string

func (e absentError) Error() string { return string(e) }

// partialError says what a read left out past a bound: the figure holds
// what was read.
type partialError string

func (e partialError) Error() string { return string(e) }

func guard(ctx context.Context, conn *pgx.Conn, sql string) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, sql).Scan(&ok)
	return ok, err
}

func collect[T any](ctx context.Context, conn *pgx.Conn, sql string, scan func(pgx.CollectableRow) (T, error)) ([]T, error) {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scan)
}

func lockObject(lockType string, relation, xid *string) string {
	switch {
	case relation != nil:
		return *relation
	case xid != nil:
		return "transaction " + *xid
	}
	return lockType
}
