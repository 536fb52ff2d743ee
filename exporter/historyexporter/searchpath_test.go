// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/gpotel/gpotel/internal/await"
)

// plantedFunctions are the functions and operators the history's
// statements call, planted in public by a database user: each records
// who ran it in public.planted, then does what the catalog's does. The
// first is a better-typed overload than any of pg_catalog's
// (current_database() is a name), chosen on any search_path with public;
// the others shadow pg_catalog's where the role's search_path puts public
// first.
var plantedFunctions = []struct{ signature, returns, body string }{
	{"has_database_privilege(name, text)", "boolean", "pg_catalog.has_database_privilege($1::text, $2)"},
	{"has_database_privilege(text, text)", "boolean", "pg_catalog.has_database_privilege($1, $2)"},
	{"has_schema_privilege(oid, text)", "boolean", "pg_catalog.has_schema_privilege($1, $2)"},
	{"current_database()", "name", "pg_catalog.current_database()"},
	{"current_setting(text)", "text", "pg_catalog.current_setting($1)"},
	{"version()", "text", "pg_catalog.version()"},
	{"pg_postmaster_start_time()", "timestamptz", "pg_catalog.pg_postmaster_start_time()"},
	{"pg_get_userbyid(oid)", "name", "pg_catalog.pg_get_userbyid($1)"},
	{"pg_has_role(oid, text)", "boolean", "pg_catalog.pg_has_role($1, $2)"},
	{"format_type(oid, integer)", "text", "pg_catalog.format_type($1, $2)"},
	{"planted_nameeq(name, name)", "boolean", "pg_catalog.nameeq($1, $2)"},
	{"planted_oideq(oid, oid)", "boolean", "pg_catalog.oideq($1, $2)"},
	{"planted_tsge(timestamptz, timestamptz)", "boolean", "pg_catalog.timestamptz_ge($1, $2)"},
	{"planted_tsle(timestamptz, timestamptz)", "boolean", "pg_catalog.timestamptz_le($1, $2)"},
}

// plantedOperators use the planted_ functions above.
var plantedOperators = []string{
	"CREATE OPERATOR public.= (LEFTARG = name, RIGHTARG = name, FUNCTION = public.planted_nameeq)",
	"CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = oid, FUNCTION = public.planted_oideq)",
	"CREATE OPERATOR public.>= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.planted_tsge)",
	"CREATE OPERATOR public.<= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.planted_tsle)",
}

// The history connection runs none of a database user's functions or
// operators, whatever the role's search_path: its statements name the
// catalog's, and the connection pins search_path. A planted function
// would run as the history role at every start (CVE-2018-1058).
func TestHistoryIgnoresTheRolesSearchPath(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	// The server's default ("$user", public) finds the better-typed
	// overload; a role's own may put public before pg_catalog.
	for _, path := range []string{"", "public, pg_catalog"} {
		t.Run(fmt.Sprintf("search_path=%q", path), func(t *testing.T) { ignoresSearchPath(t, path) })
	}
}

func ignoresSearchPath(t *testing.T, rolePath string) {
	db := startTestbedHistoryDB(t)
	ctx := await.Context(t)
	stmts := []string{
		"CREATE TABLE public.planted (who text, what text)",
		"GRANT INSERT ON public.planted TO PUBLIC",
	}
	for _, f := range plantedFunctions {
		stmts = append(stmts, fmt.Sprintf(`CREATE FUNCTION public.%s RETURNS %s LANGUAGE plpgsql AS $fn$
BEGIN
  INSERT INTO public.planted VALUES (current_user, %s);
  RETURN %s;
END $fn$`, f.signature, f.returns, quoteLiteral(f.signature), f.body))
	}
	stmts = append(stmts, plantedOperators...)
	if rolePath != "" {
		stmts = append(stmts, "ALTER ROLE gpotel_history SET search_path = "+rolePath)
	}
	for _, s := range stmts {
		if _, err := db.admin.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}

	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	e := startExporter(t, db.cfg, componenttest.NewNopHost(), tel, nil)
	if !e.store.ready {
		t.Fatal("the exporter did not set up its tables at start")
	}
	if err := e.consumeLogs(ctx, workload(0, 10, middayToday())); err != nil {
		t.Fatal(err)
	}
	db.awaitRows(t, "queries", 10)
	if err := e.shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	rows, err := db.admin.Query(ctx, "SELECT what, who, count(*) FROM public.planted GROUP BY what, who ORDER BY what")
	if err != nil {
		t.Fatal(err)
	}
	ran, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		What, Who string
		Times     int64
	}])
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ran {
		t.Errorf("the planted %s ran as %s, %d times", r.What, r.Who, r.Times)
	}
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
