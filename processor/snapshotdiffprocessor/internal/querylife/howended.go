// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package querylife

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// How a query or a session ended comes from the server (docs/pipeline.md,
// how it ended): the coordinator's log records of failures and its
// backends' exits, which the receiver hands over as endings resources.
// The snapshots only say when.

// logSlack: the log writes times in milliseconds, cut, not rounded.
const logSlack = int64(time.Millisecond)

// logState is how far the coordinator's log was read.
type logState uint8

const (
	logNotRead logState = iota // no endings resource said it reads the log
	logCovers                  // read past the time in question
	logBehind                  // read, but not yet past it
)

// verdict is how a query or a session ended, and when.
type verdict struct {
	status, sqlstate, message, cancelReason string
	end                                     int64
}

// judgeQuery decides how q ended: the log record of its session that falls
// within it says how it failed; else its session idle after it, or its
// backend's clean exit (code 0: it was idle), says it completed when the
// log, read past its end, names no failure (or no log is read); else
// unknown. Never a guess from the snapshot's timing.
func judgeQuery(q *query, says *serverSays, log logState) verdict {
	v := verdict{end: q.end}
	rec, ambiguous := says.recordWithin(q)
	if rec != nil {
		v.status, v.cancelReason = statusOf(rec)
		v.sqlstate, v.message = rec.SQLState, rec.Message
		if q.seen != seenIdle && q.seen != seenAborted {
			v.end = max(rec.Time, q.start) // state_change, when seen, is exact; the log's time is cut to ms
		}
		return v
	}
	quiet := log != logBehind // no failure logged, or no log to tell one
	switch q.seen {
	case seenIdle:
		v.status = pick(quiet, events.QueryCompleted, events.QueryUnknown)
	case seenAborted:
		v.status = events.QueryAborted
	case superseded:
		v.status = pick(log == logCovers && !ambiguous, events.QueryCompleted, events.QueryUnknown)
	case sessionLeft:
		v.status = events.QueryUnknown
		if x := says.exit; x != nil {
			v.end = max(x.Time, q.start)
			switch {
			case x.Signal != 0:
				v.status, v.message = events.QueryTerminated, fmt.Sprintf("its backend was killed by signal %d", x.Signal)
			case x.ExitCode == 0 && quiet && !ambiguous:
				v.status = events.QueryCompleted // a backend exits 0 only while idle: its statement had completed
			case x.ExitCode == exitQuickDie:
				v.status, v.message = events.QueryTerminated, "its backend was told to quit at once (server shutdown or another backend's crash)"
			}
		}
	default:
		v.status = events.QueryUnknown
	}
	return v
}

// exitQuickDie is the exit code of a backend told to quit at once
// (SIGQUIT: immediate shutdown, or the crash of another backend).
const exitQuickDie = 2

func pick[T any](cond bool, yes, no T) T {
	if cond {
		return yes
	}
	return no
}

// recordWithin is the first failure the log names for q: a record of its
// session from its start on, up to its end where a snapshot saw the
// session idle or the next statement start after it; of a query whose
// session left while it ran, any later one. On Greenplum a record's
// command count must be q's by the numbering rule (countOf); ambiguous
// tells a failure in q's time that the rule can neither give to q nor rule
// out (a later statement's, or one of q's functions').
func (says *serverSays) recordWithin(q *query) (rec *snapshot.Ending, ambiguous bool) {
	lo, hi := q.start-logSlack, int64(1<<63-1)
	switch q.seen {
	case seenIdle, seenAborted:
		hi = q.end + logSlack
	case superseded:
		hi = q.end
	}
	for i := range says.logged {
		r := &says.logged[i]
		if r.Time < lo || r.Time > hi || !endsAStatement(r) {
			continue
		}
		switch q.countOf(r.CommandCount) {
		case itsCount:
			return r, false
		case maybeItsCount:
			ambiguous = true
		}
	}
	return nil, ambiguous
}

// countMatch is how a log record's command count relates to a query.
type countMatch uint8

const (
	notItsCount countMatch = iota
	itsCount
	maybeItsCount
)

