// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// logged is a coordinator log record of session 7's head at sec.
func logged(sec float64, severity, sqlstate, message string) snapshot.Ending {
	return snapshot.Ending{Session: 7, PID: 1007, Time: at(sec).UnixNano(), Severity: severity, SQLState: sqlstate, Message: message}
}

// exited is the exit of session 7's head at sec with code (or signal).
func exited(sec float64, code, signal int64) snapshot.Ending {
	return snapshot.Ending{Session: 7, PID: 1007, Time: at(sec).UnixNano(), Exited: true, ExitCode: code, Signal: signal}
}

// withEndings adds mdw's endings, its log read through readSec (0: not read).
func withEndings(s pipelinetest.Snapshot, readSec float64, es ...snapshot.Ending) pipelinetest.Snapshot {
	h := snapshot.HostEndings{Host: "mdw", Endings: es}
	if readSec > 0 {
		h.LogReadThrough = at(readSec).UnixNano()
	}
	s.Endings = []snapshot.HostEndings{h}
	return s
}

// endOf runs session 7's query from 0 (seen at 0 and 1), then the given
// snapshots, then two without the session, and returns the query's event
// and the session's.
func endOf(t *testing.T, then ...pipelinetest.Snapshot) (events.FinishedQuery, events.EndedSession) {
	t.Helper()
	p, sink := newTestProcessor(t, queryConfig())
	snaps := append([]pipelinetest.Snapshot{querySnap(0, running(0), nil, backend(0)), querySnap(1, running(0), nil, backend(1))}, then...)
	last := then[len(then)-1].Time.Sub(epoch).Seconds()
	snaps = append(snaps, withEndings(noSession(last+1), last+1), withEndings(noSession(last+2), last+2))
	ev := feedEach(t, p, sink, snaps...)
	require.Len(t, ev.queries, 1, "one event for the query")
	require.Len(t, ev.sessions, 1, "one event for the session")
	return ev.queries[0], ev.sessions[0]
}

func TestLoggedFailureGivesTheStatusAndSQLState(t *testing.T) {
	for _, tc := range []struct {
		name            string
		record          snapshot.Ending
		status, reason  string
		sessionEndsWith string
	}{
		{"division by zero", logged(1.4995, "ERROR", "22012", "division by zero"), events.QueryError, "", events.SessionClientDisconnect},
		{"cancelled", logged(1.4995, "ERROR", "57014", "canceling statement due to user request"), events.QueryCancelled, events.CancelUserRequest, events.SessionClientDisconnect},
		{"statement timeout", logged(1.4995, "ERROR", "57014", "canceling statement due to statement timeout"), events.QueryCancelled, events.CancelStatementTimeout, events.SessionClientDisconnect},
		{"lock timeout", logged(1.4995, "ERROR", "57014", "canceling statement due to lock timeout"), events.QueryCancelled, events.CancelLockTimeout, events.SessionClientDisconnect},
		{"terminated", logged(1.4995, "FATAL", "57P01", "terminating connection due to administrator command"), events.QueryTerminated, "", events.SessionTerminated},
		{"client lost", logged(1.4995, "FATAL", "08006", "connection to client lost"), events.QueryClientLost, "", events.SessionConnectionLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exitCode := int64(0)
			if tc.record.Severity == "FATAL" {
				exitCode = 1
			}
			// Seen running at 1, gone at 2: the log and the exit say how.
			q, s := endOf(t, withEndings(snap(2, nil, nil, backend(1.5)), 2, tc.record, exited(1.6, exitCode, 0)))
			assert.Equal(t, tc.status, q.Status)
			assert.Equal(t, tc.record.SQLState, q.SQLState)
			assert.Equal(t, tc.record.Message, q.ErrorMessage)
			assert.Equal(t, tc.reason, q.CancelReason)
			assert.Equal(t, tc.record.Time, q.End, "its end is the server's")
			assert.Equal(t, tc.sessionEndsWith, s.EndReason)
			assert.Equal(t, at(1.6).UnixNano(), s.End, "the session ends at its backend's exit")
		})
	}
}

func TestIdleAfterItCompletesWhenTheLogNamesNoFailure(t *testing.T) {
	q, _ := endOf(t, withEndings(querySnap(2, idle(0, 1.5), nil, backend(1.5)), 2))
	assert.Equal(t, events.QueryCompleted, q.Status)
	assert.Empty(t, q.SQLState)
	assert.Equal(t, at(1.5).UnixNano(), q.End)
}

// An error outside a transaction leaves the session idle, as a completed
// statement does: the log tells them apart.
func TestIdleAfterAFailureIsTheFailure(t *testing.T) {
	q, _ := endOf(t, withEndings(querySnap(2, idle(0, 1.5), nil, backend(1.5)), 2, logged(1.499, "ERROR", "42703", "column t1.b does not exist")))
	assert.Equal(t, events.QueryError, q.Status)
	assert.Equal(t, "42703", q.SQLState)
	assert.Equal(t, at(1.5).UnixNano(), q.End, "state_change is exact; the log's time is cut to the millisecond")
}

