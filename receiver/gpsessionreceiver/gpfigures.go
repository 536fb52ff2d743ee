// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"cmp"
	"context"
	"slices"
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
	// blocks it.
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
	var held []lockPair
	held, f.WaitsErr = collect(ctx, conn, gpsql.LockWaits(shape), func(r pgx.CollectableRow) (lockPair, error) {
		var p lockPair
		var relation, xid *string
		err := r.Scan(&p.Session, &p.Segment, &p.WantedMode, &p.lockType, &relation, &xid, &p.Blocker, &p.BlockerMode)
		p.Object = lockObject(p.lockType, relation, xid)
		return p, err
	})
	f.Waits = blockers(held)
	f.Memory, f.MemoryErr = readSessionMemory(ctx, conn, shape)
	f.at = time.Now()
	return f
}

// readSessionMemory reads Greenplum's vmem per session and segment, or
// says why the server has none.
func readSessionMemory(ctx context.Context, conn *pgx.Conn, shape gpsql.Shape) ([]sessionMemoryRow, error) {
	guardText := gpsql.HasSessionMemory(shape)
	if guardText == "" {
		return nil, absentError(shape.Dialect + " keeps no per-session memory view")
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

// lockPair is one lock a session waits for beside one granted lock of
// another session on the same object.
type lockPair struct {
	lockWait
	lockType string
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

// blockers keeps, per waiting session, the one holder whose mode conflicts
// with the wanted one: a wait on the coordinator first (it names the
// statement's own lock), then the strongest held mode, then the lowest
// session id, so the answer does not depend on row order.
func blockers(pairs []lockPair) []lockWait {
	best := map[int64]lockWait{}
	for _, p := range pairs {
		if !lockModesConflict(p.WantedMode, p.BlockerMode) {
			continue
		}
		if cur, ok := best[p.Session]; !ok || blocksBefore(p.lockWait, cur) {
			best[p.Session] = p.lockWait
		}
	}
	out := make([]lockWait, 0, len(best))
	for _, w := range best {
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b lockWait) int { return cmp.Compare(a.Session, b.Session) })
	return out
}

func blocksBefore(a, b lockWait) bool {
	if (a.Segment == -1) != (b.Segment == -1) {
		return a.Segment == -1
	}
	if a.Segment != b.Segment {
		return a.Segment < b.Segment
	}
	if sa, sb := lockStrength[a.BlockerMode], lockStrength[b.BlockerMode]; sa != sb {
		return sa > sb
	}
	return a.Blocker < b.Blocker
}

// lockStrength orders PostgreSQL's table-level lock modes, weakest first.
var lockStrength = map[string]int{
	"AccessShareLock": 1, "RowShareLock": 2, "RowExclusiveLock": 3, "ShareUpdateExclusiveLock": 4,
	"ShareLock": 5, "ShareRowExclusiveLock": 6, "ExclusiveLock": 7, "AccessExclusiveLock": 8,
}

// lockConflicts is PostgreSQL's conflict table: the held modes each
// wanted mode waits for (the same for every lock type).
var lockConflicts = map[string][]string{
	"AccessShareLock":          {"AccessExclusiveLock"},
	"RowShareLock":             {"ExclusiveLock", "AccessExclusiveLock"},
	"RowExclusiveLock":         {"ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"},
	"ShareUpdateExclusiveLock": {"ShareUpdateExclusiveLock", "ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"},
	"ShareLock":                {"RowExclusiveLock", "ShareUpdateExclusiveLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"},
	"ShareRowExclusiveLock":    {"RowExclusiveLock", "ShareUpdateExclusiveLock", "ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"},
	"ExclusiveLock":            {"RowShareLock", "RowExclusiveLock", "ShareUpdateExclusiveLock", "ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"},
	"AccessExclusiveLock":      {"AccessShareLock", "RowShareLock", "RowExclusiveLock", "ShareUpdateExclusiveLock", "ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"},
}

// lockModesConflict tells whether a session wanting mode waits for one
// holding held; a mode the table does not know (another lock method's, as
// an advisory or a Greenplum-specific one) is taken to conflict, since the
// server made the session wait.
func lockModesConflict(wanted, held string) bool {
	c, ok := lockConflicts[wanted]
	if !ok {
		return true
	}
	if _, known := lockStrength[held]; !known {
		return true
	}
	return slices.Contains(c, held)
}
