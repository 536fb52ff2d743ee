// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
)

// internalSchema holds what the compat objects are built from; nothing the
// receiver should name.
const internalSchema = "gpotel_testbed"

// Greenplum's built-in resource group oids.
const (
	rsgDefaultGroup = 6437
	rsgAdminGroup   = 6438
)

// Greenplum's built-in resource queue, every role's unless altered.
const (
	rsqDefaultQueue     = 6055
	rsqDefaultQueueName = "pg_default"
)

func (c *Cluster) catalog() dialectCatalog { return dialectCatalogs[c.Dialect] }

// DiskTablespace is on a disk-backed file system on every instance; the I/O
// workload puts its temp tables there.
const DiskTablespace = "gpotel_disk"

// installInstanceCatalog puts what every instance carries on one instance.
func (c *Cluster) installInstanceCatalog(ctx context.Context, in Instance) error {
	// CREATE TABLESPACE cannot run in the implicit transaction of a script.
	if err := execScript(ctx, in, fmt.Sprintf("CREATE TABLESPACE %s LOCATION %s", DiskTablespace, quoteLiteral(c.diskLocation(in)))); err != nil {
		return err
	}
	// An ordinary user for workloads: what it may do is what the workloads need.
	users := fmt.Sprintf(`CREATE ROLE %[1]s LOGIN;
GRANT CREATE ON TABLESPACE %[2]s TO %[1]s;
GRANT CREATE ON SCHEMA public TO %[1]s;`, UserRole, DiskTablespace)
	if err := execScript(ctx, in, users); err != nil {
		return err
	}
	if !c.Dialect.Greenplum() {
		return nil
	}
	return execScript(ctx, in, c.instanceSQL())
}

func (c *Cluster) diskLocation(in Instance) string {
	return filepath.Join(c.DiskDir, fmt.Sprintf("gpseg%d", in.Content))
}

// installCoordinatorCatalog adds the cluster-wide objects once every port is known.
func (c *Cluster) installCoordinatorCatalog(ctx context.Context) error {
	if !c.Dialect.Greenplum() {
		return nil
	}
	return execScript(ctx, c.Coordinator, c.coordinatorSQL())
}

