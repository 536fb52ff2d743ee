// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configauth"
	"go.opentelemetry.io/collector/config/configoptional"
	"google.golang.org/grpc/codes"
	grpcmetadata "google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/viewtest"
	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/clientname"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/gpsql"
	"github.com/gpotel/gpotel/internal/ownbackends"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/sessionaction"
	"github.com/gpotel/gpotel/internal/statustest"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// The action role of the test: pg_signal_backend and pg_read_all_stats, not a superuser.
const testActionRole = "gpotel_actions"

// On every dialect of the testbed: a client that may read the API may not
// act; with the action token, a running query is cancelled and a session
// ended on the server, and the exporter's log says so.
func TestActionsNeedTheirOwnRightAndWork(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testbed per dialect")
	}
	for _, opts := range cluster.SmallClusters(1) {
		d := opts.Dialect
		t.Run(string(d), func(t *testing.T) {
			c := cluster.Start(t, opts)
			ctx := await.Context(t)
			admin := connectAs(t, c, cluster.AdminRole)
			createActionRole(t, admin)

			u := startUserSessions(t, c, admin, d)
			sleeper, idler, slept, sleeping, idle := u.sleeper, u.idler, u.slept, u.sleeping, u.idle

			srv, readToken := startWithActions(t, c)
			actions := yagpcc.NewActionServiceClient(srv.conn)
			keyOf := func(s testSession) *yagpcc.QueryKey {
				return &yagpcc.QueryKey{Tmid: testTmID, Ssid: int32(s.sessID), // #nosec G115 -- a backend's pid
					QueryStart: timestamppb.New(mustTime(t, s.meta[pipeline.MetaQueryStart]))}
			}
			running := keyOf(sleeping)

			// May read, may not act.
			reader := grpcmetadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+readToken)
			if _, err := yagpcc.NewGetGPInfoClient(srv.conn).GetGPSessions(reader, &yagpcc.GetGPSessionsReq{}); err != nil {
				t.Fatalf("the reader cannot read: %v", err)
			}
			_, err := actions.TerminateQuery(reader, &yagpcc.TerminateQueryRequest{QueryKey: running})
			statustest.AssertCode(t, err, codes.PermissionDenied, "may not act")
			_, err = actions.TerminateSession(reader, &yagpcc.TerminateSessionRequest{SessionKey: &yagpcc.SessionKey{SessId: idle.sessID, TmId: testTmID}})
			statustest.AssertCode(t, err, codes.PermissionDenied, "may not act")

			actor := grpcmetadata.AppendToOutgoingContext(reader, clientname.ActionTokenHeader, viewtest.ActionToken)

			// A snapshot whose running query has since been followed by
			// another (an hour older here): the server cancels nothing.
			stale := sleeping
			stale.meta = maps.Clone(sleeping.meta)
			stale.meta[pipeline.MetaQueryStart] = mustTime(t, sleeping.meta[pipeline.MetaQueryStart]).Add(-time.Hour).Format(time.RFC3339Nano)
			srv.consume(t, buildSnapshot(time.Now(), []testSession{stale}))
			resp, err := actions.TerminateQuery(actor, &yagpcc.TerminateQueryRequest{QueryKey: keyOf(stale)})
			if err != nil || resp.GetStatusCode() != yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_ERROR ||
				!strings.Contains(resp.GetStatusText(), "another query") {
				t.Fatalf("TerminateQuery of a query the backend no longer runs: %v %v", resp, err)
			}
			if s, err := activityOf(ctx, admin, d, sleeper.PgConn().PID()); err != nil || s.meta[pipeline.MetaState] != "active" {
				t.Fatalf("the sleeper's query after a stale cancel: %v %v, want still active", s.meta, err)
			}
			srv.consume(t, buildSnapshot(time.Now(), []testSession{sleeping, idle}))

			// Moving needs resource groups, and on Greenplum a superuser.
			_, err = actions.MoveQueryToResourceGroup(actor, &yagpcc.MoveQueryToResourceGroupRequest{QueryKey: running, ResourceGroupName: "default_group"})
			if d == dialect.PostgreSQL {
				statustest.AssertCode(t, err, codes.FailedPrecondition, "no resource groups")
			} else {
				statustest.AssertCode(t, err, codes.FailedPrecondition, "must be superuser")
			}

			resp, err = actions.TerminateQuery(actor, &yagpcc.TerminateQueryRequest{QueryKey: running})
			if err != nil || resp.GetStatusCode() != yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_SUCCESS {
				t.Fatalf("TerminateQuery: %v %v", resp, err)
			}
			var pgErr *pgconn.PgError
			if err := <-slept; !errors.As(err, &pgErr) || pgErr.Code != "57014" {
				t.Errorf("the sleeper's query ended with %v, want query_canceled (57014)", err)
			}
			await.NoError(t, "pg_stat_activity shows the sleeper idle", func() error {
				s, err := activityOf(ctx, admin, d, sleeper.PgConn().PID())
				if err == nil && s.meta[pipeline.MetaState] != "idle" {
					err = errors.New("state " + s.meta[pipeline.MetaState].(string))
				}
				return err
			})

			resp, err = actions.TerminateSession(actor, &yagpcc.TerminateSessionRequest{SessionKey: &yagpcc.SessionKey{SessId: idle.sessID, TmId: testTmID}})
			if err != nil || resp.GetStatusCode() != yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_SUCCESS {
				t.Fatalf("TerminateSession: %v %v", resp, err)
			}
			await.NoError(t, "pg_stat_activity no longer lists the idle session", func() error {
				if _, err := activityOf(ctx, admin, d, idler.PgConn().PID()); !errors.Is(err, pgx.ErrNoRows) {
					return errors.New("still listed")
				}
				return nil
			})

			// The action connection's own backend, however the snapshot names it.
			var own testSession
			await.NoError(t, "the action connection shows in pg_stat_activity", func() error {
				var pid uint32
				if err := admin.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", gpsql.ActionsApplicationName).Scan(&pid); err != nil {
					return err
				}
				own, err = activityOf(ctx, admin, d, pid)
				return err
			})
			own.meta[pipeline.MetaApplicationName] = "psql"
			srv.consume(t, buildSnapshot(time.Now(), []testSession{own}))
			_, err = actions.TerminateSession(actor, &yagpcc.TerminateSessionRequest{SessionKey: &yagpcc.SessionKey{SessId: own.sessID, TmId: testTmID}})
			statustest.AssertCode(t, err, codes.FailedPrecondition, "the collector's own action connection")

			var done []string
			for _, e := range srv.logs.FilterMessage("session action").All() {
				m := e.ContextMap()
				if m["result"] == string(sessionaction.Done) && m["client"] == "action token" {
					done = append(done, m["action"].(string))
				}
			}
			if strings.Join(done, ",") != "cancel_query,terminate_session" {
				t.Errorf("the log shows %v done, want cancel_query and terminate_session: %v", done, srv.logs.All())
			}
		})
	}
}

