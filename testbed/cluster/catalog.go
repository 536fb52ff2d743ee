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

// activityColumn is one column of a dialect's pg_stat_activity.
type activityColumn struct {
	name, sqlType, expr string
}

func col(name, sqlType string) activityColumn { return activityColumn{name, sqlType, "a." + name} }

// gp6Activity is Greenplum 6's pg_stat_activity (PostgreSQL 9.4 plus GP columns), in order.
var gp6Activity = []activityColumn{
	col("datid", "oid"), col("datname", "name"), col("pid", "integer"), col("sess_id", "integer"),
	col("usesysid", "oid"), col("usename", "name"), {"application_name", "text", "a.app_name"},
	col("client_addr", "inet"), col("client_hostname", "text"), col("client_port", "integer"),
	col("backend_start", "timestamptz"), col("xact_start", "timestamptz"), col("query_start", "timestamptz"),
	col("state_change", "timestamptz"), {"waiting", "boolean", "coalesce(a.wait_event_type = 'Lock', false)"},
	col("state", "text"), col("backend_xid", "xid"), col("backend_xmin", "xid"), col("query", "text"),
	{"waiting_reason", "text", "CASE WHEN a.wait_event_type = 'Lock' THEN 'lock' END"},
	col("rsgid", "oid"), col("rsgname", "text"), {"rsgqueueduration", "interval", "NULL::interval"},
}

// gp7Activity is Greenplum 7's pg_stat_activity (PostgreSQL 12 plus GP columns), in order.
var gp7Activity = []activityColumn{
	col("datid", "oid"), col("datname", "name"), col("pid", "integer"), col("sess_id", "integer"),
	col("usesysid", "oid"), col("usename", "name"), {"application_name", "text", "a.app_name"},
	col("client_addr", "inet"), col("client_hostname", "text"), col("client_port", "integer"),
	col("backend_start", "timestamptz"), col("xact_start", "timestamptz"), col("query_start", "timestamptz"),
	col("state_change", "timestamptz"), col("wait_event_type", "text"), col("wait_event", "text"),
	col("state", "text"), col("backend_xid", "xid"), col("backend_xmin", "xid"), col("query", "text"),
	col("backend_type", "text"), col("rsgid", "oid"), col("rsgname", "text"),
}

// versionStrings are what the compat version() returns, shaped like the real ones.
var versionStrings = map[Dialect]string{
	DialectGP6:        "PostgreSQL 9.4.26 (Greenplum Database 6.26.0 build commit:gpotel-testbed) on x86_64-unknown-linux-gnu, compiled by gcc (GCC) 6.4.0, 64-bit compiled on Jan 1 2024 00:00:00",
	DialectGP7:        "PostgreSQL 12.12 (Greenplum Database 7.1.0 build commit:gpotel-testbed) on x86_64-pc-linux-gnu, compiled by gcc (GCC) 8.5.0 20210514 (Red Hat 8.5.0-18), 64-bit compiled on Jan 1 2024 00:00:00",
	DialectCloudberry: "PostgreSQL 14.4 (Apache Cloudberry 2.0.0-incubating build commit:gpotel-testbed) on x86_64-pc-linux-gnu, compiled by gcc (GCC) 11.4.1, 64-bit compiled on Jan 1 2025 00:00:00",
}

func (c *Cluster) activityColumns() []activityColumn {
	if c.Dialect == DialectGP6 {
		return gp6Activity
	}
	return gp7Activity
}

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
	if c.Dialect == DialectPostgreSQL {
		return nil
	}
	return execScript(ctx, in, c.instanceSQL())
}

func (c *Cluster) diskLocation(in Instance) string {
	return filepath.Join(c.DiskDir, fmt.Sprintf("gpseg%d", in.Content))
}