func execScript(ctx context.Context, in Instance, sql string) error {
	conn, err := pgx.Connect(ctx, in.DSN)
	if err != nil {
		return fmt.Errorf("connect gpseg%d: %w", in.Content, err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("install compat catalog on gpseg%d: %w", in.Content, err)
	}
	return nil
}

// instanceSQL is what every instance carries: PostgreSQL's own objects that
// the dialect replaces or lacks moved out of pg_catalog, the dialect's
// pg_stat_activity, version() and gp_execution_segment() in their place, and
// the sess_id rule they are built on.
func (c *Cluster) instanceSQL() string {
	cat := c.catalog()
	var b strings.Builder
	fmt.Fprintf(&b, `
SET allow_system_table_mods = on;
CREATE SCHEMA %[1]s;
GRANT USAGE ON SCHEMA %[1]s TO PUBLIC;
ALTER VIEW pg_catalog.pg_stat_activity SET SCHEMA %[1]s;
ALTER FUNCTION pg_catalog.version() SET SCHEMA %[1]s;
`, internalSchema)
	// What the version lacks is renamed as well as moved: a probe of pg_proc
	// or pg_class by name alone must not find it.
	for _, v := range cat.absentViews {
		fmt.Fprintf(&b, "ALTER VIEW pg_catalog.%[1]s RENAME TO absent_%[1]s;\nALTER VIEW pg_catalog.absent_%[1]s SET SCHEMA %[2]s;\n", v, internalSchema)
	}
	for _, f := range cat.absentFunctions {
		name, args, _ := strings.Cut(f, "(")
		fmt.Fprintf(&b, "ALTER FUNCTION pg_catalog.%[1]s(%[2]s RENAME TO absent_%[1]s;\n"+
			"ALTER FUNCTION pg_catalog.absent_%[1]s(%[2]s SET SCHEMA %[3]s;\n", name, args, internalSchema)
	}
	fmt.Fprintf(&b, `
-- The content id of this instance (set in gpotel.conf).
CREATE FUNCTION %[1]s.content_id() RETURNS integer LANGUAGE sql STABLE
  AS $$ SELECT current_setting('gpotel.content_id')::integer $$;

-- Sessions moved to another resource group (pg_resgroup_move_query).
CREATE TABLE %[1]s.moved (sess_id integer PRIMARY KEY, rsgid oid NOT NULL);

-- The coordinator's session numbers, as Greenplum's gp_session_id, all from
-- one counter, the title extension's (it counts from above the kernel's
-- pid_max, so that no sess_id equals any pid): it numbers each client backend
-- when it connects (the number its title shows as con<N>, backend_sess_id,
-- kept after the backend exits until its slot is another's); a backend it
-- holds no number of gets the counter's next (next_sess_id) the first time
-- any statement reads its row. Kept by (pid, backend_start). A row is dropped
-- when its pid comes back as a new backend: the table holds at most one row per pid.
CREATE FUNCTION %[1]s.backend_sess_id(backend integer, started timestamptz) RETURNS integer
  LANGUAGE c STRICT VOLATILE AS %[9]s, 'gpotel_testbed_backend_sess_id';
CREATE FUNCTION %[1]s.next_sess_id() RETURNS integer
  LANGUAGE c VOLATILE AS %[9]s, 'gpotel_testbed_next_sess_id';
CREATE TABLE %[1]s.sessions (pid integer NOT NULL, backend_start timestamptz NOT NULL, sess_id integer NOT NULL,
  PRIMARY KEY (pid, backend_start));
CREATE FUNCTION %[1]s.session_of(backend integer, started timestamptz) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog AS $fn$
DECLARE
  id integer;
BEGIN
  IF backend IS NULL OR started IS NULL THEN
    RETURN 0;
  END IF;
  SELECT s.sess_id INTO id FROM %[1]s.sessions s WHERE s.pid = backend AND s.backend_start = started;
  IF FOUND THEN
    RETURN id;
  END IF;
  -- Statements that number backends take turns: two that met each other's
  -- new rows in different orders deadlocked (three churn workloads asking
  -- for their sess_ids at once). Held to the end of the transaction, so
  -- every row written is written by the holder.
  PERFORM pg_advisory_xact_lock(hashtext('%[1]s.sessions'));
  SELECT s.sess_id INTO id FROM %[1]s.sessions s WHERE s.pid = backend AND s.backend_start = started;
  IF FOUND THEN
    RETURN id;
  END IF;
  DELETE FROM %[1]s.sessions s WHERE s.pid = backend AND s.backend_start < started;
  INSERT INTO %[1]s.sessions VALUES (backend, started, coalesce(%[1]s.backend_sess_id(backend, started), %[1]s.next_sess_id())) ON CONFLICT DO NOTHING;
  SELECT s.sess_id INTO id FROM %[1]s.sessions s WHERE s.pid = backend AND s.backend_start = started;
  RETURN id;
END
$fn$;

-- PostgreSQL's pg_stat_activity plus the testbed's sess_id rule (testbed/README.md):
-- coordinator: a client backend's sess_id is the session counter's number
-- for it, a parallel worker's its leader's;
-- segment: the number tagged in application_name as '%[2]s<id>' (the leader's, for a parallel worker);
-- everything else: 0.
CREATE VIEW %[1]s.activity AS
WITH tagged AS (
  SELECT a.*,
    CASE
      WHEN a.backend_type NOT IN ('client backend', 'parallel worker') THEN 0
      WHEN %[1]s.content_id() = -1 THEN %[1]s.session_of(coalesce(a.leader_pid, a.pid), coalesce(l.backend_start, a.backend_start))
      ELSE coalesce(substring(coalesce(l.application_name, a.application_name) FROM '^%[2]s([0-9]+)')::integer, 0)
    END AS sess_id,
    regexp_replace(a.application_name, '^%[2]s[0-9]+ ?', '') AS app_name,
    CASE WHEN r.rolsuper THEN %[3]d WHEN r.oid IS NOT NULL THEN %[4]d ELSE 0 END::oid AS role_rsgid
  FROM %[1]s.pg_stat_activity a
  LEFT JOIN %[1]s.pg_stat_activity l ON l.pid = a.leader_pid
  LEFT JOIN pg_catalog.pg_roles r ON r.oid = a.usesysid
)
SELECT t.*, coalesce(m.rsgid, t.role_rsgid) AS rsgid, %[8]s AS rsgname
FROM tagged t LEFT JOIN %[1]s.moved m ON m.sess_id = t.sess_id AND t.sess_id > 0;

-- Any role may ask for its own sess_id (the activity view is not public).
CREATE FUNCTION %[1]s.my_sess_id() RETURNS integer LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog
  AS $$ SELECT coalesce((SELECT sess_id FROM %[1]s.activity WHERE pid = pg_backend_pid()), 0) $$;

-- Which instance executes the row: this one, or inside gp_dist_random the
-- segment whose row it is (%[5]s is set per row there).
CREATE FUNCTION pg_catalog.gp_execution_segment() RETURNS %[7]s LANGUAGE sql VOLATILE
  AS $$ SELECT coalesce(nullif(current_setting('%[5]s', true), '')::integer, %[1]s.content_id()) $$;

CREATE FUNCTION pg_catalog.version() RETURNS text LANGUAGE sql IMMUTABLE
  AS $$ SELECT %[6]s::text $$;
`, internalSchema, SessionTagPrefix, rsgAdminGroup, rsgDefaultGroup, executingContentSetting, quoteLiteral(cat.version), executionSegmentType(cat),
		groupNameOf("coalesce(m.rsgid, t.role_rsgid)"), quoteLiteral(c.TitleLibrary))

	exprs := make([]string, len(cat.activity))
	for i, cl := range cat.activity {
		exprs[i] = cl.expr + " AS " + cl.name
	}
	where := ""
	if cat.onlyClientBackends {
		where = "\nWHERE a.backend_type = 'client backend'"
	}
	fmt.Fprintf(&b, "\nCREATE VIEW pg_catalog.pg_stat_activity AS\nSELECT %s\nFROM %s.activity a%s;\nGRANT SELECT ON pg_catalog.pg_stat_activity TO PUBLIC;\n",
		strings.Join(exprs, ",\n  "), internalSchema, where)
	b.WriteString(c.instanceViewsSQL())
	return b.String()
}

func executionSegmentType(cat dialectCatalog) string {
	if cat.executionSegmentIsASet {
		return "SETOF integer"
	}
	return "integer"
}

// executingContentSetting carries the content id of the gp_dist_random row
// being read to gp_execution_segment(), for the rest of the transaction at most.
const executingContentSetting = "gpotel.executing_content"

// coordinatorSQL adds gp_segment_configuration, the resource groups and
// gp_dist_random (and gp_stat_activity where the dialect has it).
func (c *Cluster) coordinatorSQL() string {
	cat := c.catalog()
	var b strings.Builder
	fmt.Fprintf(&b, `
SET allow_system_table_mods = on;
CREATE EXTENSION dblink SCHEMA %[1]s;

CREATE TABLE pg_catalog.gp_segment_configuration (
  dbid smallint NOT NULL, content smallint NOT NULL, role "char" NOT NULL, preferred_role "char" NOT NULL,
  mode "char" NOT NULL, status "char" NOT NULL, port integer NOT NULL,
  hostname text, address text, datadir text);
GRANT SELECT ON pg_catalog.gp_segment_configuration TO PUBLIC;
`, internalSchema)
	var rows []string
	for _, in := range c.Instances() {
		mode := "n"
		for _, r := range c.CatalogOnly {
			if r.Role == "m" && r.Content == in.Content {
				mode = "s"
			}
		}
		rows = append(rows, fmt.Sprintf("(%d, %d, 'p', 'p', '%s', 'u', %d, %s, %[5]s, %s)",
			in.DBID, in.Content, mode, in.Port, quoteLiteral(in.Host), quoteLiteral(in.DataDir)))
	}
	for _, r := range c.CatalogOnly {
		rows = append(rows, fmt.Sprintf("(%d, %d, '%s', '%s', '%s', '%s', %d, %s, %[8]s, %s)",
			r.DBID, r.Content, r.Role, r.PreferredRole, r.Mode, r.Status, r.Port, quoteLiteral(r.Hostname), quoteLiteral(r.DataDir)))
	}
	fmt.Fprintf(&b, "INSERT INTO pg_catalog.gp_segment_configuration VALUES\n  %s;\n", strings.Join(rows, ",\n  "))

	// The resource groups: pg_resgroup names each oid, as Greenplum's catalog
	// does, and gp_toolkit.gp_resgroup_config shows them with their settings.
	groups := make([]string, len(ResourceGroups))
	for i, g := range ResourceGroups {
		groups[i] = fmt.Sprintf("(%d, %s, 0)", g.OID, quoteLiteral(g.Name))
	}
	fmt.Fprintf(&b, `
CREATE TABLE pg_catalog.pg_resgroup (oid oid NOT NULL, rsgname name NOT NULL, parent oid NOT NULL);
INSERT INTO pg_catalog.pg_resgroup VALUES %[1]s;
GRANT SELECT ON pg_catalog.pg_resgroup TO PUBLIC;
CREATE SCHEMA gp_toolkit;
GRANT USAGE ON SCHEMA gp_toolkit TO PUBLIC;
CREATE VIEW gp_toolkit.gp_resgroup_config AS
  SELECT oid AS groupid, rsgname AS groupname, '20'::text AS concurrency FROM pg_catalog.pg_resgroup;
GRANT SELECT ON gp_toolkit.gp_resgroup_config TO PUBLIC;
`, strings.Join(groups, ", "))

	// The resource queues, as Greenplum 6's pg_resqueue (an oid column here,
	// a system column there), and each role's in pg_roles.rolresqueue:
	// pg_default unless AssignResourceQueue put it in another (roles_queue).
	fmt.Fprintf(&b, `
CREATE TABLE pg_catalog.pg_resqueue (oid oid NOT NULL PRIMARY KEY, rsqname name NOT NULL UNIQUE, rsqcountlimit real NOT NULL,
  rsqcostlimit real NOT NULL, rsqovercommit boolean NOT NULL, rsqignorecostlimit real NOT NULL);
INSERT INTO pg_catalog.pg_resqueue VALUES (%[2]d, %[3]s, 20, -1, false, 0);
GRANT SELECT ON pg_catalog.pg_resqueue TO PUBLIC;
CREATE TABLE %[1]s.role_queue (role oid PRIMARY KEY, queue oid NOT NULL REFERENCES pg_catalog.pg_resqueue);
ALTER VIEW pg_catalog.pg_roles SET SCHEMA %[1]s;
CREATE VIEW pg_catalog.pg_roles AS
  SELECT r.rolname, r.rolsuper, r.rolinherit, r.rolcreaterole, r.rolcreatedb, r.rolcanlogin, r.rolreplication, r.rolconnlimit,
    r.rolpassword, r.rolvaliduntil, r.rolbypassrls, r.rolconfig, coalesce(q.queue, %[2]d)::oid AS rolresqueue, r.oid
  FROM %[1]s.pg_roles r LEFT JOIN %[1]s.role_queue q ON q.role = r.oid;
GRANT SELECT ON pg_catalog.pg_roles TO PUBLIC;
`, internalSchema, rsqDefaultQueue, quoteLiteral(rsqDefaultQueueName))

	names := make([]string, len(cat.activity))
	for i, cl := range cat.activity {
		names[i] = cl.name
	}
	// on_segments opens one connection per up primary, sends the statement to
	// all at once (like a Greenplum gang) and tags each with the caller's
	// sess_id; every row comes back as JSON, for the caller to type.
	fmt.Fprintf(&b, `
CREATE FUNCTION %[1]s.on_segments(statement text) RETURNS TABLE (content integer, row_data json)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  seg record;
  conns text[] := '{}';
  contents integer[] := '{}';
  conn text;
  sess integer := %[1]s.my_sess_id();
  -- Segment backends carry the caller's sess_id and application_name, as
  -- Greenplum's QEs do (quotes and backslashes dropped for the conninfo).
  appname text := rtrim(left('%[2]s' || sess || ' ' || translate(current_setting('application_name'), '''\', ''), 63));
  -- The executors show the dispatcher's command count (the title extension).
  dispatched integer := current_setting('%[5]s')::integer;
BEGIN
  BEGIN
    FOR seg IN SELECT c.content, c.port FROM pg_catalog.gp_segment_configuration c
               WHERE c.content >= 0 AND c.role = 'p' AND c.status = 'u' ORDER BY c.content LOOP
      -- Unique per call: one statement may fan out more than once.
      conn := format('gpotel_gang_%%s_%%s', floor(random() * 1e12)::bigint, seg.content);
      PERFORM %[1]s.dblink_connect(conn, format('host=127.0.0.1 port=%%s dbname=%%s user=%%s application_name=''%%s'' options=''-c %[6]s=%%s''',
        seg.port, current_database(), current_user, appname, dispatched));
      conns := conns || conn;
      contents := contents || seg.content;
      PERFORM %[1]s.dblink_send_query(conn, format('SELECT row_to_json(t)::text FROM (%%s) t', statement));
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(conns, 1), 0) LOOP
      RETURN QUERY SELECT contents[i], r.j::json FROM %[1]s.dblink_get_result(conns[i]) AS r(j text);
    END LOOP;
  EXCEPTION WHEN OTHERS THEN
    FOREACH conn IN ARRAY conns LOOP
      PERFORM %[1]s.dblink_disconnect(conn);
    END LOOP;
    RAISE;
  END;
  FOREACH conn IN ARRAY conns LOOP
    PERFORM %[1]s.dblink_disconnect(conn);
  END LOOP;
END
$fn$;

CREATE TYPE %[1]s.dist_row AS (content integer, %[3]s);

CREATE FUNCTION %[1]s.dist_rows(relation text) RETURNS SETOF %[1]s.dist_row
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
  IF lower(relation) NOT IN ('pg_stat_activity', 'pg_catalog.pg_stat_activity') THEN
    RAISE EXCEPTION 'gp_dist_random: the gpotel testbed only distributes pg_stat_activity, not %%', relation;
  END IF;
  RETURN QUERY SELECT s.content, r.* FROM %[1]s.on_segments('SELECT * FROM pg_catalog.pg_stat_activity') s,
    LATERAL json_populate_record(NULL::pg_catalog.pg_stat_activity, s.row_data) r;
  -- my_sess_id() froze this transaction's view of the local backends before
  -- the segments were asked; the coordinator's own rows (a UNION ALL branch
  -- after this) must be read now, as Greenplum's coordinator does.
  PERFORM pg_stat_clear_snapshot();
END
$fn$;

-- Sets what gp_execution_segment() returns to the row's content id (NULL:
-- the instance's own again) and keeps only real rows. The lowest cost puts
-- it before any other condition on the row, so it runs for every row read.
CREATE FUNCTION %[1]s.executing_on(content integer) RETURNS boolean
LANGUAGE plpgsql VOLATILE COST 0.0001 AS $fn$
BEGIN
  PERFORM set_config('%[4]s', coalesce(content::text, ''), true);
  RETURN content IS NOT NULL;
END
$fn$;

`, internalSchema, SessionTagPrefix, strings.Join(activityDefs(cat.activity), ", "), executingContentSetting,
		CommandCountSetting, DispatchCommandCountSetting)
	b.WriteString(c.DistRandomSQL("pg_catalog", internalSchema+".dist_rows(relation)"))

	if cat.clusterActivity {
		fmt.Fprintf(&b, `
CREATE VIEW pg_catalog.gp_stat_activity AS
  SELECT pg_catalog.gp_execution_segment() AS gp_segment_id, %[1]s FROM pg_catalog.gp_dist_random('pg_stat_activity')
  UNION ALL SELECT -1, %[1]s FROM pg_catalog.pg_stat_activity;
GRANT SELECT ON pg_catalog.gp_stat_activity TO PUBLIC;
`, strings.Join(names, ", "))
	}
	b.WriteString(c.coordinatorViewsSQL())
	return b.String()
}

// DistRandomSQL defines schema.gp_dist_random(relation text) over source: a
// relation or set-returning call whose rows are a content id followed by the
// dialect's pg_stat_activity columns. gp_dist_random returns the view's own
// columns, as Greenplum's does; each row, as the caller reads it, sets the
// content id gp_execution_segment() returns, and a last row that is never
// returned resets it. The SQL function is inlined into the calling query, so
// that happens row by row in the caller's own scan: an expression evaluated
// after something has read every row first (a sort or hash of the rows
// before the expression) would see the last segment's id, where Greenplum
// evaluates it on the segment.
func (c *Cluster) DistRandomSQL(schema, source string) string {
	cols := c.catalog().activity
	names := make([]string, len(cols))
	nulls := make([]string, len(cols))
	for i, cl := range cols {
		names[i] = cl.name
		nulls[i] = "NULL::" + cl.sqlType
	}
	return fmt.Sprintf(`
CREATE FUNCTION %[1]s.gp_dist_random(relation text) RETURNS SETOF pg_catalog.pg_stat_activity
LANGUAGE sql STABLE AS $fn$
  SELECT %[3]s FROM (
    SELECT * FROM %[2]s
    UNION ALL SELECT NULL::integer, %[4]s
  ) d WHERE %[5]s.executing_on(d.content)
$fn$;
`, schema, source, strings.Join(names, ", "), strings.Join(nulls, ", "), internalSchema)
}

// groupNameOf is the name of the built-in resource group whose oid expr is.
func groupNameOf(expr string) string {
	whens := make([]string, len(ResourceGroups))
	for i, g := range ResourceGroups {
		whens[i] = fmt.Sprintf("WHEN %d THEN %s", g.OID, quoteLiteral(g.Name))
	}
	return fmt.Sprintf("CASE %s %s END", expr, strings.Join(whens, " "))
}

func activityDefs(cols []activityColumn) []string {
	defs := make([]string, len(cols))
	for i, cl := range cols {
		defs[i] = cl.name + " " + cl.sqlType
	}
	return defs
}

func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// AssignResourceQueue does on the coordinator what Greenplum's CREATE
// RESOURCE QUEUE (when queue is new) and ALTER ROLE … RESOURCE QUEUE do to
// its catalog, which PostgreSQL cannot parse: role's pg_roles.rolresqueue
// then names queue's pg_resqueue row.
func (c *Cluster) AssignResourceQueue(ctx context.Context, role, queue string) error {
	if !c.Dialect.Greenplum() {
		return fmt.Errorf("dialect %s has no resource queues", c.Dialect)
	}
	sql := fmt.Sprintf(`SET allow_system_table_mods = on;
INSERT INTO pg_catalog.pg_resqueue SELECT coalesce(max(oid::bigint), %[4]d) + 1, %[2]s, 20, -1, false, 0 FROM pg_catalog.pg_resqueue
  WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_resqueue WHERE rsqname = %[2]s);
INSERT INTO %[1]s.role_queue SELECT %[3]s::regrole, oid FROM pg_catalog.pg_resqueue WHERE rsqname = %[2]s
  ON CONFLICT (role) DO UPDATE SET queue = excluded.queue;`, internalSchema, quoteLiteral(queue), quoteLiteral(role), rsqDefaultQueue)
	return execScript(ctx, c.Coordinator, sql)
}
