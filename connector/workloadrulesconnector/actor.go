// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workloadrulesconnector

import (
	"context"
	"fmt"
	"time"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/roleconn"
	"github.com/gpotel/gpotel/internal/sessionaction"
)

// Target names the backend and query an action is for, as the snapshot
// saw them: the action path acts only while the server still shows that
// backend (pid and backend_start) running that query.
type Target struct {
	Session      pipeline.SessionKey
	PID          int64
	BackendStart time.Time
	QueryStart   time.Time // zero: the session names no query
	CommandCount int64     // 0: the query is keyed by its start
	SnapshotTime time.Time
	// Interval is the time between the snapshot and the one before; 0: one only.
	Interval time.Duration
}

// Actor carries out rule's action on the server. Action is "cancel",
// "terminate" or "move" (to group). An error says why nothing was done,
// or what failed.
type Actor interface {
	Act(ctx context.Context, t Target, rule, action, group string) error
}

// actionPath is the Actor of the distribution: the ActionService's action
// path (internal/sessionaction), with its same-backend checks, its refusal
// of a stale view and of the collector's own and system sessions.
type actionPath struct {
	actor *sessionaction.Actor
	now   func() time.Time
}

// newActionPath connects as conn (opened at the first action), each
// statement bounded by timeout, refusing views older than maxViewAge.
func newActionPath(conn roleconn.Settings, timeout, maxViewAge time.Duration) *actionPath {
	return &actionPath{actor: sessionaction.New(sessionaction.Config{Enabled: true, Settings: conn, StatementTimeout: timeout,
		MaxViewAge: maxViewAge}), now: time.Now}
}

// sessionActions are the action path's actions by a rule's action name.
var sessionActions = map[string]sessionaction.Action{
	"cancel": sessionaction.CancelQuery, "terminate": sessionaction.TerminateSession, "move": sessionaction.MoveToResourceGroup,
}

func (p *actionPath) Act(ctx context.Context, t Target, rule, action, group string) error {
	act, ok := sessionActions[action]
	if !ok {
		return fmt.Errorf("action %q has no action on the server", action)
	}
	view := sessionaction.View{Time: t.SnapshotTime, Age: p.now().Sub(t.SnapshotTime), Interval: t.Interval}
	target := sessionaction.Target{Key: t.Session, PID: t.PID, BackendStart: t.BackendStart, Running: !t.QueryStart.IsZero(),
		QueryCcnt: t.CommandCount, QueryStart: t.QueryStart}
	// The target's own query: the server cancels only while its backend
	// still runs the query that started at the target's query start.
	out := p.actor.Act(ctx, view, target, sessionaction.Request{Action: act, Group: group, Rule: rule})
	if out.Result != sessionaction.Done {
		return fmt.Errorf("%s: %w", out.Result, out.Err)
	}
	return nil
}

func (p *actionPath) close() { p.actor.Close() }
