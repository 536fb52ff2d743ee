// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package querylife

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// The tracker is driven here without the processor's store: each snapshot
// is the activities, the processes' steps and the endings a test says.

// session7 is the session most tests follow: head pid 1007 on the
// coordinator (host row 0, mdw), backend started at 0.5 s.
var session7 = pipeline.SessionKey{ID: 7}

const headPID = 1007

func ns(sec float64) int64 { return int64(sec * float64(time.Second)) }

// proc is one process read in a snapshot, with the CPU it used since its
// previous reading.
type proc struct {
	session pipeline.SessionKey
	pid     int32
	host    uint32 // 0: mdw, 1: sdw1
	segment int32
	ccnt    int64 // its title's command count
	cpu     float64
}

// head is session 7's head process with its title's command count.
func head(ccnt int64, cpu float64) proc {
	return proc{session: session7, pid: headPID, segment: -1, ccnt: ccnt, cpu: cpu}
}

// executor is session 7's process on sdw1, segment 0.
func executor(ccnt int64, cpu float64) proc {
	return proc{session: session7, pid: 4242, host: 1, segment: 0, ccnt: ccnt, cpu: cpu}
}

// seen is one snapshot as the tracker reads it.
type seen struct {
	acts    map[pipeline.SessionKey]Activity
	procs   []proc
	endings []snapshot.Ending
	// logThrough: mdw's log has been read through it (s); 0: not read.
	logThrough float64
}

// world feeds one tracker its snapshots, keeping the session and process
// rows a store would.
type world struct {
	tr          *Tracker
	seq         uint64
	prev        int64
	sessionRows map[pipeline.SessionKey]uint32
	processRows map[ProcessID]uint32
	// work is every event written so far.
	work Work
}

func newWorld() *world {
	return &world{tr: New(Config{Keep: time.Minute, MaxFinished: 100}), sessionRows: map[pipeline.SessionKey]uint32{},
		processRows: map[ProcessID]uint32{}}
}

var hosts = Hosts{Names: []string{"mdw", "sdw1"}, Down: []bool{false, false}, DownSince: []int64{0, 0}}

// at feeds the snapshot at sec and keeps its events.
func (w *world) at(sec float64, s seen) Work {
	w.seq++
	for _, p := range s.procs {
		if _, ok := w.sessionRows[p.session]; !ok {
			w.sessionRows[p.session] = uint32(len(w.sessionRows))
		}
	}
	in := &Snapshot{Seq: w.seq, Time: ns(sec), Prev: w.prev, Activities: s.acts, Hosts: hosts,
		Processes: &fakeProcesses{w: w, now: ns(sec), procs: s.procs}}
	if len(s.endings) > 0 || s.logThrough > 0 {
		in.Endings = []HostEndings{{HostEndings: snapshot.HostEndings{Host: "mdw", Endings: s.endings, LogReadThrough: ns(s.logThrough)}}}
	}
	w.prev = in.Time
	out := w.tr.Update(in)
	w.work.Finished = append(w.work.Finished, out.Finished...)
	w.work.Ended = append(w.work.Ended, out.Ended...)
	return out
}

// fakeProcesses is one snapshot's processes without a store; every
// process was created at 0.
type fakeProcesses struct {
	w     *world
	now   int64
	procs []proc
}

func (f *fakeProcesses) Sessions() int { return len(f.w.sessionRows) }

func (f *fakeProcesses) SessionRow(key pipeline.SessionKey) (uint32, bool) {
	row, ok := f.w.sessionRows[key]
	return row, ok
}

func (f *fakeProcesses) HeadCommandCount(key pipeline.SessionKey, pid int64) int64 {
	for _, p := range f.procs {
		if p.session == key && int64(p.pid) == pid && p.segment == -1 {
			return p.ccnt
		}
	}
	return 0
}

func (f *fakeProcesses) SessionMemory(pipeline.SessionKey) int64 { return 0 }

func (f *fakeProcesses) Steps(yield func(*Step)) {
	for _, p := range f.procs {
		id := ProcessID{Session: f.w.sessionRows[p.session], PID: p.pid, Host: p.host}
		row, ok := f.w.processRows[id]
		if !ok {
			row = uint32(len(f.w.processRows))
			f.w.processRows[id] = row
		}
		step := Step{Row: row, Process: id, Segment: p.segment, CommandCount: p.ccnt, Known: 1<<pipeline.CPUUser | 1<<pipeline.CPUSystem,
			ReadAt: f.now}
		step.Counters[pipeline.CPUUser] = ns(p.cpu)
		yield(&step)
	}
}

