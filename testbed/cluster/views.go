// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"fmt"
	"strings"
)

// Greenplum's own views of locks, spill and session memory, and the
// function that moves a session to another resource group, emulated with
// the real columns (dialects.go says where each list was read). The
// cluster-wide ones fan out to the segments the way Greenplum dispatches.

// lockColumns are PostgreSQL's pg_locks columns every dialect has, in order.
const lockColumns = "l.locktype, l.database, l.relation, l.page, l.tuple, l.virtualxid, l.transactionid, " +
	"l.classid, l.objid, l.objsubid, l.virtualtransaction, l.pid, l.mode, l.granted, l.fastpath"

// instanceViewsSQL is what every instance carries: its own locks, temporary
// files and session memory, each row tagged with the backend's sess_id.
func (c *Cluster) instanceViewsSQL() string {
	cat := c.catalog()
	waitstart := ""
	if cat.locksHaveWaitstart {
		waitstart = ", l.waitstart"
	}
	return fmt.Sprintf(`
ALTER VIEW pg_catalog.pg_locks SET SCHEMA %[1]s;
CREATE VIEW %[1]s.local_locks AS
SELECT %[2]s%[3]s, coalesce(a.sess_id, 0) AS mppsessionid, true AS mppiswriter, %[1]s.content_id() AS gp_segment_id
FROM %[1]s.pg_locks l LEFT JOIN %[1]s.activity a ON a.pid = l.pid;
CREATE VIEW pg_catalog.pg_locks AS SELECT * FROM %[1]s.local_locks;
GRANT SELECT ON pg_catalog.pg_locks TO PUBLIC;

-- A backend's temporary files (its spill), in the default temporary
-- directory and in %[4]s's, where the workloads put theirs, with the
-- command count its title shows (0: none): Greenplum records the count of
-- the statement that made a workfile, and an executor holding one is
-- running that statement.
CREATE FUNCTION %[1]s.title_command_count(pid integer) RETURNS bigint
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog AS $fn$
  SELECT coalesce(substring(encode(pg_read_binary_file('/proc/' || pid || '/cmdline', 0, 1024, true), 'escape') FROM ' cmd([0-9]{1,9})[ \\]')::bigint, 0)
$fn$;
CREATE FUNCTION %[1]s.local_workfiles() RETURNS TABLE (sess_id integer, pid integer, command_cnt bigint, size bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog AS $fn$
  SELECT a.sess_id, a.pid, %[1]s.title_command_count(a.pid), f.size FROM (
    SELECT name, size FROM pg_ls_tmpdir()
    UNION ALL SELECT name, size FROM pg_ls_tmpdir((SELECT oid FROM pg_tablespace WHERE spcname = '%[4]s'))
  ) f JOIN %[1]s.activity a ON a.pid = substring(f.name FROM '^pgsql_tmp([0-9]+)\.')::integer
  WHERE a.sess_id > 0
$fn$;

-- Greenplum's vmem of a session's backends: what they allocated. The
-- emulation reads each backend's anonymous resident memory.
CREATE FUNCTION %[1]s.anonymous_kib(pid integer) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog AS $fn$
BEGIN
  RETURN coalesce(substring(pg_read_file('/proc/' || pid || '/status', 0, 8192, true) FROM 'RssAnon:\s+([0-9]+) kB')::bigint, 0);
END
$fn$;
CREATE FUNCTION %[1]s.local_session_memory()
  RETURNS TABLE (sess_id integer, vmem_mb integer, qe_count integer, active_qe_count integer, idle_start timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog AS $fn$
  SELECT a.sess_id, (sum(%[1]s.anonymous_kib(a.pid)) / 1024)::integer, count(*)::integer,
    (count(*) FILTER (WHERE a.state = 'active'))::integer,
    CASE WHEN bool_and(a.state IS DISTINCT FROM 'active') THEN max(a.state_change) END
  FROM %[1]s.activity a WHERE a.sess_id > 0 GROUP BY a.sess_id
$fn$;
`, internalSchema, lockColumns, waitstart, DiskTablespace)
}