func TestQueryWaitsForTheLogToPassItsEnd(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	ev := feedEach(t, p, sink,
		withEndings(querySnap(0, running(0), nil, backend(0)), 0.1),
		withEndings(querySnap(1, running(0), nil, backend(1)), 1.1),
		withEndings(querySnap(2, idle(0, 1.5), nil, backend(1.5)), 1.2),
		withEndings(querySnap(3, idle(0, 1.5), nil, backend(1.5)), 1.3))
	require.Empty(t, ev.queries, "the log was not read past its end: a failure may still come")
	ev = feedEach(t, p, sink, withEndings(querySnap(4, idle(0, 1.5), nil, backend(1.5)), 3.9, logged(1.4995, "ERROR", "22012", "division by zero")))
	require.Len(t, ev.queries, 1)
	assert.Equal(t, events.QueryError, ev.queries[0].Status)
}

func TestCleanExitAfterTheStatementMeansItCompleted(t *testing.T) {
	q, s := endOf(t, withEndings(snap(2, nil, nil, backend(1.5)), 2, exited(1.7, 0, 0)))
	assert.Equal(t, events.QueryCompleted, q.Status, "a backend exits 0 only while idle")
	assert.Equal(t, at(1.7).UnixNano(), q.End, "its end is the exit's at the latest, not the snapshot's")
	assert.Equal(t, events.SessionClientDisconnect, s.EndReason)
	assert.Equal(t, at(1.7).UnixNano(), s.End)
}

func TestSessionEndReasonFromTheServer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		endings []snapshot.Ending
		query   string
		session string
	}{
		{"terminated while idle", []snapshot.Ending{logged(1.8, "FATAL", "57P01", "terminating connection due to administrator command"), exited(1.8, 1, 0)},
			events.QueryCompleted, events.SessionTerminated},
		// Exit code 2: told to quit at once.
		{"crash of another backend", []snapshot.Ending{exited(1.8, 2, 0)}, events.QueryCompleted, events.SessionServerShutdown},
		{"killed", []snapshot.Ending{exited(1.8, 0, 9)}, events.QueryCompleted, events.SessionTerminated},
		{"connection reset while idle", []snapshot.Ending{logged(1.8, "LOG", "08006", "could not receive data from client: Connection reset by peer"), exited(1.8, 0, 0)},
			events.QueryCompleted, events.SessionConnectionLost},
		{"nothing tells", nil, events.QueryCompleted, events.SessionEndUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, s := endOf(t, withEndings(querySnap(2, idle(0, 1.5), nil, backend(1.5)), 2), withEndings(snap(3, nil, nil, backend(1.5)), 3, tc.endings...))
			assert.Equal(t, tc.query, q.Status, "the session ended after its statement completed")
			assert.Equal(t, tc.session, s.EndReason)
		})
	}
}

func TestFatalWhileRunningWithoutTheLogIsUnknown(t *testing.T) {
	q, s := endOf(t, withEndings(snap(2, nil, nil, backend(1.5)), 0, exited(1.7, 1, 0)))
	assert.Equal(t, events.QueryUnknown, q.Status, "exit code 1 is a FATAL: only the log says which")
	assert.Equal(t, events.SessionEndUnknown, s.EndReason)
}

func TestSignalWhileRunningTerminatesTheQuery(t *testing.T) {
	q, _ := endOf(t, withEndings(snap(2, nil, nil, backend(1.5)), 2, exited(1.7, 0, 9)))
	assert.Equal(t, events.QueryTerminated, q.Status)
	assert.Contains(t, q.ErrorMessage, "signal 9")
}

func TestExitOfAnotherProcessIsIgnored(t *testing.T) {
	other := exited(1.7, 0, 0)
	other.PID = 4242 // a segment backend of the session, not its head
	// Exit records come, so the events wait for the head's, at most the longest window (1 min).
	q, s := endOf(t, withEndings(snap(2, nil, nil, backend(1.5)), 2, other), withEndings(noSession(70), 70))
	assert.Equal(t, events.QueryUnknown, q.Status)
	assert.Equal(t, events.SessionEndUnknown, s.EndReason)
}

// PostgreSQL's session id is the leader's pid: a record of an earlier
// backend with that pid names another session start, and is not this one's.
func TestLogRecordOfAnEarlierBackendIsIgnored(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	first := []pipelinetest.Snapshot{querySnap(0, running(0), nil, backend(0)), querySnap(1, running(0), nil, backend(1))}
	for i := range first {
		first[i].Sessions[0].BackendStart = at(-10)
	}
	stale := logged(1.4995, "ERROR", "22012", "division by zero")
	stale.SessionStart = at(-100).UnixNano()
	idleSnap := withEndings(querySnap(2, idle(0, 1.5), nil, backend(1.5)), 2, stale)
	idleSnap.Sessions[0].BackendStart = at(-10)
	ev := feedEach(t, p, sink, append(first, idleSnap, withEndings(noSession(3), 3), withEndings(noSession(4), 4))...)
	require.Len(t, ev.queries, 1)
	assert.Equal(t, events.QueryCompleted, ev.queries[0].Status)
}

