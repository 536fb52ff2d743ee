// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/gpsql"
	"github.com/gpotel/gpotel/internal/gpsql/gpsqltest"
)

// Every history statement of gpsql's table runs on the real Greenplum 6,
// in order (the receiver's conformance test runs them on the testbed's
// PostgreSQL, which cannot parse Greenplum's DDL).
func TestEveryHistoryStatementRunsOnTheRealGreenplum6(t *testing.T) {
	dsn := os.Getenv(gp6DSNVariable)
	if dsn == "" {
		t.Skipf("%s is not set", gp6DSNVariable)
	}
	ctx := await.Context(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var version string
	if err := conn.QueryRow(ctx, gpsql.Version).Scan(&version); err != nil {
		t.Fatal(err)
	}
	d, err := dialect.Detect(version)
	if err != nil || d != dialect.GP6 {
		t.Fatalf("%s names %q (%v), not Greenplum 6", gp6DSNVariable, version, err)
	}
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS gpotel_history_conformance CASCADE"); err != nil {
		t.Fatal(err)
	}
	for _, err := range gpsqltest.RunHistory(ctx, conn, gpsql.Shape{Dialect: d}) {
		t.Error(err)
	}
	t.Logf("%s: every history statement ran", version)
}
