// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gpotel/gpotel/exporter/historyexporter/internal/metadatatest"
	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// gp6DSNVariable names a superuser connection to a real Greenplum 6
// (its coordinator, database postgres); with it the history tests run
// there too. The roles and the database the tests make are dropped and
// made anew on it.
const gp6DSNVariable = "GPOTEL_HISTORY_GP6_DSN"

// gp6StopVariable and gp6StartVariable name shell commands that stop and
// start that Greenplum 6 (e.g. /work/gp6/stop.sh); with both set the
// outage test stops it too.
const (
	gp6StopVariable  = "GPOTEL_HISTORY_GP6_STOP"
	gp6StartVariable = "GPOTEL_HISTORY_GP6_START"
)

// testPassword is every test role's.
const testPassword = "history-test"

// historyTarget is a server the history tests write into.
type historyTarget struct {
	name  string
	start func(t *testing.T) *historyDB
}

// historyDB is a server with the history role and database, granted as
// docs/operations.md says.
type historyDB struct {
	adminDSN string           // a superuser, on the server's maintenance database
	admin    *pgx.Conn        // a superuser, on the history database
	cfg      *Config          // the exporter's settings: the history role
	cluster  *cluster.Cluster // the testbed's; nil for a real server
	// stopServer and startServer stop and start the server; nil when the
	// tests may not (a real server without gp6StopVariable and gp6StartVariable).
	stopServer, startServer func(context.Context) error
}

// historyTargets are the testbed's PostgreSQL and, when configured, the
// real Greenplum 6. The testbed's Greenplum dialects are PostgreSQL 15
// underneath and cannot run Greenplum's DDL (docs/compatibility.md).
func historyTargets(t *testing.T) []historyTarget {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	targets := []historyTarget{{name: "postgresql", start: func(t *testing.T) *historyDB { return startTestbedHistoryDB(t) }}}
	if dsn := os.Getenv(gp6DSNVariable); dsn != "" {
		targets = append(targets, historyTarget{name: "gp6 (real)", start: func(t *testing.T) *historyDB { return startRealHistoryDB(t, dsn) }})
	} else {
		t.Logf("%s is not set: the real Greenplum 6 is not written to", gp6DSNVariable)
	}
	return targets
}

func startTestbedHistoryDB(t testing.TB) *historyDB {
	c := cluster.Start(t, cluster.Options{Dialect: dialect.PostgreSQL})
	db := grantHistory(t, c.CoordinatorDSN)
	db.cluster = c
	db.stopServer, db.startServer = c.StopCoordinator, c.StartCoordinator
	return db
}