func TestRecordAfterTheQueryEndedIsNotItsFailure(t *testing.T) {
	q, _ := endOf(t, withEndings(querySnap(2, idle(0, 1.5), nil, backend(1.5)), 2, logged(1.9, "ERROR", "22012", "division by zero")))
	assert.Equal(t, events.QueryCompleted, q.Status, "a statement no snapshot saw failed after it")
}

func TestSupersededQueryCompletedWhenTheLogNamesNoFailure(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	ev := feedEach(t, p, sink,
		querySnap(0, running(0), nil, backend(0)),
		querySnap(1, running(0), nil, backend(1)),
		withEndings(querySnap(2, running(1.5), nil, backend(1.5)), 2),
		withEndings(querySnap(3, running(1.5), nil, backend(1.5)), 3),
		withEndings(querySnap(4, running(1.5), nil, backend(1.5)), 4))
	require.Len(t, ev.queries, 1)
	assert.Equal(t, events.QueryCompleted, ev.queries[0].Status)
}

func TestMessageIsBounded(t *testing.T) {
	long := make([]byte, 5000)
	for i := range long {
		long[i] = 'x'
	}
	q, _ := endOf(t, withEndings(querySnap(2, idle(0, 1.5), nil, backend(1.5)), 2, logged(1.4995, "ERROR", "P0001", string(long))))
	assert.LessOrEqual(t, len(q.ErrorMessage), snapshot.MaxEndingMessage)
	assert.Contains(t, q.ErrorMessage, "…", "a cut message says so")
}

// A client killed while rows stream, as a real Greenplum 6 logs it: a LOG
// 08006 (the send failed), then FATAL 08006, exit 1.
func TestClientLostWhileRowsStream(t *testing.T) {
	q, s := endOf(t, withEndings(snap(2, nil, nil, backend(1.5)), 2,
		logged(1.6, "LOG", "08006", "could not send data to client: Connection reset by peer"),
		logged(1.6, "FATAL", "08006", "connection to client lost"), exited(1.61, 1, 0)))
	assert.Equal(t, events.QueryClientLost, q.Status)
	assert.Equal(t, "08006", q.SQLState)
	assert.Equal(t, events.SessionConnectionLost, s.EndReason)
	assert.Equal(t, "connection to client lost", s.Message)
}

// A session whose whole life falls between two snapshots but one, as the
// churn workload's: the one snapshot that saw it is read before its
// backend exits, and that exit record arrives in the same batch. The exit
// still tells how it ended, and that its statement completed.
func TestShortSessionsTellHowTheyEnded(t *testing.T) {
	head := proc("mdw", -1, 7, 1007, 0.7, 0.05, 0)
	head.CommandCount = 1
	p, sink := newTestProcessor(t, queryConfig())
	ev := feedEach(t, p, sink,
		withEndings(noSession(0), 0),
		withEndings(querySnap(1, running(0.8), nil, head, backend(0.1)), 1.2, exited(1.1, 0, 0)),
		withEndings(noSession(2), 2), withEndings(noSession(3), 3), withEndings(noSession(4), 4))
	require.Len(t, ev.sessions, 1)
	require.Len(t, ev.queries, 1)
	assert.Equal(t, events.SessionClientDisconnect, ev.sessions[0].EndReason)
	assert.Equal(t, at(1.1).UnixNano(), ev.sessions[0].End, "its end is its backend's exit")
	assert.Equal(t, events.QueryCompleted, ev.queries[0].Status, "a backend exits 0 only while idle")
	assert.Equal(t, int64(1), ev.queries[0].CommandCount, "the running title's count")
}

// A backend can outlive its pg_stat_activity entry (it leaves the view
// before it exits) past the next scrape's read of exit records: where exit
// records come, the session's event, and that of the query its session
// left running, wait for the exit (at most the longest window) rather than
// say unknown.
func TestSessionEventWaitsForItsBackendsExit(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	other := snapshot.Ending{Session: 99, PID: 1099, Time: at(0).UnixNano(), Exited: true} // exit records come
	ev := feedEach(t, p, sink,
		withEndings(querySnap(0, running(0), nil, backend(0)), 0, other),
		withEndings(querySnap(1, running(0), nil, backend(1)), 1),
		withEndings(noSession(2), 2), withEndings(noSession(3), 3))
	require.Empty(t, ev.sessions, "no event before the backend's exit")
	ev = feedEach(t, p, sink, withEndings(noSession(4), 4, exited(3.5, 0, 0)), withEndings(noSession(5), 5))
	require.Len(t, ev.sessions, 1)
	require.Len(t, ev.queries, 1)
	assert.Equal(t, events.SessionClientDisconnect, ev.sessions[0].EndReason)
	assert.Equal(t, events.QueryCompleted, ev.queries[0].Status)
}