// On every dialect of the testbed: an action names the backend of the
// snapshot, and the server acts only while the pid is still that backend
// (its backend_start, and its session), so a pid the kernel gave to a later
// backend while the view was old is never signalled or moved.
func TestActionsNeverHitAReusedPid(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testbed per dialect")
	}
	for _, opts := range cluster.SmallClusters(1) {
		d := opts.Dialect
		t.Run(string(d), func(t *testing.T) {
			c := cluster.Start(t, opts)
			ctx := await.Context(t)
			admin := connectAs(t, c, cluster.AdminRole)
			createActionRole(t, admin)

			u := startUserSessions(t, c, admin, d)
			sleeping, idle := u.sleeping, u.idle
			srv, readToken := startWithActions(t, c)
			actions := yagpcc.NewActionServiceClient(srv.conn)
			actor := grpcmetadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+readToken, clientname.ActionTokenHeader, viewtest.ActionToken)

			// The snapshot's backends under the same pids, but not the ones
			// running now: an earlier start, or (same start) another session.
			for _, earlier := range []func(testSession) testSession{
				func(s testSession) testSession {
					s.meta = maps.Clone(s.meta)
					s.meta[pipeline.MetaBackendStart] = mustTime(t, s.meta[pipeline.MetaBackendStart]).Add(-time.Hour).Format(time.RFC3339Nano)
					return s
				},
				func(s testSession) testSession { s.sessID += 100000; return s },
			} {
				was, wasIdle := earlier(sleeping), earlier(idle)
				srv.consume(t, buildSnapshot(time.Now(), []testSession{was, wasIdle}))

				resp, err := actions.TerminateSession(actor, &yagpcc.TerminateSessionRequest{SessionKey: &yagpcc.SessionKey{SessId: wasIdle.sessID, TmId: testTmID}})
				if err != nil || resp.GetStatusCode() != yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_ERROR || !strings.Contains(resp.GetStatusText(), "another backend") {
					t.Errorf("TerminateSession of an earlier backend of pid %d: %v %v, want ERROR naming another backend", idle.pid, resp, err)
				}
				resp, err = actions.TerminateQuery(actor, &yagpcc.TerminateQueryRequest{QueryKey: &yagpcc.QueryKey{Tmid: testTmID, Ssid: int32(was.sessID)}}) // #nosec G115 -- a small id
				if err != nil || resp.GetStatusCode() != yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_ERROR || !strings.Contains(resp.GetStatusText(), "another backend") {
					t.Errorf("TerminateQuery of an earlier backend of pid %d: %v %v, want ERROR naming another backend", sleeping.pid, resp, err)
				}
				many, err := actions.TerminateSessions(actor, &yagpcc.TerminateSessionsRequest{Username: cluster.UserRole})
				if err != nil || len(many.GetTerminateResponse()) != 2 {
					t.Fatalf("TerminateSessions: %v %v, want an answer for each of the two sessions", many, err)
				}
				for _, r := range many.GetTerminateResponse() {
					if r.GetStatusCode() != yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_ERROR || !strings.Contains(r.GetStatusText(), "another backend") {
						t.Errorf("TerminateSessions answered %v, want ERROR naming another backend", r)
					}
				}
				_, err = actions.MoveQueryToResourceGroup(actor, &yagpcc.MoveQueryToResourceGroupRequest{
					QueryKey: &yagpcc.QueryKey{Tmid: testTmID, Ssid: int32(was.sessID)}, ResourceGroupName: "default_group"}) // #nosec G115 -- a small id
				if d == dialect.PostgreSQL {
					statustest.AssertCode(t, err, codes.FailedPrecondition, "no resource groups")
				} else {
					statustest.AssertCode(t, err, codes.FailedPrecondition, "another backend")
				}
			}

			for _, s := range []testSession{sleeping, idle} {
				now, err := activityOf(ctx, admin, d, uint32(s.pid)) // #nosec G115 -- a backend's pid
				if err != nil || now.meta[pipeline.MetaState] != s.meta[pipeline.MetaState] {
					t.Errorf("pid %d after the actions on earlier backends: %v %v, want it still %v", s.pid, now.meta, err, s.meta[pipeline.MetaState])
				}
			}
		})
	}
}

