// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/sessionaction"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// TestTheEndingNamesTheRuleThatEndedItOnTheServer: on PostgreSQL, a
// rule's cancel through the action path ends the query as the server says
// a user's cancel does (57014, "due to user request"), and that ending of
// that query, and only that one, names the rule; a person's cancel
// through the same path names none.
func TestTheEndingNamesTheRuleThatEndedItOnTheServer(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Dialect: dialect.PostgreSQL})
	ctx := await.Context(t)
	admin := connectAs(t, c, cluster.AdminRole)
	createActionRole(t, admin)
	cfg := sessionaction.DefaultConfig()
	cfg.Enabled, cfg.Host, cfg.Port, cfg.Database, cfg.User, cfg.SSLMode = true, "127.0.0.1", c.Coordinator.Port, cluster.Database, testActionRole, "disable"
	cfg.MaxViewAge = time.Hour
	actor := sessionaction.New(cfg)
	t.Cleanup(actor.Close)

	cancel := func(rule string) (sessionaction.QueryKey, *pgconn.PgError) {
		u := startUserSessions(t, c, admin, dialect.PostgreSQL)
		s := u.sleeping
		start := mustTime(t, s.meta[pipeline.MetaQueryStart])
		target := sessionaction.Target{Key: pipeline.SessionKey{TmID: testTmID, ID: s.sessID}, PID: s.pid, Running: true, State: "active",
			BackendStart: mustTime(t, s.meta[pipeline.MetaBackendStart]), QueryStart: start}
		out := actor.Act(ctx, sessionaction.View{Time: time.Now(), Interval: time.Second}, target,
			sessionaction.Request{Action: sessionaction.CancelQuery, Rule: rule})
		if out.Result != sessionaction.Done {
			t.Fatalf("the cancel: %s %v", out.Result, out.Err)
		}
		var pgErr *pgconn.PgError
		if err := <-u.slept; !errors.As(err, &pgErr) {
			t.Fatalf("the sleeper's query ended with %v, want the server's error", err)
		}
		return sessionaction.QueryKey{Session: target.Key, Start: start.UnixNano()}, pgErr
	}

	key, pgErr := cancel("runaway-spill")
	// What the processor reads as cancelled at a user's request.
	if pgErr.Code != "57014" || pgErr.Message != "canceling statement due to user request" {
		t.Errorf("the server ended the rule's query with %s %q, want 57014 canceling statement due to user request", pgErr.Code, pgErr.Message)
	}
	if got := sessionaction.EndedByRule(key, events.QueryCancelled, events.CancelUserRequest); got != "runaway-spill" {
		t.Errorf("the query the rule cancelled: ended by %q, want runaway-spill", got)
	}
	if got := sessionaction.EndedByRule(key, events.QueryCancelled, events.CancelStatementTimeout); got != "" {
		t.Errorf("the same query ended by a statement timeout: ended by %q, want none", got)
	}
	other := key
	other.Start++
	if got := sessionaction.EndedByRule(other, events.QueryCancelled, events.CancelUserRequest); got != "" {
		t.Errorf("another query of the session: ended by %q, want none", got)
	}

	key, _ = cancel("")
	if got := sessionaction.EndedByRule(key, events.QueryCancelled, events.CancelUserRequest); got != "" {
		t.Errorf("the query a person cancelled: ended by %q, want none", got)
	}
}
