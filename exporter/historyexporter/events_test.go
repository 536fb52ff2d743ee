// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
)

// The sample workload: query i of a run belongs to session 100+i/5 (five
// queries each, ccnt 1..5), user alice (even i) or bob (odd i), and differs
// from the others in every figure the documented SQL sorts by.
const (
	sampleTmID           = 1764000000
	queriesPerSession    = 5
	sampleSessionIDStart = 100
)

func sampleUser(i int) string { return []string{"alice", "bob"}[i%2] }

// sampleQuery is query i, ending at end.
func sampleQuery(i int, end time.Time) *events.FinishedQuery {
	text := fmt.Sprintf("SELECT %d FROM t -- query %d", i, i)
	q := &events.FinishedQuery{
		Session: pipeline.SessionKey{TmID: sampleTmID, ID: int64(sampleSessionIDStart + i/queriesPerSession)},
		Who: events.SessionWho{Database: "sales", User: sampleUser(i), Application: pipeline.NullOf(new("psql")),
			ClientAddress: pipeline.NullOf(new("10.0.0.7")), ClientPort: pipeline.NullOf(new(int64(50000 + i))),
			ResourceGroup: pipeline.NullOf(new("default_group"))},
		CommandCount: int64(i%queriesPerSession + 1),
		// Nanoseconds beyond the server's microseconds.
		Start: end.Add(-2*time.Second - 345_678_912).UnixNano(), End: end.UnixNano(),
		// Every status; partial (below) on a period prime to theirs, so
		// both values of it stand beside each.
		Status: sampleStatuses[i%len(sampleStatuses)], Text: &text, Known: 1<<pipeline.NumCounters - 1,
		// Every figure has more significant digits than a float32 or a
		// rounded text would keep.
		Segments: []pipeline.SegmentUse{
			{Host: "mdw", Segment: -1, CPU: 100_000_007},
			{Host: "sdw1", Segment: 0, CPU: int64(i+1)*1e9 + 123_456_789, Read: int64(i)<<20 + 17, Written: int64(i)<<10 + 3},
			{Host: "sdw2", Segment: 1, CPU: 500_000_011},
		},
		Skew: pipeline.SkewPair{
			CPU: pipeline.Skew{Ratio: float64(i%7)/10 + 1e-9*float64(i), MaxOverAvg: 1 + float64(i%7)/10 + 1e-9, Hottest: 0, Segments: 2, OK: true},
			IO:  pipeline.Skew{Ratio: 0.25 + 1e-9, MaxOverAvg: 1.25 + 1e-9, Hottest: 0, Segments: 2, OK: true},
		},
		LockWait: int64(i%4)*1e9 + 987_654_321*int64(min(i%4, 1)),
	}
	switch q.Status {
	case events.QueryError:
		q.SQLState, q.ErrorMessage = "22012", "division by zero"
	case events.QueryCancelled:
		q.SQLState, q.ErrorMessage, q.CancelReason = "57014", "canceling statement due to statement timeout", events.CancelStatementTimeout
	case events.QueryTerminated:
		q.SQLState, q.ErrorMessage = "57P01", "terminating connection due to administrator command"
	}
	for c := range q.Totals {
		q.Totals[c] = int64(c+1)*1_000_000_007 + int64(i)
	}
	q.Totals[pipeline.CPUUser] = int64(i+1)*1e9 + 123_456_789
	q.Totals[pipeline.CPUSystem] = 100_000_007
	if i%3 == 0 {
		q.Spill = &pipeline.QuerySpill{MaxBytes: int64(i+1) << 20, MaxFiles: int64(i%5 + 1)}
	}
	if i%4 != 0 {
		q.LockBlocker = int64(sampleSessionIDStart - 1)
	}
	switch i % 5 {
	case 3:
		q.Partial, q.PartialCause = true, events.PartialCause{Hosts: []string{"sdw2"}, Since: q.Start + 1_000_000_001}
	case 4:
		q.Partial, q.PartialCause = true, events.PartialCause{StartedBefore: true, Since: q.Start + 500_000_003}
	}
	return q
}

// sampleStatuses are every status a finished query can have.
var sampleStatuses = []string{events.QueryCompleted, events.QueryError, events.QueryCancelled, events.QueryTerminated,
	events.QueryClientLost, events.QueryAborted, events.QueryUnknown}