// A user's session that set the collector's application_name is ended
// like any other; a backend of the collector's own monitoring pool is
// refused whatever the snapshot calls it.
func TestASessionNamedLikeTheCollectorIsNotProtected(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testbed")
	}
	c := cluster.Start(t, cluster.Options{Dialect: dialect.PostgreSQL})
	ctx := await.Context(t)
	admin := connectAs(t, c, cluster.AdminRole)
	createActionRole(t, admin)
	user := connectAs(t, c, cluster.UserRole)
	if _, err := user.Exec(ctx, "SET application_name = '"+gpsql.ApplicationName+"'"); err != nil {
		t.Fatal(err)
	}
	named, err := activityOf(ctx, admin, dialect.PostgreSQL, user.PgConn().PID())
	if err != nil || named.meta[pipeline.MetaApplicationName] != gpsql.ApplicationName {
		t.Fatalf("the user's session: %v %v, want application_name %s", named.meta, err, gpsql.ApplicationName)
	}

	// The monitoring pool of the receiver, tracked as the receiver tracks it.
	pc, err := pgxpool.ParseConfig(c.CoordinatorDSN)
	if err != nil {
		t.Fatal(err)
	}
	new(ownbackends.Pool).Track(pc, "monitoring connection")
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	monitoring, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer monitoring.Release()
	mine, err := activityOf(ctx, admin, dialect.PostgreSQL, monitoring.Conn().PgConn().PID())
	if err != nil {
		t.Fatal(err)
	}
	mine.meta[pipeline.MetaApplicationName] = "psql"

	srv, readToken := startWithActions(t, c)
	srv.consume(t, buildSnapshot(time.Now(), []testSession{named, mine}))
	actions := yagpcc.NewActionServiceClient(srv.conn)
	actor := grpcmetadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+readToken, clientname.ActionTokenHeader, viewtest.ActionToken)

	_, err = actions.TerminateSession(actor, &yagpcc.TerminateSessionRequest{SessionKey: &yagpcc.SessionKey{SessId: mine.sessID, TmId: testTmID}})
	statustest.AssertCode(t, err, codes.FailedPrecondition, "the collector's own monitoring connection")
	if err := monitoring.Ping(ctx); err != nil {
		t.Errorf("the monitoring connection after a refused end: %v", err)
	}

	resp, err := actions.TerminateSession(actor, &yagpcc.TerminateSessionRequest{SessionKey: &yagpcc.SessionKey{SessId: named.sessID, TmId: testTmID}})
	if err != nil || resp.GetStatusCode() != yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_SUCCESS {
		t.Fatalf("TerminateSession of a user's session named %s: %v %v, want SUCCESS", gpsql.ApplicationName, resp, err)
	}
	await.NoError(t, "pg_stat_activity no longer lists the user's session", func() error {
		if _, err := activityOf(ctx, admin, dialect.PostgreSQL, user.PgConn().PID()); !errors.Is(err, pgx.ErrNoRows) {
			return errors.New("still listed")
		}
		return nil
	})

	// The action connection, open after the action, is the collector's own
	// on this server (its tm_id): the receiver marks its session as such.
	var tmID, actionPID int64
	if err := admin.QueryRow(ctx, gpsql.PostmasterStart).Scan(&tmID); err != nil {
		t.Fatal(err)
	}
	if err := admin.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE usename = $1", testActionRole).Scan(&actionPID); err != nil {
		t.Fatalf("the action connection in pg_stat_activity: %v", err)
	}
	if what, ok := ownbackends.Of(actionPID); !ok || what != "action connection" || !ownbackends.OnServer(tmID, actionPID) {
		t.Errorf("the action connection's backend %d on the server of tm_id %d: %q %v, OnServer %v; want the collector's action connection there",
			actionPID, tmID, what, ok, ownbackends.OnServer(tmID, actionPID))
	}
}

