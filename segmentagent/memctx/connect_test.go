// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memctx

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/gpsql"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// The agent's local connection pins its search_path, whatever the role's
// own puts before pg_catalog.
func TestAgentConnectionIgnoresTheRolesSearchPath(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testbed")
	}
	c := cluster.Start(t, cluster.Options{Dialect: dialect.PostgreSQL})
	ctx := await.Context(t)
	admin, err := pgx.Connect(ctx, c.CoordinatorDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close(context.Background()) }()
	if _, err := admin.Exec(ctx, "ALTER ROLE "+cluster.AdminRole+" SET search_path = shadow, pg_catalog"); err != nil {
		t.Fatal(err)
	}
	conn, err := connect(ctx, "", instance{port: c.Coordinator.Port, listenAddr: "127.0.0.1"}, cluster.AdminRole, cluster.Database)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var path string
	if err := conn.QueryRow(ctx, "SHOW search_path").Scan(&path); err != nil {
		t.Fatal(err)
	}
	if path != gpsql.SearchPath {
		t.Errorf("the agent's connection runs with search_path %q, want %q", path, gpsql.SearchPath)
	}
}