func startRealHistoryDB(t *testing.T, dsn string) *historyDB {
	ctx := await.Context(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("%s: %v", gp6DSNVariable, err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	for _, stmt := range []string{"DROP DATABASE IF EXISTS gpotel_history", "DROP ROLE IF EXISTS gpotel_history", "DROP ROLE IF EXISTS gpotel_monitor",
		"DROP ROLE IF EXISTS gpotel_super"} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	db := grantHistory(t, dsn)
	if stop, start := os.Getenv(gp6StopVariable), os.Getenv(gp6StartVariable); stop != "" && start != "" {
		db.stopServer, db.startServer = shellCommand(stop), shellCommand(start)
	}
	return db
}

// shellCommand runs command with sh; its output is in the error.
func shellCommand(command string) func(context.Context) error {
	return func(ctx context.Context) error {
		if out, err := exec.CommandContext(ctx, "/bin/sh", "-c", command).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s", command, err, out)
		}
		return nil
	}
}

// grantHistory runs the documented grants as the superuser of dsn and
// returns the exporter's settings for the history role.
func grantHistory(t testing.TB, dsn string) *historyDB {
	t.Helper()
	ctx := await.Context(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	// A real server may ask for a password (Greenplum 6 does, but of its
	// own superuser); every role the tests make logs in with this one.
	for _, stmt := range append(statementsOf(documentedSQL(t, "grants")), "ALTER ROLE gpotel_history PASSWORD '"+testPassword+"'") {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("the documented grants: %s: %v", stmt, err)
		}
	}
	passwordFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(passwordFile, []byte(testPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cc := conn.Config().Copy()
	cc.Database = "gpotel_history"
	admin, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	db := &historyDB{adminDSN: dsn, admin: admin}
	// The connection open when the test ends (a server restart replaces
	// it): one left open keeps the next test from dropping the database.
	t.Cleanup(func() { _ = db.admin.Close(context.Background()) })
	cfg := createDefaultConfig()
	cfg.Host, cfg.Port, cfg.Database, cfg.User, cfg.SSLMode = cc.Host, int(cc.Port), "gpotel_history", "gpotel_history", "disable"
	cfg.PasswordFile = passwordFile
	// Quick retries: the tests wait for conditions, not for a backoff.
	cfg.Retry = RetryConfig{InitialInterval: 50 * time.Millisecond, MaxInterval: 500 * time.Millisecond}
	cfg.Timeout = 20 * time.Second
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	db.cfg = cfg
	return db
}

// startExporter starts a history exporter on cfg (with host's
// extensions) whose clock is now; it is shut down when the test ends
// unless the test does it first.
func startExporter(t *testing.T, cfg *Config, host component.Host, tel *componenttest.Telemetry, now func() time.Time) *historyExporter {
	t.Helper()
	e := newExporterAt(t, cfg, tel, now)
	if err := e.start(context.Background(), host); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = e.shutdown(context.Background()) })
	return e
}

func newExporterAt(t testing.TB, cfg *Config, tel *componenttest.Telemetry, now func() time.Time) *historyExporter {
	t.Helper()
	if tel == nil {
		tel = componenttest.NewTelemetry()
		t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	}
	e, err := newHistoryExporter(cfg, metadatatest.NewSettings(tel))
	if err != nil {
		t.Fatal(err)
	}
	if now != nil {
		e.store.now = now
	}
	return e
}

// count is a count(*) (or any one-number query) on the history database.
func (db *historyDB) count(t testing.TB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.admin.QueryRow(await.Context(t), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// awaitRows waits until table holds want rows.
func (db *historyDB) awaitRows(t *testing.T, table string, want int64) {
	t.Helper()
	query := "SELECT count(*) FROM gpotel_history." + table
	await.NoError(t, fmt.Sprintf("%d rows in %s", want, table), func() error {
		var n int64
		if err := db.admin.QueryRow(context.Background(), query).Scan(&n); err != nil {
			return err
		}
		if n != want {
			return fmt.Errorf("%d rows", n)
		}
		return nil
	})
}

// documentedSQL is the SQL docs/operations.md shows under
// <!-- history-sql: name -->.
func documentedSQL(t testing.TB, name string) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	marker := "<!-- history-sql: " + name + " -->\n```sql\n"
	_, rest, ok := strings.Cut(string(doc), marker)
	if !ok {
		t.Fatalf("docs/operations.md shows no %q statement", name)
	}
	sql, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("docs/operations.md: the %q statement has no end", name)
	}
	return sql
}

// statementsOf cuts a script into its statements (each ends a line with ;).
func statementsOf(script string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(script, "\n") {
		code, _, _ := strings.Cut(line, "--")
		cur.WriteString(code + "\n")
		if strings.HasSuffix(strings.TrimSpace(code), ";") {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		}
	}
	return out
}

var (
	psqlQuoted = regexp.MustCompile(`:'(\w+)'`)
	psqlPlain  = regexp.MustCompile(`([^:]):(\w+)`)
)

// withVariables replaces psql's :'name' (a quoted literal) and :name.
func withVariables(t *testing.T, sql string, vars map[string]string) string {
	t.Helper()
	lookup := func(name string) string {
		v, ok := vars[name]
		if !ok {
			t.Fatalf("no value for psql variable %s in %s", name, sql)
		}
		return v
	}
	sql = psqlQuoted.ReplaceAllStringFunc(sql, func(m string) string {
		return "'" + strings.ReplaceAll(lookup(psqlQuoted.FindStringSubmatch(m)[1]), "'", "''") + "'"
	})
	return psqlPlain.ReplaceAllStringFunc(sql, func(m string) string {
		sub := psqlPlain.FindStringSubmatch(m)
		return sub[1] + lookup(sub[2])
	})
}

// assertNothingDropped: history_events_dropped recorded nothing, or zeros.
func assertNothingDropped(t *testing.T, tel *componenttest.Telemetry) {
	t.Helper()
	m, err := tel.GetMetric("otelcol_history_events_dropped")
	if err != nil {
		return // never recorded
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("history_events_dropped is a %T", m.Data)
	}
	for _, dp := range sum.DataPoints {
		if dp.Value != 0 {
			t.Errorf("%d events dropped (%v)", dp.Value, dp.Attributes.ToSlice())
		}
	}
}
