// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsql

import "fmt"

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
	if IsGreenplumFamily(s.Dialect) {
		return hasRelation(workfileView)
	}
	// PostgreSQL lists a tablespace's temporary files to pg_monitor.
	return "SELECT has_function_privilege('pg_ls_tmpdir(oid)', 'execute')"
}

// Workfiles reads (sess_id, command count, segment, bytes, files). On
// PostgreSQL the files are pgsql_tmp<pid>.<n> in every tablespace's
// temporary directory, and the session is the backend's leader.
func Workfiles(s Shape) string {
	if IsGreenplumFamily(s.Dialect) {
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

// LockWaits pairs every lock a session waits for with the granted locks of
// other sessions on the same object of the same instance: (waiting
// session, segment, wanted mode, lock type, schema-qualified relation,
// transaction id, holding session, held mode). Which held modes conflict
// with the wanted one is decided by the reader. Greenplum's coordinator
// pg_locks holds every segment's rows, tagged with their session.
func LockWaits(s Shape) string {
	session, segment, from := "mppsessionid", "gp_segment_id", "pg_locks"
	if !IsGreenplumFamily(s.Dialect) {
		session, segment = "l.pid", "-1"
		if s.ActivityColumns["leader_pid"] {
			session = "coalesce(a.leader_pid, l.pid)"
		}
		from = "pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid"
	}
	same := ""
	for _, c := range []string{"database", "relation", "page", "tuple", "virtualxid", "transactionid", "classid", "objid", "objsubid"} {
		same += fmt.Sprintf(" AND h.%[1]s IS NOT DISTINCT FROM w.%[1]s", c)
	}
	return fmt.Sprintf(`WITH l AS (SELECT locktype, database, relation, page, tuple, virtualxid, transactionid, classid, objid, objsubid,
  mode, granted, %s AS session, %s AS segment FROM %s)
SELECT w.session::bigint, w.segment::bigint, w.mode, w.locktype,
  (SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = w.relation),
  w.transactionid::text, h.session::bigint, h.mode
FROM l w JOIN l h ON NOT w.granted AND h.granted AND h.session <> w.session AND h.segment = w.segment
  AND h.locktype = w.locktype%s`, session, segment, from, same)
}

// sessionMemoryView is Greenplum's per-session vmem by segment:
// gp_internal_tools' on Greenplum 6 (after CREATE EXTENSION
// gp_internal_tools), gp_toolkit's on 7 and Cloudberry.
func sessionMemoryView(dialect string) string {
	switch dialect {
	case GP6:
		return "session_state.session_level_memory_consumption"
	case GP7, Cloudberry:
		return "gp_toolkit.resgroup_session_level_memory_consumption"
	}
	return ""
}

// HasSessionMemory is the session-memory guard.
func HasSessionMemory(s Shape) string {
	if v := sessionMemoryView(s.Dialect); v != "" {
		return hasRelation(v)
	}
	return ""
}

// SessionMemory reads (sess_id, segment, vmem MB, runaway, QEs, active QEs).
func SessionMemory(s Shape) string {
	if v := sessionMemoryView(s.Dialect); v != "" {
		return "SELECT sess_id::bigint, segid::bigint, vmem_mb::bigint, is_runaway, qe_count::bigint, active_qe_count::bigint FROM " + v
	}
	return ""
}

// SessionMemoryMissing says why a Greenplum server has no session memory view.
func SessionMemoryMissing(dialect string) string {
	if dialect == GP6 {
		return "session_state.session_level_memory_consumption is missing: CREATE EXTENSION gp_internal_tools in the database gpotel connects to"
	}
	return sessionMemoryView(dialect) + " is missing: CREATE EXTENSION gp_toolkit in the database gpotel connects to"
}
