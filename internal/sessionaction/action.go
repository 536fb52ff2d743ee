// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionaction

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpotel/gpotel/internal/ownbackends"
	"github.com/gpotel/gpotel/internal/pipeline"
)

// Action is what is done to a session's coordinator backend; its value is
// the action attribute of the sessionstate_actions counter.
type Action string

// The actions.
const (
	CancelQuery         Action = "cancel_query"
	TerminateSession    Action = "terminate_session"
	MoveToResourceGroup Action = "move_to_resource_group"
)

// Result is what became of an action; its value is the result attribute
// of the sessionstate_actions counter.
type Result string

// The results.
const (
	Done     Result = "done"
	Failed   Result = "failed"
	Refused  Result = "refused"
	NotFound Result = "not_found"
	Invalid  Result = "invalid"
	Denied   Result = "denied"
)

// Stage is the step of Act that decided the outcome.
type Stage int

const (
	// StageRequest is an invalid request (an unknown action, a
	// resource group name the server would cut).
	StageRequest Stage = iota + 1
	// StageView is a snapshot too old to act on (see Actor.Fresh).
	StageView
	// StageTarget is a session gpotel never acts on (see Untouchable).
	StageTarget
	// StageQuery is a session that does not run the query named.
	StageQuery
	// StageServer is the statement sent (or its connection failed); the
	// outcome is the server's answer.
	StageServer
)

// MaxGroupNameBytes is NAMEDATALEN-1: the server cuts longer names.
const MaxGroupNameBytes = 63

// ErrNotDone says the server answered, but did not do it (its signal function
// returned false).
var ErrNotDone = errors.New("the server did not do it")

// Target is a session as the snapshot the caller acts on saw it: its
// coordinator backend and, for a query action, its running query.
type Target struct {
	Key pipeline.SessionKey
	PID int64
	// BackendStart is the backend's start; zero when the snapshot does not
	// name it (the receiver's role may not see other users' backends).
	BackendStart time.Time
	// System: a system process, not a client session.
	System bool
	// Running: the session executes the statement of its query text.
	Running bool
	State   string
	// QueryCcnt is the running query's command count; 0: unknown.
	QueryCcnt int64
	// QueryStart is the running query's start; zero: unknown.
	QueryStart time.Time
}

// Name is how answers and logs name the session.
func (t Target) Name() string {
	return fmt.Sprintf("session {sess_id %d, tm_id %d}", t.Key.ID, t.Key.TmID)
}

func (t Target) backend() Backend {
	return Backend{PID: t.PID, Started: t.BackendStart, SessID: t.Key.ID}
}

// Query names the running query a query action is meant for: by command
// count, by start, or (both zero) whichever query the session runs.
type Query struct {
	Ccnt  int64
	Start time.Time
}

// Request is one action on one target.
type Request struct {
	Action Action
	// Query is checked against the target's running query (CancelQuery,
	// MoveToResourceGroup).
	Query Query
	// Group is MoveToResourceGroup's resource group.
	Group string
	// Rule is the workload rule that asks; "": a person, through the
	// ActionService. A query's ending names the rule that ended it.
	Rule string
}

// View is how old the snapshot the target comes from is.
type View struct {
	// Time is the snapshot's time; zero: there is no snapshot yet.
	Time time.Time
	// Age is how old the snapshot is now, on the monotonic clock.
	Age time.Duration
	// Interval is the time between the last two snapshots; 0: one only.
	Interval time.Duration
}

// Outcome is what became of a request: Done, or why not.
type Outcome struct {
	Result Result
	Stage  Stage
	// Err says why, when not Done; at StageServer it wraps the server's
	// answer (ErrNoBackend, ErrOtherBackend, ... , ErrNotDone) or the
	// connection's error.
	Err error
}

// Actor acts on sessions' coordinator backends with the action role, on
// the word of a snapshot no older than max_view_age, and only on the
// backend the snapshot saw.
type Actor struct {
	signaller  Signaller
	conn       *actionConn // nil when the signaller is the caller's
	maxViewAge time.Duration
}

// New is an Actor over its own action connection, opened at the first
// action; Close closes it.
func New(cfg Config) *Actor {
	conn := newActionConn(cfg)
	return &Actor{signaller: conn, conn: conn, maxViewAge: cfg.MaxViewAge}
}

// NewWithSignaller is an Actor that sends through s (a test's fake);
// maxViewAge is as in Config.
func NewWithSignaller(s Signaller, maxViewAge time.Duration) *Actor {
	return &Actor{signaller: s, maxViewAge: maxViewAge}
}

// Close closes the action connection.
func (a *Actor) Close() {
	if a.conn != nil {
		a.conn.close()
	}
}

// Fresh refuses a view older than max_view_age (or twice the interval
// between the last two snapshots): a receiver that stopped producing
// snapshots leaves a view whose pids the kernel may have given to other
// backends since.
func (a *Actor) Fresh(v View) error {
	limit := a.maxViewAge
	if limit == 0 {
		limit = 2 * v.Interval
	}
	switch {
	case v.Time.IsZero():
		return errors.New("no snapshot yet: nothing to act on")
	case limit == 0:
		return errors.New("one snapshot only: the collection interval is not known yet, so neither is how old a view may be to act on " +
			"(actions::max_view_age 0: twice the interval between the last two snapshots); try again after the next snapshot")
	case v.Age > limit:
		return fmt.Errorf("the newest snapshot is %s old, more than %s (actions::max_view_age, or twice the collection interval): "+
			"the receiver is not producing snapshots and pids may have been reused, so gpotel acts on nothing",
			v.Age.Round(time.Millisecond), limit)
	}
	return nil
}