// installCoordinatorCatalog adds the cluster-wide objects once every port is known.
func (c *Cluster) installCoordinatorCatalog(ctx context.Context) error {
	if c.Dialect == DialectPostgreSQL {
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

// instanceSQL is what every instance carries: the sess_id rule and the
// dialect's pg_stat_activity, version() and gp_execution_segment().
func (c *Cluster) instanceSQL() string {
	var b strings.Builder
	fmt.Fprintf(&b, `
CREATE SCHEMA %[1]s;
CREATE SCHEMA %[2]s;
GRANT USAGE ON SCHEMA %[1]s, %[2]s TO PUBLIC;
ALTER ROLE %[3]s SET search_path = %[1]s, pg_catalog, public;
ALTER ROLE %[8]s SET search_path = %[1]s, pg_catalog, public;

-- The content id of this instance (set in gpotel.conf).
CREATE FUNCTION %[2]s.content_id() RETURNS integer LANGUAGE sql STABLE
  AS $$ SELECT current_setting('gpotel.content_id')::integer $$;

-- pg_stat_activity plus the testbed's sess_id rule (testbed/README.md):
-- coordinator: a client backend's sess_id is its pid, a parallel worker's its leader's pid;
-- segment: the number tagged in application_name as '%[4]s<id>' (the leader's, for a parallel worker);
-- everything else: 0.
CREATE VIEW %[2]s.activity AS
SELECT a.*,
  CASE
    WHEN a.backend_type NOT IN ('client backend', 'parallel worker') THEN 0
    WHEN %[2]s.content_id() = -1 THEN coalesce(a.leader_pid, a.pid)
    ELSE coalesce(substring(coalesce(l.application_name, a.application_name) FROM '^%[4]s([0-9]+)')::integer, 0)
  END AS sess_id,
  regexp_replace(a.application_name, '^%[4]s[0-9]+ ?', '') AS app_name,
  CASE WHEN r.rolsuper THEN %[5]d WHEN r.oid IS NOT NULL THEN %[6]d ELSE 0 END::oid AS rsgid,
  CASE WHEN r.rolsuper THEN 'admin_group' WHEN r.oid IS NOT NULL THEN 'default_group' END AS rsgname
FROM pg_catalog.pg_stat_activity a
LEFT JOIN pg_catalog.pg_stat_activity l ON l.pid = a.leader_pid
LEFT JOIN pg_catalog.pg_roles r ON r.oid = a.usesysid;

CREATE FUNCTION %[2]s.my_sess_id() RETURNS integer LANGUAGE sql STABLE
  AS $$ SELECT coalesce((SELECT sess_id FROM %[2]s.activity WHERE pid = pg_backend_pid()), pg_backend_pid()) $$;

CREATE FUNCTION %[1]s.gp_execution_segment() RETURNS integer LANGUAGE sql STABLE
  AS $$ SELECT %[2]s.content_id() $$;

CREATE FUNCTION %[1]s.version() RETURNS text LANGUAGE sql IMMUTABLE
  AS $$ SELECT %[7]s::text $$;
`, CompatSchema, internalSchema, AdminRole, SessionTagPrefix, rsgAdminGroup, rsgDefaultGroup, quoteLiteral(versionStrings[c.Dialect]), UserRole)

	cols := c.activityColumns()
	exprs := make([]string, len(cols))
	for i, cl := range cols {
		exprs[i] = cl.expr + " AS " + cl.name
	}
	where := ""
	if c.Dialect == DialectGP6 {
		// PostgreSQL 9.4 listed only client backends.
		where = "\nWHERE a.backend_type = 'client backend'"
	}
	fmt.Fprintf(&b, "\nCREATE VIEW %s.pg_stat_activity AS\nSELECT %s\nFROM %s.activity a%s;\nGRANT SELECT ON %[1]s.pg_stat_activity TO PUBLIC;\n",
		CompatSchema, strings.Join(exprs, ",\n  "), internalSchema, where)
	return b.String()
}

// coordinatorSQL adds gp_segment_configuration and gp_dist_random.
func (c *Cluster) coordinatorSQL() string {
	var b strings.Builder
	fmt.Fprintf(&b, `
CREATE EXTENSION dblink SCHEMA %[2]s;

CREATE TABLE %[1]s.gp_segment_configuration (
  dbid smallint NOT NULL, content smallint NOT NULL, role "char" NOT NULL, preferred_role "char" NOT NULL,
  mode "char" NOT NULL, status "char" NOT NULL, port integer NOT NULL,
  hostname text, address text, datadir text);
GRANT SELECT ON %[1]s.gp_segment_configuration TO PUBLIC;
`, CompatSchema, internalSchema)
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
	fmt.Fprintf(&b, "INSERT INTO %s.gp_segment_configuration VALUES\n  %s;\n", CompatSchema, strings.Join(rows, ",\n  "))

	// The resource groups: pg_resgroup names each oid, as Greenplum's catalog
	// does, and gp_toolkit.gp_resgroup_config shows them with their settings.
	groups := make([]string, len(ResourceGroups))
	for i, g := range ResourceGroups {
		groups[i] = fmt.Sprintf("(%d, %s, 0)", g.OID, quoteLiteral(g.Name))
	}
	fmt.Fprintf(&b, `
CREATE TABLE %[1]s.pg_resgroup (oid oid NOT NULL, rsgname name NOT NULL, parent oid NOT NULL);
INSERT INTO %[1]s.pg_resgroup VALUES %[2]s;
GRANT SELECT ON %[1]s.pg_resgroup TO PUBLIC;
CREATE SCHEMA gp_toolkit;
GRANT USAGE ON SCHEMA gp_toolkit TO PUBLIC;
CREATE VIEW gp_toolkit.gp_resgroup_config AS
  SELECT oid AS groupid, rsgname AS groupname, 20 AS concurrency FROM %[1]s.pg_resgroup;
GRANT SELECT ON gp_toolkit.gp_resgroup_config TO PUBLIC;
`, CompatSchema, strings.Join(groups, ", "))

	cols := c.activityColumns()
	defs := make([]string, len(cols))
	names := make([]string, len(cols))
	for i, cl := range cols {
		defs[i] = cl.name + " " + cl.sqlType
		names[i] = cl.name
	}
	// gp_dist_random opens one connection per up primary, sends the query to all
	// at once (like a Greenplum gang) and tags each with the caller's sess_id.
	fmt.Fprintf(&b, `
CREATE TYPE %[2]s.dist_pg_stat_activity AS (gp_segment_id integer, %[3]s);

CREATE FUNCTION %[1]s.gp_dist_random(relation text) RETURNS SETOF %[2]s.dist_pg_stat_activity
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  seg record;
  conns text[] := '{}';
  contents integer[] := '{}';
  conn text;
  sess integer := %[2]s.my_sess_id();
  -- Segment backends carry the caller's sess_id and application_name, as
  -- Greenplum's QEs do (quotes and backslashes dropped for the conninfo).
  appname text := rtrim(left('%[5]s' || sess || ' ' || translate(current_setting('application_name'), '''\', ''), 63));
BEGIN
  IF lower(relation) NOT IN ('pg_stat_activity', 'pg_catalog.pg_stat_activity', '%[1]s.pg_stat_activity') THEN
    RAISE EXCEPTION 'gp_dist_random: the gpotel testbed only distributes pg_stat_activity, not %%', relation;
  END IF;
  BEGIN
    FOR seg IN SELECT content, port FROM %[1]s.gp_segment_configuration
               WHERE content >= 0 AND role = 'p' AND status = 'u' ORDER BY content LOOP
      conn := 'gpotel_gang_seg' || seg.content;
      PERFORM %[2]s.dblink_connect(conn, format('host=127.0.0.1 port=%%s dbname=%%s user=%%s application_name=''%%s''',
        seg.port, current_database(), current_user, appname));
      conns := conns || conn;
      contents := contents || seg.content;
      PERFORM %[2]s.dblink_send_query(conn, 'SELECT %[4]s FROM %[1]s.pg_stat_activity');
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(conns, 1), 0) LOOP
      RETURN QUERY SELECT contents[i], r.* FROM %[2]s.dblink_get_result(conns[i]) AS r(%[3]s);
    END LOOP;
  EXCEPTION WHEN OTHERS THEN
    FOREACH conn IN ARRAY conns LOOP
      PERFORM %[2]s.dblink_disconnect(conn);
    END LOOP;
    RAISE;
  END;
  FOREACH conn IN ARRAY conns LOOP
    PERFORM %[2]s.dblink_disconnect(conn);
  END LOOP;
  -- my_sess_id() above froze this transaction's view of the local backends
  -- before the segments were asked; the coordinator's own rows (the UNION ALL
  -- branch after this) must be read now, as Greenplum's coordinator does.
  PERFORM pg_stat_clear_snapshot();
END
$fn$;
`, CompatSchema, internalSchema, strings.Join(defs, ", "), strings.Join(names, ", "), SessionTagPrefix)
	return b.String()
}

func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
