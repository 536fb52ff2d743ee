// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package viewtest builds the batches the sessionstate exporter's tests
// feed it, as the snapshotdiff processor writes them (docs/pipeline.md),
// and holds the fixtures its packages' tests share.
package viewtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

const (
	// TmID is the cluster start time every test session and event carries.
	TmID = 1700000000
	// Coordinator is the host.name of every test snapshot.
	Coordinator = "mdw"
	// ActionToken is the action token of the tests that act.
	ActionToken = "act-now-act-now-act-now-act-now!" // #nosec G101 -- a test's token
)

// ActionTokenFile writes an action token file as an operator would: 0600.
func ActionTokenFile(t testing.TB, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "action.token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// scope names the test batches' instrumentation scope (the exporter reads
// none: resources go by their kind).
var scope = snapshot.Scope{Name: "github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/viewtest"}

// Snapshot is a closing batch at at that holds no session: a snapshot
// resource of Coordinator, with segment host sdw1 answering.
func Snapshot(at time.Time) pmetric.Metrics {
	return snapshot.NewClosingEncoder(scope, at, snapshot.Switches{}).Encode(&snapshot.Closing{
		Time: at, TmID: TmID, Dialect: "gp6", Coordinator: Coordinator,
		Hosts: []snapshot.HostAnswer{{Host: "sdw1", Up: true}},
	})
}

// FinishedQuery is query n of a varied set: each figure's order over n
// differs from the key's (n·5 mod 11), and every fourth query lacks the
// optional fields (no text, spill, lock blocker, vmem, application,
// delays).
func FinishedQuery(n int, end time.Time) events.FinishedQuery {
	rank := int64(n*5%11 + 1)
	ns := func(s int64) int64 { return s * int64(time.Second) / 10 }
	q := events.FinishedQuery{
		Session: pipeline.SessionKey{TmID: TmID, ID: int64(100 + n%3)},
		Who: events.SessionWho{Database: []string{"sales", "hr", "ops"}[n%3], User: []string{"bob", "alice"}[n%2],
			ClientAddress: pipeline.Null[string]{V: "10.0.0.9", Valid: true}, ClientPort: pipeline.Null[int64]{V: 50000 + rank, Valid: true}},
		CommandCount: int64(n + 1), Start: end.Add(-time.Duration(rank) * time.Second).UnixNano(), End: end.UnixNano(),
		Status: []string{events.QueryCompleted, events.QueryError, events.QueryCancelled, events.QueryUnknown,
			events.QueryTerminated, events.QueryClientLost, events.QueryAborted}[n%7],
		Partial:  n%3 != 2,
		LockWait: ns(rank * 3 % 7),
		SQLState: "57014", ErrorMessage: "canceling statement due to statement timeout", CancelReason: events.CancelStatementTimeout,
		EndedByRule: "runaway-spill",
		Segments: []pipeline.SegmentUse{
			{Host: Coordinator, Segment: -1, CPU: ns(rank), Read: 10 * rank, Written: 3 * rank},
			{Host: "sdw1", Segment: 0, CPU: ns(2 * rank), Read: 100 * rank, Written: 30},
			{Host: "sdw2", Segment: 1, CPU: ns(12 - rank), Read: 1000, Written: 300 * rank},
		},
		Skew: pipeline.SkewPair{
			CPU: pipeline.Skew{Ratio: float64(rank) / 20, MaxOverAvg: 1 + float64(rank)/10, Hottest: int32(rank % 2), Segments: 2, OK: true},
			IO:  pipeline.Skew{Ratio: float64(12-rank) / 20, MaxOverAvg: 2 - float64(rank)/10, Hottest: int32(1 - rank%2), Segments: 2, OK: true},
		},
	}
	switch n % 3 {
	case 0:
		q.PartialCause = events.PartialCause{StartedBefore: true, Since: q.Start + int64(time.Second)}
	case 1:
		q.PartialCause = events.PartialCause{Hosts: []string{"sdw2"}, Since: q.Start + int64(time.Second)}
	}
	for c := range pipeline.NumCounters {
		q.Totals[c] = (rank*int64(c+3))%17*1000 + int64(c)
		q.Known |= 1 << c
	}
	if n%4 != 0 {
		text := fmt.Sprintf("select %d from t%d", rank, n)
		q.Text = &text
		q.Spill = &pipeline.QuerySpill{MaxBytes: rank << 20, MaxFiles: 12 - rank}
		q.LockBlocker = 200 + rank
		q.VmemPeak = (12 - rank) << 20
		q.Who.Application = pipeline.Null[string]{V: fmt.Sprintf("app%d", rank%3), Valid: true}
		q.Who.ResourceGroup = pipeline.Null[string]{V: "default_group", Valid: true}
	} else {
		q.Known &^= 1<<pipeline.DelaySwapin | 1<<pipeline.DelayIRQ | 1<<pipeline.DiskDelay
	}
	return q
}

// EndedSession is session n of a varied set, as FinishedQuery.
func EndedSession(n int, end time.Time) events.EndedSession {
	q := FinishedQuery(n, end)
	s := events.EndedSession{Session: pipeline.SessionKey{TmID: TmID, ID: int64(300 + n)}, Who: q.Who, Start: q.Start, End: q.End,
		Partial: q.Partial, PartialCause: q.PartialCause, Queries: int64(n*3%5 + 1), Totals: q.Totals, Known: q.Known, MemoryPeak: int64(n*7%9) << 20,
		LockWait: q.LockWait, VmemPeak: q.VmemPeak, EndReason: events.SessionTerminated, SQLState: "57P01",
		Message: "terminating connection due to administrator command"}
	if q.Spill != nil {
		s.SpillMax = q.Spill.MaxBytes
	}
	return s
}

// FinishedBatch is a closing batch at at (a snapshot resource of mdw)
// carrying the events.
func FinishedBatch(at time.Time, queries []events.FinishedQuery, sessions []events.EndedSession) pmetric.Metrics {
	md := Snapshot(at)
	for i := range queries {
		events.AppendFinishedQuery(md.ResourceMetrics(), &queries[i])
	}
	for i := range sessions {
		events.AppendEndedSession(md.ResourceMetrics(), &sessions[i])
	}
	return md
}