// The action connection pins its search_path: a schema the action role's
// own search_path puts before pg_catalog cannot shadow the pg_stat_activity
// (or the function) the action statement names.
func TestActionConnectionIgnoresTheRolesSearchPath(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testbed")
	}
	c := cluster.Start(t, cluster.Options{Dialect: dialect.PostgreSQL})
	ctx := await.Context(t)
	admin := connectAs(t, c, cluster.AdminRole)
	createActionRole(t, admin)
	for _, sql := range []string{
		"CREATE SCHEMA shadow",
		"GRANT USAGE ON SCHEMA shadow TO PUBLIC",
		"CREATE TABLE shadow.pg_stat_activity AS SELECT * FROM pg_catalog.pg_stat_activity WHERE false",
		"GRANT SELECT ON shadow.pg_stat_activity TO PUBLIC",
		"ALTER ROLE " + testActionRole + " SET search_path = shadow, pg_catalog",
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	user := connectAs(t, c, cluster.UserRole)
	idle, err := activityOf(ctx, admin, dialect.PostgreSQL, user.PgConn().PID())
	if err != nil {
		t.Fatal(err)
	}
	srv, readToken := startWithActions(t, c)
	srv.consume(t, buildSnapshot(time.Now(), []testSession{idle}))
	actor := grpcmetadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+readToken, clientname.ActionTokenHeader, viewtest.ActionToken)
	resp, err := yagpcc.NewActionServiceClient(srv.conn).TerminateSession(actor, &yagpcc.TerminateSessionRequest{SessionKey: &yagpcc.SessionKey{SessId: idle.sessID, TmId: testTmID}})
	if err != nil || resp.GetStatusCode() != yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_SUCCESS {
		t.Fatalf("TerminateSession through a role whose search_path starts with a shadow pg_stat_activity: %v %v, want SUCCESS", resp, err)
	}
	await.NoError(t, "pg_stat_activity no longer lists the session", func() error {
		if _, err := activityOf(ctx, admin, dialect.PostgreSQL, user.PgConn().PID()); !errors.Is(err, pgx.ErrNoRows) {
			return errors.New("still listed")
		}
		return nil
	})
}

// userSessions are two sessions of an ordinary user: one sleeping in a
// query (slept gets how it ended), one idle; and how the receiver would
// report each.
type userSessions struct {
	sleeper, idler *pgx.Conn
	slept          chan error
	sleeping, idle testSession
}

