// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsql

import "fmt"

// Actions on a session (yagpcc's ActionService), sent by the collector's API
// with their own role. Each names the session's coordinator backend as the
// newest snapshot saw it — $1 its pid, $2 its backend_start, $3 its session
// (sess_id on the Greenplum family, the pid itself on PostgreSQL) — and acts
// in the same statement, only while the server still shows that backend
// under the pid: a pid the kernel gave to a later backend is left alone.
//
// Each answers one row while the pid is a backend — its backend_start, its
// session, its query_start, and what the action's function answered (NULL:
// not called, the pid names another backend, or another query) — and no
// row when the server has no backend of that pid. Seeing another backend's
// backend_start needs superuser or pg_read_all_stats: without it the start
// reads NULL and nothing is done.
func actOnBackend(s Shape, call, andAlso string) string {
	session := "pid"
	if s.Dialect.Greenplum() {
		session = "sess_id"
	}
	return fmt.Sprintf(`SELECT backend_start, %[1]s::bigint, query_start,
  CASE WHEN backend_start = $2::timestamptz AND %[1]s = $3::integer%[3]s THEN %[2]s END
FROM pg_stat_activity WHERE pid = $1::integer`, session, call, andAlso)
}

// CancelQuery cancels the statement the backend runs; with $4 (not NULL)
// only while it is the statement that started then, so a snapshot's query
// is never mistaken for the next one.
func CancelQuery(s Shape) string {
	return actOnBackend(s, "pg_cancel_backend(pid)", " AND ($4::timestamptz IS NULL OR query_start = $4::timestamptz)")
}

// TerminateSession ends the backend, and with it the session.
func TerminateSession(s Shape) string {
	return actOnBackend(s, "pg_terminate_backend(pid)", "")
}

// MoveToResourceGroup moves the running session to the resource group $4:
// gp_toolkit's function on Greenplum 6, pg_catalog's on 7 and Cloudberry;
// PostgreSQL has no resource groups.
func MoveToResourceGroup(s Shape) string {
	if schema := s.Dialect.Facts().MoveQuerySchema; schema != "" {
		return actOnBackend(s, schema+".pg_resgroup_move_query(sess_id, $4::text)", "")
	}
	return ""
}
