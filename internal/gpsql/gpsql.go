// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package gpsql holds every SQL statement gpotel sends to a database, per
// dialect, and the table that lists them. Nothing else in gpotel writes
// SQL: a conformance test runs every entry of Statements against each
// emulated dialect of the testbed, and docs/compatibility.md says which ran
// on a real server.
package gpsql

import (
	"fmt"
	"strings"

	"github.com/gpotel/gpotel/internal/dialect"
)

// Shape is what the text of a statement depends on: the dialect, the
// columns the server's pg_stat_activity has, and how much query text the
// receiver is configured to read.
type Shape struct {
	Dialect         dialect.Dialect
	ActivityColumns map[string]bool
	QueryMaxLength  int
}

// Statements read once per coordinator life or per scrape.
const (
	// Version identifies the server's flavour.
	Version = `SELECT pg_catalog.version()`
	// PostmasterStart is the coordinator's start time, gpotel's tm_id.
	PostmasterStart = `SELECT extract(epoch FROM pg_catalog.pg_postmaster_start_time())::bigint`
	// ActivityColumns names the columns of the pg_stat_activity the search path resolves to.
	ActivityColumns = `SELECT attname::text FROM pg_attribute WHERE attrelid = 'pg_stat_activity'::regclass AND attnum > 0 AND NOT attisdropped`
	// SegmentConfiguration lists every instance of a Greenplum-family cluster.
	SegmentConfiguration = `SELECT content::bigint, role::text, status::text, hostname::text FROM gp_segment_configuration`
	// ResourceGroups names every resource group (Greenplum 6, 7 and Cloudberry).
	ResourceGroups = `SELECT oid::bigint, rsgname::text FROM pg_resgroup`
	// RoleResourceQueues names the resource queue of every role with a
	// session on the coordinator (Greenplum 6, 7 and Cloudberry): as many
	// rows as the sessions' roles, never the whole of pg_roles.
	RoleResourceQueues = `SELECT r.rolname::text, q.rsqname::text FROM pg_roles r JOIN pg_resqueue q ON q.oid = r.rolresqueue` +
		` WHERE r.rolname IN (SELECT usename FROM pg_stat_activity)`
	// HasResourceGroupBypass tells whether the server has gp_resource_group_bypass.
	HasResourceGroupBypass = `SELECT count(*) > 0 FROM pg_settings WHERE name = 'gp_resource_group_bypass'` //nolint:gosec // G101: "bypass", not a credential
	// SetResourceGroupBypass keeps gpotel's catalog reads out of resource-group
	// queues; sent only where HasResourceGroupBypass says the setting exists.
	SetResourceGroupBypass = `SET gp_resource_group_bypass = on` //nolint:gosec // G101: "bypass", not a credential
)

// SessionColumns are the pg_stat_activity columns the session statement
// reads, in its order; each is read when the server has it and is NULL
// otherwise, so one text fits every dialect and version.
var SessionColumns = []struct {
	Name string
	expr string // how to read it when present; %s is the column
}{
	{"pid", "%s::bigint"},
	{"sess_id", "%s::bigint"},
	{"leader_pid", "%s::bigint"},
	{"datname", "%s::text"},
	{"usename", "%s::text"},
	{"application_name", "%s::text"},
	{"client_addr", "host(%s)"},
	{"client_hostname", "%s::text"},
	{"client_port", "%s::bigint"},
	{"backend_start", "%s"},
	{"xact_start", "%s"},
	{"query_start", "%s"},
	{"state_change", "%s"},
	{"state", "%s::text"},
	{"waiting", "%s::boolean"},
	{"waiting_reason", "%s::text"},
	{"wait_event_type", "%s::text"},
	{"wait_event", "%s::text"},
	{"backend_type", "%s::text"},
	{"backend_xid", "%s::text"},
	{"backend_xmin", "%s::text"},
	{"rsgid", "%s::bigint"},
	{"rsgname", "%s::text"},
	{"rsgqueueduration", "%s::text"},
	{"query", ""}, // built by Sessions: cut on the server to bound the transfer
}

var sessionColumnTypes = map[string]string{
	"pid": "bigint", "sess_id": "bigint", "leader_pid": "bigint", "client_port": "bigint", "rsgid": "bigint",
	"backend_start": "timestamptz", "xact_start": "timestamptz", "query_start": "timestamptz", "state_change": "timestamptz",
	"waiting": "boolean",
}

// Sessions reads every coordinator pg_stat_activity row with the columns
// the server has. QueryMaxLength+1 characters of the query text are fetched
// so that truncation can be told; 0 reads no text.
func Sessions(s Shape) string {
	queryMax := s.QueryMaxLength
	exprs := make([]string, 0, len(SessionColumns))
	for _, c := range SessionColumns {
		switch {
		case c.Name == "query" && s.ActivityColumns["query"] && queryMax > 0:
			exprs = append(exprs, fmt.Sprintf("left(query, %d)", queryMax+1))
		case c.Name != "query" && s.ActivityColumns[c.Name]:
			exprs = append(exprs, fmt.Sprintf(c.expr, c.Name))
		default:
			typ := sessionColumnTypes[c.Name]
			if typ == "" {
				typ = "text"
			}
			exprs = append(exprs, "NULL::"+typ)
		}
	}
	return "SELECT " + strings.Join(exprs, ", ") + " FROM pg_stat_activity"
}

// Backends lists every backend of the cluster as (segment, pid, sess_id,
// backend_type). On the Greenplum family the segments' rows come through
// gp_dist_random, which reads the view on every primary; a view has no
// gp_segment_id column, so the segment is gp_execution_segment(), evaluated
// on the segment that produces the row (the way Greenplum 7's and
// Cloudberry's own gp_stat_activity is built, and the one text that runs on
// Greenplum 6 too).
func Backends(s Shape) string {
	backendType := "NULL::text"
	if s.ActivityColumns["backend_type"] {
		backendType = "backend_type::text"
	}
	if !s.Dialect.Greenplum() {
		sess := "pid::bigint"
		if s.ActivityColumns["leader_pid"] {
			sess = "coalesce(leader_pid, pid)::bigint"
		}
		return fmt.Sprintf("SELECT -1::bigint, pid::bigint, %s, %s FROM pg_stat_activity", sess, backendType)
	}
	return fmt.Sprintf("SELECT gp_execution_segment()::bigint, pid::bigint, coalesce(sess_id, 0)::bigint, %[1]s FROM gp_dist_random('pg_stat_activity')"+
		" UNION ALL SELECT -1::bigint, pid::bigint, coalesce(sess_id, 0)::bigint, %[1]s FROM pg_stat_activity", backendType)
}