// countOf applies Greenplum's numbering rule (docs/compatibility.md): a
// record's cmd<M> is the coordinator's count when it was logged. The idle
// title after a statement shows its final count, which every failure of
// the statement is logged at; no other statement has a count from its
// running title's to that one (a title read a moment after pg_stat_activity
// may show the next statement's, so the range and not the idle count alone).
// A running simple-protocol title shows N, and
// the statement fails at N (parse, analysis) or N+1 (execution, after
// CreateQueryDesc counted again). A count past N+1 with no idle title seen
// is a later statement's or one of q's SQL-running functions': ambiguous.
// Either count unknown (0: PostgreSQL, the testbed's log) leaves the time alone to match.
func (q *query) countOf(m int64) countMatch {
	switch {
	case m == 0 || q.ccnt == 0:
		return itsCount
	case q.lastCcnt > 0:
		return pick(m >= q.ccnt && m <= q.lastCcnt, itsCount, notItsCount)
	case m == q.ccnt || m == nextCommandCount(q.ccnt):
		return itsCount
	case m > q.ccnt:
		return maybeItsCount
	}
	return notItsCount
}

// nextCommandCount is Greenplum's increment_command_count: it wraps to 1, never 0.
func nextCommandCount(n int64) int64 {
	if n >= math.MaxInt32 {
		return 1
	}
	return n + 1
}

// endsAStatement tells a record that ends the statement it is logged in:
// an ERROR, FATAL or PANIC, or a lost connection (class 08, which the
// server logs at LOG as the client cannot hear it).
func endsAStatement(r *snapshot.Ending) bool {
	switch r.Severity {
	case "ERROR", "FATAL", "PANIC":
		return true
	}
	return strings.HasPrefix(r.SQLState, "08")
}

// statusOf maps a failure's SQLSTATE to a query status: 57014 cancelled
// (why, from the message), 08xxx client_lost, 57P01-57P05 and any other
// FATAL or PANIC terminated, the rest error.
func statusOf(r *snapshot.Ending) (status, cancelReason string) {
	switch {
	case r.SQLState == "57014":
		return events.QueryCancelled, cancelReasonOf(r.Message)
	case strings.HasPrefix(r.SQLState, "08"):
		return events.QueryClientLost, ""
	case strings.HasPrefix(r.SQLState, "57P"), r.Severity == "FATAL", r.Severity == "PANIC":
		return events.QueryTerminated, ""
	}
	return events.QueryError, ""
}

// cancelReasonOf reads why a statement was cancelled from the server's
// (untranslated) message: "canceling statement due to user request",
// "… statement timeout", "… lock timeout".
func cancelReasonOf(msg string) string {
	switch {
	case strings.Contains(msg, "user request"):
		return events.CancelUserRequest
	case strings.Contains(msg, "statement timeout"):
		return events.CancelStatementTimeout
	case strings.Contains(msg, "lock timeout"):
		return events.CancelLockTimeout
	}
	return events.CancelOther
}

// judgeSession decides how a session ended: the FATAL or PANIC that ended
// it, else its coordinator backend's exit (0: the client left; 2: told to
// quit at once; a signal: killed), else unknown. Its end is the exit's
// time, else the record's, else gone (the first snapshot without it).
func judgeSession(says *serverSays, gone int64) verdict {
	v := verdict{status: events.SessionEndUnknown, end: gone}
	var fatal, lost *snapshot.Ending
	for i := range says.logged {
		switch r := &says.logged[i]; {
		case r.Severity == "FATAL" || r.Severity == "PANIC":
			fatal = r
		case strings.HasPrefix(r.SQLState, "08"):
			lost = r
		}
	}
	if x := says.exit; x != nil {
		v.end = x.Time
	} else if fatal != nil {
		v.end = fatal.Time
	}
	x := says.exit
	switch {
	case fatal != nil:
		v.sqlstate, v.message = fatal.SQLState, fatal.Message
		switch {
		case strings.HasPrefix(fatal.SQLState, "08"):
			v.status = events.SessionConnectionLost
		case fatal.SQLState == "57P02" || fatal.SQLState == "57P03" || fatal.Severity == "PANIC":
			v.status = events.SessionServerShutdown
		default:
			v.status = events.SessionTerminated
		}
	case x == nil:
	case x.Signal != 0:
		v.status, v.message = events.SessionTerminated, fmt.Sprintf("its backend was killed by signal %d", x.Signal)
	case x.ExitCode == 0 && lost != nil:
		v.status, v.sqlstate, v.message = events.SessionConnectionLost, lost.SQLState, lost.Message
	case x.ExitCode == 0:
		v.status = events.SessionClientDisconnect
	case x.ExitCode == exitQuickDie:
		v.status = events.SessionServerShutdown
	}
	return v
}
