// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/ownbackends"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// The monitoring pool's backends are the collector's by their pid (which
// the exporter's actions refuse), from connect until the pool closes them.
func TestMonitoringConnectionsAreKnownByTheirPid(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testbed")
	}
	c := cluster.Start(t, cluster.Options{Dialect: dialect.PostgreSQL})
	src := newPGSource(testbedConfig(c))
	t.Cleanup(src.Close)
	pool, err := src.getPool()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(await.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	pid := int64(conn.Conn().PgConn().PID())
	conn.Release()
	if what, ok := ownbackends.Of(pid); !ok || what != "monitoring connection" {
		t.Errorf("backend pid %d of the monitoring pool: %q %v, want the monitoring connection", pid, what, ok)
	}
	src.Close()
	if what, ok := ownbackends.Of(pid); ok {
		t.Errorf("backend pid %d after the pool closed: still the collector's %s", pid, what)
	}
}

// Discovery marks the session rows of the monitoring pool's own backends,
// by pid: a user's session that takes the collector's application_name is
// not marked, so its finished work is kept.
func TestDiscoveryMarksOnlyItsOwnSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testbed")
	}
	c := cluster.Start(t, cluster.Options{Dialect: dialect.PostgreSQL})
	ctx := await.Context(t)
	user, err := pgx.Connect(ctx, c.CoordinatorDSN+"&application_name="+defaultApplicationName)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = user.Close(context.Background()) }()
	userPID := int64(user.PgConn().PID())
	src := newPGSource(testbedConfig(c))
	t.Cleanup(src.Close)
	st, err := src.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	own, sawUser := 0, false
	for _, r := range st.Sessions {
		_, isPools := ownbackends.Of(r.PID)
		if r.Own != isPools {
			t.Errorf("session row of pid %d: Own %v, want %v", r.PID, r.Own, isPools)
		}
		if r.Own {
			own++
		}
		sawUser = sawUser || r.PID == userPID
	}
	if own == 0 || !sawUser {
		t.Errorf("%d own session rows (want at least the discovering one), user's session seen %v", own, sawUser)
	}
}

// The monitoring connection pins its search_path: a schema the role's own
// search_path puts before pg_catalog (one a user could create objects in)
// cannot shadow what discovery reads.
func TestMonitoringConnectionIgnoresTheRolesSearchPath(t *testing.T) {
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
	for _, sql := range []string{
		"CREATE SCHEMA shadow",
		"CREATE TABLE shadow.pg_stat_activity AS SELECT * FROM pg_catalog.pg_stat_activity WHERE false",
		"ALTER ROLE " + cluster.AdminRole + " SET search_path = shadow, pg_catalog",
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	src := newPGSource(testbedConfig(c))
	t.Cleanup(src.Close)
	st, err := src.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range st.Sessions {
		found = found || s.PID == int64(admin.PgConn().PID())
	}
	if !found {
		t.Errorf("discovery through a role whose search_path starts with a shadow pg_stat_activity: %d sessions, without the test's own pid %d",
			len(st.Sessions), admin.PgConn().PID())
	}
}