func startUserSessions(t *testing.T, c *cluster.Cluster, admin *pgx.Conn, d dialect.Dialect) userSessions {
	t.Helper()
	ctx := await.Context(t)
	u := userSessions{sleeper: connectAs(t, c, cluster.UserRole), idler: connectAs(t, c, cluster.UserRole), slept: make(chan error, 1)}
	go func() {
		_, err := u.sleeper.Exec(context.Background(), "SELECT pg_sleep(600)")
		u.slept <- err
	}()
	await.NoError(t, "the sleeper's query shows in pg_stat_activity", func() error {
		var err error
		u.sleeping, err = activityOf(ctx, admin, d, u.sleeper.PgConn().PID())
		if err == nil && u.sleeping.meta[pipeline.MetaState] != "active" {
			err = errors.New("not active yet")
		}
		return err
	})
	var err error
	if u.idle, err = activityOf(ctx, admin, d, u.idler.PgConn().PID()); err != nil {
		t.Fatal(err)
	}
	return u
}

// createActionRole creates the test's action role: pg_signal_backend and
// pg_read_all_stats, not a superuser.
func createActionRole(t *testing.T, admin *pgx.Conn) {
	t.Helper()
	for _, sql := range []string{"CREATE ROLE " + testActionRole + " LOGIN", "GRANT pg_signal_backend, pg_read_all_stats TO " + testActionRole} {
		if _, err := admin.Exec(await.Context(t), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// startWithActions starts the exporter with a read token (the bearer
// authenticator) and actions on c's coordinator, admitting the action token.
func startWithActions(t *testing.T, c *cluster.Cluster) (*testServer, string) {
	t.Helper()
	const readToken = "read-only"
	authID := component.MustNewID("bearertokenauth")
	cfg := testConfig()
	cfg.Auth = configoptional.Some(configauth.Config{AuthenticatorID: authID})
	cfg.Actions.Enabled = true
	cfg.Actions.Host, cfg.Actions.Port = "127.0.0.1", c.Coordinator.Port
	cfg.Actions.Database, cfg.Actions.User, cfg.Actions.SSLMode = cluster.Database, testActionRole, "disable"
	cfg.Actions.TokenFile = viewtest.ActionTokenFile(t, viewtest.ActionToken)
	// The tests send snapshots moments apart, not at a collection interval.
	cfg.Actions.MaxViewAge = time.Hour
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return startServer(t, cfg, extensionHost{authID: bearerAuth{token: readToken}}), readToken
}

// connectAs opens a connection to c's coordinator as role.
func connectAs(t *testing.T, c *cluster.Cluster, role string) *pgx.Conn {
	t.Helper()
	cc, err := pgx.ParseConfig(c.CoordinatorDSN)
	if err != nil {
		t.Fatal(err)
	}
	cc.User = role
	conn, err := pgx.ConnectConfig(await.Context(t), cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// activityOf is pid's coordinator session as the receiver would report it.
func activityOf(ctx context.Context, conn *pgx.Conn, d dialect.Dialect, pid uint32) (testSession, error) {
	sessID := "sess_id"
	if d == dialect.PostgreSQL {
		sessID = "pid" // the receiver's session id on PostgreSQL
	}
	var s testSession
	var app, state string
	var start, backendStart *time.Time
	err := conn.QueryRow(ctx, "SELECT "+sessID+"::bigint, pid::bigint, datname::text, usename::text, application_name, state, query_start, backend_start"+
		" FROM pg_stat_activity WHERE pid = $1", int64(pid)).Scan(&s.sessID, &s.pid, &s.db, &s.user, &app, &state, &start, &backendStart)
	s.tmID = testTmID
	s.meta = map[string]any{pipeline.MetaApplicationName: app, pipeline.MetaState: state, pipeline.MetaBackendType: "client backend"}
	if start != nil {
		s.meta[pipeline.MetaQueryStart] = start.UTC().Format(time.RFC3339Nano)
	}
	if backendStart != nil {
		s.meta[pipeline.MetaBackendStart] = backendStart.UTC().Format(time.RFC3339Nano)
	}
	return s, err
}

func mustTime(t *testing.T, v any) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, v.(string))
	if err != nil {
		t.Fatal(err)
	}
	return at
}
