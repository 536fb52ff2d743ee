package gpsessionreceiver

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

var greenplumVersion = regexp.MustCompile(`Greenplum Database (\d+)\.`)

// detectDialect names the server's flavour from its version() string.
func detectDialect(version string) (string, error) {
	switch {
	case strings.Contains(version, "Cloudberry"):
		return DialectCloudberry, nil
	case strings.Contains(version, "Greenplum"):
		m := greenplumVersion.FindStringSubmatch(version)
		if m == nil {
			return "", fmt.Errorf("version() %q names Greenplum without a recognisable version", version)
		}
		major, _ := strconv.Atoi(m[1])
		switch {
		case major == 6:
			return DialectGP6, nil
		case major >= 7:
			return DialectGP7, nil
		default:
			return "", fmt.Errorf("version() %q: Greenplum %d is not supported (6 or later)", version, major)
		}
	case strings.HasPrefix(version, "PostgreSQL "):
		return DialectPostgreSQL, nil
	default:
		return "", fmt.Errorf("version() %q: not Greenplum, Cloudberry or PostgreSQL; set dialect explicitly", version)
	}
}

// isGreenplumFamily tells whether the dialect has segments and gp_dist_random.
func isGreenplumFamily(dialect string) bool { return dialect != DialectPostgreSQL }

// activityColumns is the subset of a server's pg_stat_activity columns the
// session query reads; each is selected when present and NULL otherwise, so
// one query text fits every dialect and version.
var sessionColumns = []struct {
	name string
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
	{"query", ""}, // built by sessionQuery: cut on the server to bound the transfer
}

var sessionColumnTypes = map[string]string{
	"pid": "bigint", "sess_id": "bigint", "leader_pid": "bigint", "client_port": "bigint", "rsgid": "bigint",
	"backend_start": "timestamptz", "xact_start": "timestamptz", "query_start": "timestamptz", "state_change": "timestamptz",
	"waiting": "boolean",
}

// sessionQuery reads every coordinator pg_stat_activity row with the columns
// the server has. queryMax+1 characters are fetched so truncation can be told.
func sessionQuery(present map[string]bool, queryMax int) string {
	exprs := make([]string, 0, len(sessionColumns))
	for _, c := range sessionColumns {
		switch {
		case c.name == "query" && present["query"] && queryMax > 0:
			exprs = append(exprs, fmt.Sprintf("left(query, %d)", queryMax+1))
		case c.name != "query" && present[c.name]:
			exprs = append(exprs, fmt.Sprintf(c.expr, c.name))
		default:
			typ := sessionColumnTypes[c.name]
			if typ == "" {
				typ = "text"
			}
			exprs = append(exprs, "NULL::"+typ)
		}
	}
	return "SELECT " + strings.Join(exprs, ", ") + " FROM pg_stat_activity"
}

// backendQuery lists every backend of the cluster as (segment, pid, sess_id, backend_type).
func backendQuery(dialect string, present map[string]bool) string {
	backendType := "NULL::text"
	if present["backend_type"] {
		backendType = "backend_type::text"
	}
	if !isGreenplumFamily(dialect) {
		sess := "pid::bigint"
		if present["leader_pid"] {
			sess = "coalesce(leader_pid, pid)::bigint"
		}
		return fmt.Sprintf("SELECT -1::bigint, pid::bigint, %s, %s FROM pg_stat_activity", sess, backendType)
	}
	return fmt.Sprintf("SELECT gp_segment_id::bigint, pid::bigint, coalesce(sess_id, 0)::bigint, %[1]s FROM gp_dist_random('pg_stat_activity')"+
		" UNION ALL SELECT -1::bigint, pid::bigint, coalesce(sess_id, 0)::bigint, %[1]s FROM pg_stat_activity", backendType)
}

const (
	// activityColumnsQuery names the columns of the pg_stat_activity the search path resolves to.
	activityColumnsQuery = `SELECT attname::text FROM pg_attribute WHERE attrelid = 'pg_stat_activity'::regclass AND attnum > 0 AND NOT attisdropped`
	versionQuery         = `SELECT version()`
	tmIDQuery            = `SELECT extract(epoch FROM pg_postmaster_start_time())::bigint`
	segmentConfigQuery   = `SELECT content::bigint, role::text, status::text, hostname::text FROM gp_segment_configuration`
	hasBypassGUCQuery    = `SELECT count(*) > 0 FROM pg_settings WHERE name = 'gp_resource_group_bypass'` //nolint:gosec // G101: "bypass", not a credential
	setBypassGUC         = `SET gp_resource_group_bypass = on`                                            //nolint:gosec // G101: "bypass", not a credential
)

// clientBackendTypes are the backend_type values of processes that work for a client session.
var clientBackendTypes = map[string]bool{"client backend": true, "parallel worker": true}

// isSystemProcess marks a process that does not work for a client session.
func isSystemProcess(sessionID int64, backendType string) bool {
	if sessionID <= 0 {
		return true
	}
	return backendType != "" && !clientBackendTypes[backendType]
}
