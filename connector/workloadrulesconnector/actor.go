// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workloadrulesconnector

import (
	"context"
	"errors"
	"time"

	"github.com/gpotel/gpotel/internal/pipeline"
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
}

// Actor carries out a rule's action on the server: the ActionService's
// action path (its role, same-backend checks, stale-view refusal). Action
// is "cancel", "terminate" or "move" (to group). An error says why
// nothing was done, or what failed.
type Actor interface {
	Act(ctx context.Context, t Target, action, group string) error
}

// errNotWired is what an enforcing rule meets in a build whose connector
// has no action path.
var errNotWired = errors.New("this collector's workloadrules connector has no action path wired: nothing done")

// unwired is the Actor of a build without an action path.
type unwired struct{}

func (unwired) Act(context.Context, Target, string, string) error { return errNotWired }