// running is session 7 running the statement that started at start (s).
func running(start float64) map[pipeline.SessionKey]Activity {
	return map[pipeline.SessionKey]Activity{session7: {PID: headPID, Running: true, QueryStart: ns(start), BackendStart: ns(0.5)}}
}

// idle is session 7 idle since end after the statement that started at start.
func idle(start, end float64) map[pipeline.SessionKey]Activity {
	return map[pipeline.SessionKey]Activity{session7: {PID: headPID, QueryStart: ns(start), StateChange: ns(end), BackendStart: ns(0.5)}}
}

// gone is no session left.
var gone = map[pipeline.SessionKey]Activity{}

// logged is a log record of session 7's head at sec.
func logged(sec float64, severity, sqlstate, message string) snapshot.Ending {
	return snapshot.Ending{Session: 7, PID: headPID, Time: ns(sec), Severity: severity, SQLState: sqlstate, Message: message}
}

// exited is the exit of session 7's head at sec with code (or signal).
func exited(sec float64, code, signal int64) snapshot.Ending {
	return snapshot.Ending{Session: 7, PID: headPID, Time: ns(sec), Exited: true, ExitCode: code, Signal: signal}
}

// ranAndWentIdle runs session 7's statement from 1 s (seen at 1 and 2),
// idle from 2.5 s (seen at 3) with the given endings heard at 3, then
// gone at 4 and 5 with its log read through each snapshot's time.
func ranAndWentIdle(t *testing.T, endings ...snapshot.Ending) *world {
	t.Helper()
	w := newWorld()
	w.at(1, seen{acts: running(1), procs: []proc{head(0, 0)}})
	w.at(2, seen{acts: running(1), procs: []proc{head(0, 1)}})
	w.at(3, seen{acts: idle(1, 2.5), procs: []proc{head(0, 0.5)}, endings: endings, logThrough: 3})
	w.at(4, seen{acts: gone, logThrough: 4})
	w.at(5, seen{acts: gone, logThrough: 5, endings: []snapshot.Ending{exited(4.5, 0, 0)}})
	w.at(6, seen{acts: gone, logThrough: 6})
	require.Len(t, w.work.Finished, 1, "one event for the query")
	require.Len(t, w.work.Ended, 1, "one event for the session")
	return w
}

func TestQueryIdleAfterItWithNoFailureLoggedCompleted(t *testing.T) {
	q := ranAndWentIdle(t).work.Finished[0]
	assert.Equal(t, events.QueryCompleted, q.Status)
	assert.Equal(t, ns(1), q.Start)
	assert.Equal(t, ns(2.5), q.End, "its end is state_change")
	assert.InDelta(t, 1.5, float64(q.Totals[pipeline.CPUUser])/1e9, 1e-9, "its CPU: the steps while it ran")
}

func TestQueryWithAnErrorLoggedInItsTimeFailed(t *testing.T) {
	q := ranAndWentIdle(t, logged(2.4, "ERROR", "42P01", `relation "nope" does not exist`)).work.Finished[0]
	assert.Equal(t, events.QueryError, q.Status)
	assert.Equal(t, "42P01", q.SQLState)
	assert.Equal(t, `relation "nope" does not exist`, q.ErrorMessage)
}

func TestQueryCancelledSaysWhy(t *testing.T) {
	q := ranAndWentIdle(t, logged(2.4, "ERROR", "57014", "canceling statement due to statement timeout")).work.Finished[0]
	assert.Equal(t, events.QueryCancelled, q.Status)
	assert.Equal(t, events.CancelStatementTimeout, q.CancelReason)
}

func TestSessionWhoseClientLeftEndsAsADisconnect(t *testing.T) {
	w := ranAndWentIdle(t)
	s := w.work.Ended[0]
	assert.Equal(t, events.SessionClientDisconnect, s.EndReason)
	assert.Equal(t, ns(0.5), s.Start, "its backend_start")
	assert.Equal(t, ns(4.5), s.End, "its backend's exit")
	assert.Equal(t, int64(1), s.Queries)
}

func TestKilledBackendTerminatesItsRunningQueryAndItsSession(t *testing.T) {
	w := newWorld()
	w.at(1, seen{acts: running(1), procs: []proc{head(0, 0)}})
	w.at(2, seen{acts: running(1), procs: []proc{head(0, 1)}})
	w.at(3, seen{acts: gone, endings: []snapshot.Ending{exited(2.7, 0, 9)}})
	w.at(4, seen{acts: gone})
	require.Len(t, w.work.Finished, 1)
	require.Len(t, w.work.Ended, 1)
	q, s := w.work.Finished[0], w.work.Ended[0]
	assert.Equal(t, events.QueryTerminated, q.Status)
	assert.Equal(t, ns(2.7), q.End, "the exit's time")
	assert.Equal(t, events.SessionTerminated, s.EndReason)
}

