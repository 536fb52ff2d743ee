// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsql

// Actions on a session (yagpcc's ActionService), sent by the collector's API
// with their own role; $1 is the session's coordinator backend pid, or its
// sess_id for a move.
const (
	// CancelQuery cancels the statement the backend runs.
	CancelQuery = `SELECT pg_cancel_backend($1::integer)`
	// CancelQueryStartedAt cancels it only while it is the statement that
	// started at $2 (no row otherwise), so a snapshot's query is never
	// mistaken for the next one; it needs query_start of other users'
	// sessions to be visible (superuser or pg_read_all_stats).
	CancelQueryStartedAt = `SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE pid = $1::integer AND query_start = $2::timestamptz`
	// TerminateSession ends the backend, and with it the session.
	TerminateSession = `SELECT pg_terminate_backend($1::integer)`
)

// MoveToResourceGroup moves a running session to another resource group
// ($1 sess_id, $2 group name): gp_toolkit's function on Greenplum 6,
// pg_catalog's on 7 and Cloudberry; PostgreSQL has no resource groups.
func MoveToResourceGroup(s Shape) string {
	switch s.Dialect {
	case GP6:
		return `SELECT gp_toolkit.pg_resgroup_move_query($1::integer, $2::text)`
	case GP7, Cloudberry:
		return `SELECT pg_catalog.pg_resgroup_move_query($1::integer, $2::text)`
	}
	return ""
}
