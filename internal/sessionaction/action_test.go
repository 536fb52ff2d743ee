// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionaction

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/pipeline"
)

// recorder is a Signaller that records what it was asked and answers done, err.
type recorder struct {
	sent []string
	done bool
	err  error
}

func (r *recorder) Cancel(_ context.Context, b Backend, started time.Time) (bool, error) {
	r.sent = append(r.sent, fmt.Sprintf("cancel %d %s %d started %s", b.PID, b.Started.Format(time.TimeOnly), b.SessID, started.Format(time.TimeOnly)))
	return r.done, r.err
}

func (r *recorder) Terminate(_ context.Context, b Backend) (bool, error) {
	r.sent = append(r.sent, fmt.Sprintf("terminate %d", b.PID))
	return r.done, r.err
}

func (r *recorder) Move(_ context.Context, b Backend, group string) (bool, error) {
	r.sent = append(r.sent, fmt.Sprintf("move %d %s", b.PID, group))
	return r.done, r.err
}

var (
	snapshotAt   = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	backendStart = snapshotAt.Add(-time.Hour)
	queryStart   = snapshotAt.Add(-time.Minute)
	freshView    = View{Time: snapshotAt, Age: time.Second, Interval: 10 * time.Second}
)

// runningTarget is a client session whose backend runs query ccnt 3.
func runningTarget() Target {
	return Target{Key: pipeline.SessionKey{TmID: 1, ID: 5}, PID: 1005, BackendStart: backendStart, Running: true, State: "active",
		QueryCcnt: 3, QueryStart: queryStart}
}

// Act says which step decided its outcome, and sends a statement only once
// every check has passed: a component acting on its own rules learns why
// from the outcome, as ActionService's callers do from its answers.
func TestActOutcomeNamesTheStepThatDecidedIt(t *testing.T) {
	system := runningTarget()
	system.System = true
	unnamed := runningTarget()
	unnamed.BackendStart = time.Time{}
	idle := runningTarget()
	idle.Running, idle.State = false, "idle"
	for name, tc := range map[string]struct {
		view   View
		target Target
		req    Request
		result Result
		stage  Stage
	}{
		"an unknown action":       {freshView, runningTarget(), Request{Action: "kill"}, Invalid, StageRequest},
		"a group name too long":   {freshView, runningTarget(), Request{Action: MoveToResourceGroup, Group: string(make([]byte, 64))}, Invalid, StageRequest},
		"no snapshot":             {View{}, runningTarget(), Request{Action: TerminateSession}, Refused, StageView},
		"a stale view":            {View{Time: snapshotAt, Age: time.Minute, Interval: 10 * time.Second}, runningTarget(), Request{Action: TerminateSession}, Refused, StageView},
		"a system process":        {freshView, system, Request{Action: TerminateSession}, Refused, StageTarget},
		"a backend without start": {freshView, unnamed, Request{Action: TerminateSession}, Refused, StageTarget},
		"an idle session's query": {freshView, idle, Request{Action: CancelQuery}, Refused, StageQuery},
		"another command count":   {freshView, runningTarget(), Request{Action: CancelQuery, Query: Query{Ccnt: 2}}, Refused, StageQuery},
		"another start":           {freshView, runningTarget(), Request{Action: MoveToResourceGroup, Group: "etl", Query: Query{Start: queryStart.Add(time.Second)}}, Refused, StageQuery},
	} {
		r := &recorder{done: true}
		o := NewWithSignaller(r, 0).Act(await.Context(t), tc.view, tc.target, tc.req)
		if o.Result != tc.result || o.Stage != tc.stage || o.Err == nil || len(r.sent) > 0 {
			t.Errorf("%s: %+v, sent %v; want %s at stage %d, nothing sent", name, o, r.sent, tc.result, tc.stage)
		}
	}

	r := &recorder{done: true}
	o := NewWithSignaller(r, 0).Act(await.Context(t), freshView, runningTarget(), Request{Action: CancelQuery, Query: Query{Ccnt: 3, Start: queryStart}})
	want := fmt.Sprintf("cancel 1005 %s 5 started %s", backendStart.Format(time.TimeOnly), queryStart.Format(time.TimeOnly))
	if o.Result != Done || o.Stage != StageServer || o.Err != nil || len(r.sent) != 1 || r.sent[0] != want {
		t.Errorf("cancel of the named query: %+v, sent %v; want done, %q", o, r.sent, want)
	}
}

// The server's answer decides the result: the session gone is not found,
// another backend under the pid is refused, an error or a false is failed.
func TestActOutcomeIsTheServersAnswer(t *testing.T) {
	for answer, want := range map[error]Result{
		ErrNoBackend:                       NotFound,
		ErrOtherBackend:                    Refused,
		ErrBackendUnseen:                   Refused,
		ErrOwnSession:                      Refused,
		ErrOtherQuery:                      Refused,
		ErrNoResourceGroups:                Failed,
		errors.New("connect: refused"):     Failed,
		fmt.Errorf("%w (x)", ErrNoBackend): NotFound,
	} {
		r := &recorder{err: answer}
		o := NewWithSignaller(r, 0).Act(await.Context(t), freshView, runningTarget(), Request{Action: TerminateSession})
		if o.Result != want || o.Stage != StageServer || !errors.Is(o.Err, answer) {
			t.Errorf("server answered %v: %+v, want %s", answer, o, want)
		}
	}
	o := NewWithSignaller(&recorder{}, 0).Act(await.Context(t), freshView, runningTarget(), Request{Action: TerminateSession})
	if o.Result != Failed || !errors.Is(o.Err, ErrNotDone) {
		t.Errorf("server did not signal: %+v, want failed, ErrNotDone", o)
	}
}
