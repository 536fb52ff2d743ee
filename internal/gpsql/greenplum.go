// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsql

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpotel/gpotel/internal/dialect"
)

// The figures Greenplum keeps itself (spill, lock waits, session memory),
// read on their own interval; each is read only where its guard says the
// server has it, and each statement's rows are small: one per session and
// segment, or one per waiting lock.

// hasRelation is a guard: does the server have this relation.
func hasRelation(name string) string {
	return fmt.Sprintf("SELECT to_regclass('%s') IS NOT NULL", name)
}

// Spill: current workfile bytes and files per session, command and segment.
const workfileView = "gp_toolkit.gp_workfile_usage_per_query"

// HasWorkfiles is the spill guard.
func HasWorkfiles(s Shape) string {
	if s.Dialect.Greenplum() {
		return hasRelation(workfileView)
	}
	// PostgreSQL lists a tablespace's temporary files to pg_monitor.
	return "SELECT has_function_privilege('pg_ls_tmpdir(oid)', 'execute')"
}

// Workfiles reads (sess_id, command count, segment, bytes, files). On
// PostgreSQL the files are pgsql_tmp<pid>.<n> in every tablespace's
// temporary directory, and the session is the backend's leader.
func Workfiles(s Shape) string {
	if s.Dialect.Greenplum() {
		return "SELECT sess_id::bigint, command_cnt::bigint, segid::bigint, size::bigint, numfiles::bigint FROM " + workfileView
	}
	session := "a.pid"
	if s.ActivityColumns["leader_pid"] {
		session = "coalesce(a.leader_pid, a.pid)"
	}
	return fmt.Sprintf(`SELECT %s::bigint, 0::bigint, -1::bigint, sum(f.size)::bigint, count(*)::bigint
FROM pg_tablespace t, LATERAL pg_ls_tmpdir(t.oid) f
JOIN pg_stat_activity a ON a.pid = substring(f.name FROM '^pgsql_tmp([0-9]+)[.]')::integer
WHERE t.spcname <> 'pg_global' GROUP BY 1`, session)
}

// MaxLockWaits bounds the waiting sessions LockWaits reads (the lowest
// session ids); it answers one row more when more wait.
const MaxLockWaits = 1000

// LockModes are PostgreSQL's table-level lock modes, weakest first; the
// same for every lock type.
var LockModes = []string{"AccessShareLock", "RowShareLock", "RowExclusiveLock", "ShareUpdateExclusiveLock",
	"ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"}

// lockConflicts is PostgreSQL's conflict table: the held modes each wanted
// mode waits for.
var lockConflicts = map[string][]string{
	"AccessShareLock":          {"AccessExclusiveLock"},
	"RowShareLock":             {"ExclusiveLock", "AccessExclusiveLock"},
	"RowExclusiveLock":         {"ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"},
	"ShareUpdateExclusiveLock": {"ShareUpdateExclusiveLock", "ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"},
	"ShareLock":                {"RowExclusiveLock", "ShareUpdateExclusiveLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"},
	"ShareRowExclusiveLock":    {"RowExclusiveLock", "ShareUpdateExclusiveLock", "ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"},
	"ExclusiveLock": {"RowShareLock", "RowExclusiveLock", "ShareUpdateExclusiveLock", "ShareLock", "ShareRowExclusiveLock",
		"ExclusiveLock", "AccessExclusiveLock"},
	"AccessExclusiveLock": {"AccessShareLock", "RowShareLock", "RowExclusiveLock", "ShareUpdateExclusiveLock", "ShareLock",
		"ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"},
}

// LockModesConflict tells whether a session wanting mode waits for one
// holding held; a mode the table does not know (another lock method's, or
// a Greenplum-specific one) is taken to conflict, since the server made
// the session wait.
func LockModesConflict(wanted, held string) bool {
	c, known := lockConflicts[wanted]
	return !known || !slices.Contains(LockModes, held) || slices.Contains(c, held)
}