// sampleSession is the session of queries first..first+4, ending at end.
func sampleSession(first int, end time.Time) *events.EndedSession {
	q := sampleQuery(first, end)
	s := &events.EndedSession{Session: q.Session, Who: q.Who, Start: end.Add(-time.Minute).UnixNano(), End: end.UnixNano(),
		EndReason: []string{events.SessionClientDisconnect, events.SessionTerminated, events.SessionConnectionLost}[first/queriesPerSession%3],
		Queries:   queriesPerSession, Known: q.Known, Totals: q.Totals, MemoryPeak: 64 << 20, LockWait: q.LockWait}
	if first/queriesPerSession%2 == 1 {
		s.Partial, s.PartialCause = true, events.PartialCause{StartedBefore: true, Hosts: []string{"sdw1", "sdw2"}, Since: s.Start + 7_000_000_009}
	}
	if s.EndReason == events.SessionTerminated {
		s.SQLState, s.Message = "57P01", "terminating connection due to administrator command"
	}
	return s
}

// workload is queries first..first+n-1 ending one second apart up to
// end, and a session event per five of them (first a multiple of five).
func workload(first, n int, end time.Time) plog.Logs {
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for i := first; i < first+n; i++ {
		at := endOf(i, first+n, end)
		pipelinetest.AppendQueryEvent(lrs, sampleQuery(i, at), 1)
		if i%queriesPerSession == queriesPerSession-1 {
			pipelinetest.AppendSessionEvent(lrs, sampleSession(i-queriesPerSession+1, at), 1)
		}
	}
	return ld
}

// sessionsOf is how many session events workload(0, n) holds.
func sessionsOf(n int) int { return n / queriesPerSession }

// endOf is when query i of a workload of queries up to last-1 ends.
func endOf(i, last int, end time.Time) time.Time {
	return end.Add(-time.Duration(last-1-i)*time.Second + time.Duration(i)*1_234_567)
}

// sampleRuleAction is firing i of a rule workload, at at: two rules over
// the sample sessions, in every mode and outcome, with text that needs
// escaping in a COPY row and an array literal, and a session running no
// query (no ccnt, no query_start) every fourth.
func sampleRuleAction(i int, at time.Time) *events.RuleAction {
	a := &events.RuleAction{
		Time: at.UnixNano(), Rule: []string{"runaway-spill", "skewed-cpu"}[i%2], Mode: "enforce", Action: "cancel", Outcome: "done",
		Session: pipeline.SessionKey{TmID: sampleTmID, ID: int64(sampleSessionIDStart + i/queriesPerSession)}, PID: int64(4000 + i),
		CommandCount: int64(i%queriesPerSession + 1), QueryStart: at.Add(-time.Minute - 345_678_912).UnixNano(),
		User: sampleUser(i), Database: "sales", Application: "psql", SessionGroup: "default_group",
		Predicates: []string{"gpotel.query.spill.size > 1GiB", `gpotel.query.cpu.time > 60s`},
		Values:     []float64{float64(i+1)*(1<<30) + 0.5, 61.123456789 + 1e-9*float64(i)},
	}
	switch i % 3 {
	case 1:
		a.Mode, a.Outcome, a.OutcomeDetail = "observe", "observed", "observe mode: would cancel"
	case 2:
		a.Action, a.ResourceGroup, a.Outcome = "move", "small", "failed"
		a.OutcomeDetail = "ERROR: \"small\"\tis not a resource group \\ {x,y}"
		a.Predicates = append(a.Predicates, `gpotel.session.lock.wait >= 1 "quoted", {braced}\`)
		a.Values = append(a.Values, 1)
	}
	if i%4 == 3 {
		a.CommandCount, a.QueryStart, a.Application, a.SessionGroup = 0, 0, "", ""
	}
	return a
}

// ruleWorkload is n firings, the last at end, one a second.
func ruleWorkload(first, n int, end time.Time) plog.Logs {
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for i := first; i < first+n; i++ {
		events.AppendRuleAction(lrs, sampleRuleAction(i, endOf(i, first+n, end)), 1)
	}
	return ld
}