// Act checks the request, the view, the target and its query, then sends
// the action's statement, which the server runs only on the backend the
// snapshot saw. It never sends when a check refuses.
func (a *Actor) Act(ctx context.Context, v View, t Target, req Request) Outcome {
	if err := CheckRequest(req); err != nil {
		return Outcome{Result: Invalid, Stage: StageRequest, Err: err}
	}
	if err := a.Fresh(v); err != nil {
		return Outcome{Result: Refused, Stage: StageView, Err: err}
	}
	if why := Untouchable(t); why != "" {
		return Outcome{Result: Refused, Stage: StageTarget, Err: errors.New(why)}
	}
	var done bool
	var err error
	switch req.Action {
	case CancelQuery, MoveToResourceGroup:
		if why := t.mismatch(req.Query); why != "" {
			return Outcome{Result: Refused, Stage: StageQuery, Err: errors.New(why)}
		}
		if req.Action == CancelQuery {
			// The server cancels only while the backend runs the snapshot's query.
			done, err = a.signaller.Cancel(ctx, t.backend(), t.QueryStart)
		} else {
			done, err = a.signaller.Move(ctx, t.backend(), req.Group)
		}
	case TerminateSession:
		done, err = a.signaller.Terminate(ctx, t.backend())
	}
	o := serverOutcome(done, err)
	if o.Result == Done {
		recordEnding(t, req)
	}
	return o
}

// CheckRequest says what is wrong with a request before any view is read.
func CheckRequest(req Request) error {
	switch req.Action {
	case CancelQuery, TerminateSession:
	case MoveToResourceGroup:
		if g := req.Group; g == "" || len(g) > MaxGroupNameBytes || strings.ContainsRune(g, 0) {
			return fmt.Errorf("resource_group_name %q: must be 1 to %d bytes, without NUL", g, MaxGroupNameBytes)
		}
	default:
		return fmt.Errorf("unknown action %q", req.Action)
	}
	return nil
}

// serverOutcome is the outcome of a sent statement.
func serverOutcome(done bool, err error) Outcome {
	o := Outcome{Stage: StageServer, Err: err}
	switch {
	case errors.Is(err, ErrOwnSession):
		o.Result = Refused
	case errors.Is(err, ErrNoBackend):
		o.Result = NotFound
	case errors.Is(err, ErrNoResourceGroups):
		o.Result = Failed
	case isServersAnswer(err):
		o.Result = Refused
	case err != nil:
		o.Result = Failed
	case !done:
		o.Result, o.Err = Failed, ErrNotDone
	default:
		o.Result = Done
	}
	return o
}

// Untouchable says why gpotel never acts on a session: a system process,
// one of the collector's own connections, or one the snapshot does not name
// well enough for the server to tell it from a later backend; "" for any
// other.
func Untouchable(t Target) string {
	own, isOwn := ownbackends.Of(t.PID)
	switch {
	case t.System:
		return "it is a system process, not a client session"
	case isOwn:
		return fmt.Sprintf("it is the collector's own %s (backend pid %d)", own, t.PID)
	case t.PID <= 0:
		return "the snapshot names no coordinator backend to signal"
	case t.BackendStart.IsZero():
		return fmt.Sprintf("the snapshot does not name the start of its backend (pid %d), so the server could not tell it from a later backend of the same pid "+
			"(the receiver's role cannot see other users' backend_start?)", t.PID)
	}
	return ""
}

// mismatch says why q does not name the session's running query.
func (t Target) mismatch(q Query) string {
	if !t.Running {
		return fmt.Sprintf("%s runs no query (state %q in the newest snapshot)", t.Name(), t.State)
	}
	if q.Ccnt != 0 {
		switch {
		case t.QueryCcnt == 0:
			return fmt.Sprintf("%s: the snapshot does not know the running query's command count, so ccnt %d cannot be checked: "+
				"name the query by query_start, or with ccnt 0",
				t.Name(), q.Ccnt)
		case t.QueryCcnt != q.Ccnt:
			return fmt.Sprintf("%s: its running query is ccnt %d, not %d", t.Name(), t.QueryCcnt, q.Ccnt)
		}
	}
	if !q.Start.IsZero() && (t.QueryStart.IsZero() || !t.QueryStart.Equal(q.Start)) {
		return fmt.Sprintf("%s: its running query started at %s, not %s", t.Name(), rfc3339(t.QueryStart), rfc3339(q.Start))
	}
	return ""
}

// rfc3339 formats a time as the API's timestamps do; zero (none) as 1970.
func rfc3339(t time.Time) string {
	if t.IsZero() {
		t = time.Unix(0, 0)
	}
	return t.UTC().Format(time.RFC3339Nano)
}
