// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/gpsql"
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
// and of the collector's other own connections to the same server (the
// exporter's action connection, recorded with the server's tm_id), by pid:
// a user's session that takes the collector's application_name is not
// marked, so its finished work is kept, nor is a backend the collector
// holds on another server that has the same pid here.
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
	var tmID int64
	if err := user.QueryRow(ctx, gpsql.PostmasterStart).Scan(&tmID); err != nil {
		t.Fatal(err)
	}
	// Two connections of the collector's own: one here, as the exporter
	// records its action connection; one with the pid of the other on a
	// server started at another time.
	var actions, elsewhere ownbackends.Pool
	here, other := connect(t, c.CoordinatorDSN), connect(t, c.CoordinatorDSN)
	herePID, otherPID := int64(here.PgConn().PID()), int64(other.PgConn().PID())
	actions.Add(herePID, tmID, "action connection")
	t.Cleanup(func() { actions.Remove(herePID) })
	elsewhere.Add(otherPID, tmID-1, "action connection")
	t.Cleanup(func() { elsewhere.Remove(otherPID) })

	src := newPGSource(testbedConfig(c))
	t.Cleanup(src.Close)
	st, err := src.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	own, seen := 0, map[int64]bool{}
	for _, r := range st.Sessions {
		want := src.own.Has(r.PID) || r.PID == herePID
		if r.Own != want {
			t.Errorf("session row of pid %d: Own %v, want %v", r.PID, r.Own, want)
		}
		if r.Own {
			own++
		}
		seen[r.PID] = true
	}
	if own < 2 || !seen[userPID] || !seen[herePID] || !seen[otherPID] {
		t.Errorf("%d own session rows (want the discovering one and the action connection); seen: user's %v, action connection's %v, other's %v",
			own, seen[userPID], seen[herePID], seen[otherPID])
	}
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(await.Context(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
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

// A backend that connects after discovery's backends' read and before its
// sessions' read is in the sessions only: discovery lists it among the
// backends too, so the scrape asks about it and its exit finds a listing.
// The testbed's Greenplum catalog holds the backends' read twice: on the
// segment (a lock on the table its view joins) and, once the coordinator's
// rows are taken, at a backend no read has numbered yet (the numbering's
// advisory lock, testbed/cluster/catalog.go session_of).
func TestDiscoveryAsksForABackendThatConnectedBetweenItsReads(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testbed")
	}
	c := cluster.Start(t, cluster.Options{Hosts: 1, SegmentsPerHost: 1, Dialect: dialect.GP6})
	ctx := await.Context(t)
	src := newPGSource(testbedConfig(c))
	t.Cleanup(src.Close)
	if _, err := src.Discover(ctx); err != nil { // the server's shape read, the pool's backend numbered
		t.Fatal(err)
	}
	segment, _ := c.Instance(0)
	segmentLock := connect(t, segment.DSN)
	if _, err := segmentLock.Exec(ctx, "BEGIN; LOCK TABLE gpotel_testbed.moved IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	type discovered struct {
		state *ClusterState
		err   error
	}
	done := make(chan discovered, 1)
	go func() {
		st, err := src.Discover(ctx)
		done <- discovered{st, err}
	}()
	awaitWaiter(t, segmentLock, "relation = 'gpotel_testbed.moved'::regclass", "the segment's read")
	// Connected after the coordinator's sess_ids were taken for the
	// segments: the backends' read numbers it, and waits for this lock.
	holder := connect(t, c.CoordinatorDSN)
	const numbering = "hashtext('gpotel_testbed.sessions')"
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock("+numbering+")"); err != nil {
		t.Fatal(err)
	}
	if _, err := segmentLock.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	awaitWaiter(t, holder, "locktype = 'advisory'", "the coordinator's rows")
	late := connect(t, c.CoordinatorDSN)
	latePID := int64(late.PgConn().PID())
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock("+numbering+")"); err != nil {
		t.Fatal(err)
	}
	var d discovered
	select {
	case d = <-done:
	case <-ctx.Done():
		t.Fatal("discovery did not return")
	}
	if d.err != nil {
		t.Fatal(d.err)
	}
	var sessID int64
	for _, r := range d.state.Sessions {
		if r.PID == latePID {
			sessID = r.SessionID
		}
	}
	if sessID == 0 {
		t.Fatalf("the sessions' read does not list backend %d, which connected before it", latePID)
	}
	if !slices.ContainsFunc(d.state.Backends, func(b Backend) bool { return b.SegmentID == -1 && b.PID == latePID && b.SessionID == sessID }) {
		t.Errorf("backends lack coordinator backend %d of session %d, listed by the sessions' read only (it connected after the backends' read)",
			latePID, sessID)
	}
}

// awaitWaiter waits until a lock that matches where is waited for on conn's server.
func awaitWaiter(t *testing.T, conn *pgx.Conn, where, what string) {
	t.Helper()
	await.NoError(t, what+" waiting for the test's lock", func() error {
		var waits bool
		if err := conn.QueryRow(await.Context(t), "SELECT EXISTS (SELECT FROM pg_catalog.pg_locks WHERE NOT granted AND "+where+")").Scan(&waits); err != nil {
			return err
		}
		if !waits {
			return errors.New("nothing waits yet")
		}
		return nil
	})
}