// lockModeTables are the VALUES lists LockWaits joins: each mode's
// strength, and the (wanted, held) pairs of known modes that do not conflict.
func lockModeTables() (strength, compatible string) {
	var st, co []string
	for i, held := range LockModes {
		st = append(st, fmt.Sprintf("('%s', %d)", held, i+1))
		for _, wanted := range LockModes {
			if !LockModesConflict(wanted, held) {
				co = append(co, fmt.Sprintf("('%s', '%s')", wanted, held))
			}
		}
	}
	return strings.Join(st, ", "), strings.Join(co, ", ")
}

// LockWaits answers, for each session waiting for a lock, the one session
// holding a conflicting lock on the same object of the same instance:
// (waiting session, segment, wanted mode, lock type, schema-qualified
// relation, transaction id, holding session, held mode). Of several
// holders, a wait on the coordinator first (it names the statement's own
// lock), then the lowest segment, the strongest held mode, the lowest
// holding session. Greenplum's coordinator pg_locks holds every segment's
// rows, tagged with their session.
//
// Rows: one per waiting session, at most MaxLockWaits+1, so a queued ALTER
// TABLE behind hundreds of readers is one row, not waiters × holders. The
// object's lock tag is one text (NULLs empty, '|' between fields; no field
// holds a '|'), so the waiter-holder join is an equality a hash join takes,
// and only holders of an object someone waits for enter it. A session
// queued behind another waiter rather than a holder has no row.
func LockWaits(s Shape) string {
	session, segment, from := "mppsessionid", "gp_segment_id", "pg_locks"
	if !s.Dialect.Greenplum() {
		session, segment = "l.pid", "-1"
		if s.ActivityColumns["leader_pid"] {
			session = "coalesce(a.leader_pid, l.pid)"
		}
		from = "pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid"
	}
	strength, compatible := lockModeTables()
	return fmt.Sprintf(`WITH l AS (
  SELECT locktype, relation, transactionid, mode, granted, %[1]s AS session, %[2]s AS segment,
    concat(locktype, '|', database, '|', relation, '|', page, '|', tuple, '|', virtualxid, '|', transactionid, '|', classid, '|', objid, '|', objsubid) AS tag
  FROM %[3]s),
waiting AS (SELECT * FROM l WHERE NOT granted),
holding AS (SELECT * FROM l WHERE granted AND (tag, segment) IN (SELECT tag, segment FROM waiting)),
strength(mode, rank) AS (VALUES %[4]s),
compatible(wanted, held) AS (VALUES %[5]s),
blocked AS (
  SELECT DISTINCT ON (w.session) w.session, w.segment, w.mode, w.locktype, w.relation, w.transactionid, h.session AS blocker, h.mode AS blocker_mode
  FROM waiting w JOIN holding h ON h.tag = w.tag AND h.segment = w.segment AND h.session <> w.session
  LEFT JOIN strength s ON s.mode = h.mode
  WHERE NOT EXISTS (SELECT 1 FROM compatible c WHERE c.wanted = w.mode AND c.held = h.mode)
  ORDER BY w.session, w.segment = -1 DESC, w.segment, coalesce(s.rank, 0) DESC, h.session)
SELECT b.session::bigint, b.segment::bigint, b.mode, b.locktype,
  (SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = b.relation),
  b.transactionid::text, b.blocker::bigint, b.blocker_mode
FROM blocked b ORDER BY b.session LIMIT %[6]d`, session, segment, from, strength, compatible, MaxLockWaits+1)
}

// HasSessionMemory is the session-memory guard.
func HasSessionMemory(s Shape) string {
	if v := s.Dialect.Facts().SessionMemoryView; v != "" {
		return hasRelation(v)
	}
	return ""
}

// SessionMemory reads (sess_id, segment, vmem MB, runaway, QEs, active QEs).
func SessionMemory(s Shape) string {
	if v := s.Dialect.Facts().SessionMemoryView; v != "" {
		return "SELECT sess_id::bigint, segid::bigint, vmem_mb::bigint, is_runaway, qe_count::bigint, active_qe_count::bigint FROM " + v
	}
	return ""
}

// SessionMemoryMissing says why a Greenplum server has no session memory view.
func SessionMemoryMissing(d dialect.Dialect) string {
	f := d.Facts()
	return f.SessionMemoryView + " is missing: CREATE EXTENSION " + f.SessionMemoryExtension + " in the database gpotel connects to"
}
