// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/gpotel/gpotel/internal/await"
)

// The exporter writes nothing with a role that may not do what it does,
// and its status names the grant that is missing; the receiver's
// monitoring role is such a role (a superuser on Greenplum 6, refused
// for being one).
func TestHistoryNeedsItsOwnRight(t *testing.T) {
	for _, target := range historyTargets(t) {
		t.Run(target.name, func(t *testing.T) {
			db := target.start(t)
			ctx := await.Context(t)
			su := func(stmts ...string) {
				t.Helper()
				conn, err := pgx.Connect(ctx, db.adminDSN)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = conn.Close(context.Background()) }()
				for _, s := range stmts {
					if _, err := conn.Exec(ctx, s); err != nil {
						t.Fatalf("%s: %v", s, err)
					}
				}
			}
			onHistory := func(stmts ...string) {
				t.Helper()
				for _, s := range stmts {
					if _, err := db.admin.Exec(ctx, s); err != nil {
						t.Fatalf("%s: %v", s, err)
					}
				}
			}
			as := func(role string) *Config {
				cfg := *db.cfg
				cfg.User = role
				return &cfg
			}
			// refused: the exporter starts (the history's trouble never
			// stops the collector) and its status says what is missing.
			refused := func(cfg *Config, want string) {
				t.Helper()
				e := newExporterAt(t, cfg, nil, nil)
				host := &statusHost{storageHost: storageHost{Host: componenttest.NewNopHost()}}
				if err := e.start(context.Background(), host); err != nil {
					t.Fatalf("%s: start: %v; want it started, its status saying %q", cfg.User, err, want)
				}
				_ = e.shutdown(context.Background())
				ev := host.last()
				if ev == nil || ev.Status() != componentstatus.StatusRecoverableError || !strings.Contains(fmt.Sprint(ev.Err()), want) {
					t.Errorf("%s: status %+v; want a recoverable error saying %q", cfg.User, ev, want)
				}
			}

			// The receiver's monitoring role: no right to create anything here.
			monitor := "CREATE ROLE gpotel_monitor LOGIN PASSWORD '" + testPassword + "'"
			if db.cluster != nil {
				monitor += " IN ROLE pg_read_all_stats"
			}
			su(monitor)
			refused(as("gpotel_monitor"), `GRANT CREATE ON DATABASE "gpotel_history" TO "gpotel_monitor"`)

			// A superuser may do everything, which is why it is refused.
			su("CREATE ROLE gpotel_super LOGIN SUPERUSER PASSWORD '" + testPassword + "'")
			refused(as("gpotel_super"), `role "gpotel_super" is a superuser: give the history a role of its own`)

			// The history role starts, and makes the schema and tables.
			e := startExporter(t, db.cfg, componenttest.NewNopHost(), nil, nil)
			if err := e.shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}

			// With the schema there, the other role needs rights on it, ...
			su("GRANT CREATE ON DATABASE gpotel_history TO gpotel_monitor")
			refused(as("gpotel_monitor"), `GRANT USAGE, CREATE ON SCHEMA "gpotel_history" TO "gpotel_monitor"`)
			// ... and the tables to be its own.
			onHistory("GRANT USAGE, CREATE ON SCHEMA gpotel_history TO gpotel_monitor")
			refused(as("gpotel_monitor"), `ALTER TABLE "gpotel_history"."queries" OWNER TO "gpotel_monitor"`)

			// Without temporary tables no write can be staged.
			su("REVOKE TEMPORARY ON DATABASE gpotel_history FROM PUBLIC", "REVOKE TEMPORARY ON DATABASE gpotel_history FROM gpotel_history")
			refused(db.cfg, `GRANT TEMPORARY ON DATABASE "gpotel_history" TO "gpotel_history"`)
		})
	}
}