// coordinatorViewsSQL adds the cluster-wide views: pg_locks with every
// segment's rows (Greenplum's coordinator dispatches it), the workfile
// views, the session-memory view and pg_resgroup_move_query.
func (c *Cluster) coordinatorViewsSQL() string {
	cat := c.catalog()
	var b strings.Builder
	fmt.Fprintf(&b, `
-- Greenplum keeps a relation's oid the same on every instance; the
-- testbed's instances made theirs apart, so a segment's row names its
-- relation and takes the coordinator's oid of that name.
CREATE OR REPLACE VIEW pg_catalog.pg_locks AS
  SELECT * FROM %[1]s.local_locks
  UNION ALL SELECT r.* FROM %[1]s.on_segments('SELECT l.*, l.relation::regclass::text AS relation_name FROM %[1]s.local_locks l') s,
    LATERAL json_populate_record(NULL::%[1]s.local_locks, (s.row_data::jsonb || jsonb_build_object('relation',
      coalesce(to_regclass(s.row_data->>'relation_name')::oid, (s.row_data->>'relation')::oid)))::json) r;

CREATE VIEW %[1]s.workfiles AS
  SELECT %[1]s.content_id() AS segid, w.sess_id, w.pid, w.command_cnt, w.size FROM %[1]s.local_workfiles() w
  UNION ALL SELECT s.content, r.sess_id, r.pid, r.command_cnt, r.size FROM %[1]s.on_segments('SELECT * FROM %[1]s.local_workfiles()') s,
    LATERAL json_to_record(s.row_data) AS r(sess_id integer, pid integer, command_cnt bigint, size bigint);
`, internalSchema)

	// Greenplum 6 names the session's coordinator backend in pid; 7 and
	// Cloudberry the process on the segment.
	pid := "a.pid"
	if !cat.workfilePIDIsCoordinators {
		pid = "w.pid"
	}
	fmt.Fprintf(&b, `
CREATE VIEW gp_toolkit.gp_workfile_usage_per_query AS
  SELECT a.datname, %[2]s AS pid, w.sess_id, w.command_cnt::integer AS command_cnt, a.usename, a.query, w.segid,
    sum(w.size)::numeric AS size, count(*) AS numfiles
  FROM %[1]s.workfiles w LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = w.sess_id
  GROUP BY a.datname, %[2]s, w.sess_id, w.command_cnt, a.usename, a.query, w.segid;
GRANT SELECT ON gp_toolkit.gp_workfile_usage_per_query TO PUBLIC;

CREATE VIEW gp_toolkit.gp_workfile_usage_per_segment AS
  SELECT c.content AS segid, coalesce(sum(w.size), 0)::numeric AS size,
    CASE WHEN count(w.size) > 0 THEN count(w.size) END AS numfiles
  FROM pg_catalog.gp_segment_configuration c LEFT JOIN %[1]s.workfiles w ON w.segid = c.content
  WHERE c.role = 'p' GROUP BY c.content;
GRANT SELECT ON gp_toolkit.gp_workfile_usage_per_segment TO PUBLIC;
`, internalSchema, pid)

	facts := c.Dialect.Facts()
	schema, _, _ := strings.Cut(facts.SessionMemoryView, ".")
	rsg := ""
	if cat.sessionMemoryHasGroups {
		rsg = "a.rsgid, a.rsgname, "
	}
	if schema != "gp_toolkit" {
		fmt.Fprintf(&b, "CREATE SCHEMA %[1]s;\nGRANT USAGE ON SCHEMA %[1]s TO PUBLIC;\n", schema)
	}
	fmt.Fprintf(&b, `
CREATE VIEW %[2]s AS
  WITH m AS (
    SELECT %[1]s.content_id() AS segid, * FROM %[1]s.local_session_memory()
    UNION ALL SELECT s.content, r.* FROM %[1]s.on_segments('SELECT * FROM %[1]s.local_session_memory()') s,
      LATERAL json_to_record(s.row_data) AS r(sess_id integer, vmem_mb integer, qe_count integer, active_qe_count integer, idle_start timestamptz)
  )
  SELECT a.datname, m.sess_id, %[3]sa.usename, a.query, m.segid, m.vmem_mb, false AS is_runaway,
    m.qe_count, m.active_qe_count, -1 AS dirty_qe_count, 0 AS runaway_vmem_mb, 0 AS runaway_command_cnt,
    coalesce(m.idle_start, '2000-01-01 00:00:00+00'::timestamptz) AS idle_start
  FROM m LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = m.sess_id;
GRANT SELECT ON %[2]s TO PUBLIC;
`, internalSchema, facts.SessionMemoryView, rsg)

	// Moving a session records its new group, which its pg_stat_activity
	// rows then show (testbed/README.md: the rsgid rule).
	fmt.Fprintf(&b, `
CREATE FUNCTION %[2]s.pg_resgroup_move_query(session_id integer, groupid text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  target oid;
BEGIN
  IF NOT (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
    RAISE EXCEPTION 'must be superuser to move query';
  END IF;
  SELECT g.oid INTO target FROM pg_catalog.pg_resgroup g WHERE g.rsgname = groupid;
  IF target IS NULL THEN
    RAISE EXCEPTION 'cannot find resource group "%%"', groupid;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a WHERE a.sess_id = session_id AND a.state = 'active') THEN
    RAISE EXCEPTION 'cannot find process: %%', session_id;
  END IF;
  INSERT INTO %[1]s.moved VALUES (session_id, target) ON CONFLICT (sess_id) DO UPDATE SET rsgid = EXCLUDED.rsgid;
  RETURN true;
END
$fn$;
`, internalSchema, facts.MoveQuerySchema)
	return b.String()
}
