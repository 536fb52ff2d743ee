// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cluster

import "github.com/gpotel/gpotel/internal/dialect"

// What each emulated dialect's catalog offers, as data: the testbed offers
// exactly these columns and functions and hides what the real version lacks,
// so a statement the real server rejects fails on the testbed too. Each list
// says where it was read; docs/compatibility.md says what was checked on a
// real server.

// activityColumn is one column of a dialect's pg_stat_activity: its name,
// type, and how the testbed computes it from its internal activity view.
type activityColumn struct {
	name, sqlType, expr string
}

func col(name, sqlType string) activityColumn { return activityColumn{name, sqlType, "a." + name} }

// Columns every Greenplum-family pg_stat_activity starts with.
var (
	activityHead = []activityColumn{
		col("datid", "oid"), col("datname", "name"), col("pid", "integer"), col("sess_id", "integer"),
	}
	activityClient = []activityColumn{
		col("usesysid", "oid"), col("usename", "name"), {"application_name", "text", "a.app_name"},
		col("client_addr", "inet"), col("client_hostname", "text"), col("client_port", "integer"),
		col("backend_start", "timestamptz"), col("xact_start", "timestamptz"), col("query_start", "timestamptz"),
		col("state_change", "timestamptz"),
	}
	waitEvents = []activityColumn{col("wait_event_type", "text"), col("wait_event", "text")}
)

func columns(parts ...[]activityColumn) []activityColumn {
	var out []activityColumn
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// gp6Activity is Greenplum 6.24.3's pg_stat_activity, in order: read from a
// real 6.24.3 server (\d pg_stat_activity), the same as the view in its
// src/backend/catalog/system_views.sql. Only client backends are listed.
var gp6Activity = columns(activityHead, activityClient, []activityColumn{
	{"waiting", "boolean", "coalesce(a.wait_event_type = 'Lock', false)"},
	col("state", "text"), col("backend_xid", "xid"), col("backend_xmin", "xid"), col("query", "text"),
	{"waiting_reason", "text", "CASE WHEN a.wait_event_type = 'Lock' THEN 'lock' END"},
	col("rsgid", "oid"), col("rsgname", "text"), {"rsgqueueduration", "interval", "NULL::interval"},
})

// gp7Activity is Greenplum 7's pg_stat_activity (PostgreSQL 12 plus
// Greenplum's columns), in order: greenplum-db/gpdb-archive (the 7.x line),
// src/backend/catalog/system_views.sql, types from pg_proc.dat's
// pg_stat_get_activity (rsgid is int4 there). Every process is listed.
var gp7Activity = columns(activityHead, activityClient, waitEvents, []activityColumn{
	col("state", "text"), col("backend_xid", "xid"), col("backend_xmin", "xid"), col("query", "text"),
	col("backend_type", "text"), {"rsgid", "integer", "a.rsgid::integer"}, col("rsgname", "text"),
})

// cloudberryActivity is Apache Cloudberry's pg_stat_activity (PostgreSQL 14
// plus Greenplum's columns), in order: apache/cloudberry,
// src/backend/catalog/system_views.sql and pg_proc.dat (the order its
// gp_stat_activity documentation lists too). Every process is listed.
var cloudberryActivity = columns(activityHead, []activityColumn{col("leader_pid", "integer")}, activityClient, waitEvents, []activityColumn{
	col("state", "text"), col("backend_xid", "xid"), col("backend_xmin", "xid"), col("query_id", "bigint"),
	col("query", "text"), col("backend_type", "text"), {"rsgid", "integer", "a.rsgid::integer"}, col("rsgname", "text"),
})

// dialectCatalog is what the testbed installs for one Greenplum-family dialect.
type dialectCatalog struct {
	version  string
	activity []activityColumn
	// onlyClientBackends: pg_stat_activity lists client backends alone (PostgreSQL 9.4).
	onlyClientBackends bool
	// clusterActivity: pg_catalog.gp_stat_activity exists (gp_segment_id, then
	// every pg_stat_activity column; the coordinator's rows as -1).
	clusterActivity bool
	// executionSegmentIsASet: gp_execution_segment() returns SETOF int4 (Greenplum 6), not int4.
	executionSegmentIsASet bool
	// absentFunctions are PostgreSQL 15 functions (signatures) this version does not have.
	absentFunctions []string
	// absentViews are PostgreSQL 15 system views this version does not have.
	absentViews []string
	// locksHaveWaitstart: pg_locks has PostgreSQL 14's waitstart before
	// Greenplum's mppsessionid, mppiswriter and gp_segment_id.
	locksHaveWaitstart bool
	// workfilePIDIsCoordinators: gp_workfile_usage_per_query's pid is the
	// session's coordinator backend, not the process on the segment.
	workfilePIDIsCoordinators bool
	// sessionMemoryHasGroups: the dialect's session memory view
	// (dialect.Facts) has rsgid and rsgname after sess_id.
	sessionMemoryHasGroups bool
}

var dialectCatalogs = map[dialect.Dialect]dialectCatalog{
	dialect.GP6: {
		// The shape of a real 6.24.3 version() string.
		version: "PostgreSQL 9.4.26 (Greenplum Database 6.24.3 build commit:gpotel-testbed) on x86_64-unknown-linux-gnu, compiled by gcc (GCC) " +
			"6.4.0, 64-bit compiled on Jan 1 2024 00:00:00",
		activity:           gp6Activity,
		onlyClientBackends: true,
		// Its pg_proc entry (pg_proc_gp.h) returns a set.
		executionSegmentIsASet: true,
		// Checked on a real 6.24.3: pg_proc has neither function (PostgreSQL 9.6 and 14 added them).
		absentFunctions: []string{"pg_log_backend_memory_contexts(integer)", "pg_blocking_pids(integer)", "pg_get_backend_memory_contexts()"},
		absentViews:     []string{"pg_backend_memory_contexts"},
		// Read on a real 6.24.3: gp_toolkit's views, and gp_internal_tools'
		// session_state schema once the extension is created.
		workfilePIDIsCoordinators: true,
	},
	dialect.GP7: {
		version: "PostgreSQL 12.12 (Greenplum Database 7.1.0 build commit:gpotel-testbed) on x86_64-pc-linux-gnu, compiled by gcc (GCC) 8.5.0 20210514 " +
			"(Red Hat 8.5.0-18), 64-bit compiled on Jan 1 2024 00:00:00",
		activity: gp7Activity,
		// Greenplum 7 back-ported PostgreSQL 14's pg_log_backend_memory_contexts
		// and pg_backend_memory_contexts (its system_views.sql revokes the one
		// and defines the other), and has pg_blocking_pids (PostgreSQL 9.6).
		clusterActivity: true,
		// gpcontrib/gp_toolkit (1.3 and later) and pg_proc.dat.
		sessionMemoryHasGroups: true,
	},
	dialect.Cloudberry: {
		version: "PostgreSQL 14.4 (Apache Cloudberry 2.0.0-incubating build commit:gpotel-testbed) on x86_64-pc-linux-gnu, compiled by gcc (GCC) " +
			"11.4.1, 64-bit compiled on Jan 1 2025 00:00:00",
		activity:        cloudberryActivity,
		clusterActivity: true,
		// pg_proc.dat (waitstart from PostgreSQL 14), gpcontrib/gp_toolkit.
		locksHaveWaitstart:     true,
		sessionMemoryHasGroups: true,
	},
}