// A session gone without its head's exit, where exits are heard, waits for
// it: a backend leaves pg_stat_activity before it exits.
func TestSessionGoneWaitsForItsBackendsExit(t *testing.T) {
	w := newWorld()
	w.at(1, seen{acts: running(1), procs: []proc{head(0, 0)}, endings: []snapshot.Ending{{Session: 99, PID: 5, Exited: true}}})
	w.at(2, seen{acts: idle(1, 1.5), procs: []proc{head(0, 0)}})
	w.at(3, seen{acts: gone})
	w.at(4, seen{acts: gone})
	assert.Empty(t, w.work.Ended, "no event before its exit is heard")
	w.at(5, seen{acts: gone, endings: []snapshot.Ending{exited(2.9, 0, 0)}})
	require.Len(t, w.work.Ended, 1)
	assert.Equal(t, events.SessionClientDisconnect, w.work.Ended[0].EndReason)
}

// Greenplum: the idle title read while pg_stat_activity still showed the
// statement active counts one past its running title; the query keyed by
// it is the statement seen ending, folded into it, not a second one.
func TestIdleTitleOnePastTheRunningOneFoldsIntoTheStatement(t *testing.T) {
	w := newWorld()
	w.at(1, seen{acts: running(1), procs: []proc{head(1, 0), executor(2, 0)}})
	w.at(2, seen{acts: running(1), procs: []proc{head(1, 0.1), executor(2, 1)}})
	out := w.at(3, seen{acts: running(1), procs: []proc{head(2, 0.1), executor(2, 1)}}) // the title went idle first
	assert.Len(t, out.Queries, 2, "before the idle state, the idle title keys a query of its own")
	out = w.at(4, seen{acts: idle(1, 3.5), procs: []proc{head(2, 0), executor(2, 0)}})
	require.Len(t, out.Queries, 1, "the one statement")
	q := out.Queries[0]
	assert.Equal(t, int64(1), q.CommandCount, "its running title's")
	assert.InDelta(t, 2.2, float64(q.Totals[pipeline.CPUUser])/1e9, 1e-9, "all its work, the folded query's too")
	w.at(5, seen{acts: idle(1, 3.5), procs: []proc{head(2, 0), executor(2, 0)}})
	require.Len(t, w.work.Finished, 1, "one event")
	assert.Equal(t, events.QueryCompleted, w.work.Finished[0].Status)
}

// PostgreSQL's session id is its leader's pid: a new backend under the same
// key is another session, and the former one ends by that snapshot.
func TestReusedSessionKeyEndsTheFormerSession(t *testing.T) {
	w := newWorld()
	w.at(1, seen{acts: idle(0.6, 0.8), procs: []proc{head(0, 0)}})
	reused := map[pipeline.SessionKey]Activity{session7: {PID: headPID, BackendStart: ns(1.5)}}
	w.at(2, seen{acts: reused, procs: []proc{head(0, 0)}})
	w.at(3, seen{acts: reused, procs: []proc{head(0, 0)}})
	require.Len(t, w.work.Ended, 1, "the former session's event")
	s := w.work.Ended[0]
	assert.Equal(t, ns(0.5), s.Start, "the former backend's start")
	assert.Equal(t, ns(2), s.End, "the snapshot that saw the key reused")
	assert.Equal(t, events.SessionEndUnknown, s.EndReason, "nothing heard of how it ended")
	require.Len(t, w.tr.sessions, 1)
	assert.Equal(t, ns(1.5), w.tr.sessions[session7].life.start, "the key follows the new session")
}

// The tracker forgets a session that left once its event is written and
// its queries are past the longest window: nothing of it stays.
func TestALeftSessionIsForgottenOnceItsEventIsWritten(t *testing.T) {
	w := newWorld()
	w.tr.keep = ns(5)
	w.at(1, seen{acts: gone})
	w.at(2, seen{acts: map[pipeline.SessionKey]Activity{session7: {PID: headPID, BackendStart: ns(1.5)}}, procs: []proc{head(0, 0.1)}})
	w.at(3, seen{acts: gone})
	require.Len(t, w.tr.sessions, 1, "the session left, its event not yet written")
	for sec := 4.0; sec <= 13; sec++ {
		w.at(sec, seen{acts: gone})
	}
	assert.Empty(t, w.tr.sessions, "long after the only one left and its event was written")
	assert.Empty(t, w.tr.retired)
}
