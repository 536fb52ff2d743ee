// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// finishedWork is the finished_query and ended_session resources of one output.
type finishedWork struct {
	queries  []events.FinishedQuery
	sessions []events.EndedSession
}

func eventsOf(t testing.TB, md pmetric.Metrics) finishedWork {
	t.Helper()
	var ev finishedWork
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		attrs := rms.At(i).Resource().Attributes()
		switch pipeline.KindOf(attrs) {
		case pipeline.KindFinishedQuery:
			q, err := pipelinetest.DecodeQueryEvent(attrs)
			if err != nil {
				t.Fatal(err)
			}
			ev.queries = append(ev.queries, q)
		case pipeline.KindEndedSession:
			s, err := pipelinetest.DecodeSessionEvent(attrs)
			if err != nil {
				t.Fatal(err)
			}
			ev.sessions = append(ev.sessions, s)
		}
	}
	return ev
}

// feedEach feeds the snapshots one at a time and gathers the events of
// every output.
func feedEach(t testing.TB, p processor.Metrics, sink *consumertest.MetricsSink, snaps ...pipelinetest.Snapshot) finishedWork {
	t.Helper()
	var all finishedWork
	for _, s := range snaps {
		sink.Reset()
		ev := eventsOf(t, feed(t, p, sink, s))
		all.queries = append(all.queries, ev.queries...)
		all.sessions = append(all.sessions, ev.sessions...)
	}
	return all
}

// noSession is a snapshot at sec in which sdw1 answers with no process
// and no session is left.
func noSession(sec float64) pipelinetest.Snapshot {
	s := snap(sec, nil, nil)
	s.Hosts = []pipelinetest.Host{{Name: "sdw1", Up: true}}
	return s
}

func cpuSeconds(c *pipeline.Counters) float64 {
	return float64(c[pipeline.CPUUser]+c[pipeline.CPUSystem]) / 1e9
}

// A query is given at most the CPU its processes could run while it ran:
// when an interval holds work of statements no snapshot saw, the query
// seen in it does not take their CPU (gpotel-top showed 1334 % of a core
// for a query 0.1 s old).
func TestQueryCPUNeverExceedsWhatItsProcessesCouldRun(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	md := feed(t, p, sink,
		querySnap(0, idle(-2, -1), nil, backend(0)),
		// Between 0 and 2 the backend ran statements no snapshot saw for
		// 1.9 s of CPU; the one seen started at 1.9.
		querySnap(2, running(1.9), nil, backend(1.95)))
	got := queryCPU(t, md, 1.9)
	if got > 0.1+1e-9 {
		t.Errorf("query 0.1 s old has %.3f s of CPU from one single-threaded process", got)
	}
	near(t, "its CPU: its time's worth, the cap", got, 0.1)
}

// A statement shorter than a clock tick may be the one a tick of utime or
// stime fell in: it still gets no more than its own time (gpotel-top read
// 22 727 % of a core for a 44 µs commit given one 10 ms tick).
func TestAStatementShorterThanATickGetsAtMostItsTime(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	md := feed(t, p, sink,
		querySnap(0, idle(-2, -1), nil, backend(0)),
		querySnap(1, idle(0.5, 0.50005), nil, backend(0.01)))
	if got := queryCPU(t, md, 0.5); got > 0.00005+1e-9 {
		t.Errorf("a 50 µs statement has %.6f s of CPU", got)
	}
}

// A query that ended before the interval began gets nothing of the head's
// step, though the idle title still shows its count.
func TestIdleHeadTitleGivesNothingToAnEndedQuery(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	md := feed(t, p, sink,
		gpSnap(0, running(0), 1, 0, 2, 0),
		gpSnap(1, idle(0, 0.5), 2, 0.5, 0, 0),
		// The idle head burns 0.2 s (a client's idle chatter) with cmd2.
		gpSnap(2, idle(0, 0.5), 2, 0.7, 0, 0))
	near(t, "the ended statement's CPU", queryCPU(t, md, 0), 0.5)
}

func TestEveryEndedQueryGetsOneEventAfterItSettles(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	snaps := []pipelinetest.Snapshot{
		querySnap(0, running(0), nil, backend(0)),
		querySnap(1, running(0), nil, backend(1)),
		querySnap(2, idle(0, 1.5), nil, backend(1.5)), // seen ended
		querySnap(3, idle(0, 1.5), nil, backend(1.5)), // settled: its event
		querySnap(4, idle(0, 1.5), nil, backend(1.5)),
		querySnap(5, running(4.5), nil, backend(2)),
	}
	for i, s := range snaps {
		sink.Reset()
		ev := eventsOf(t, feed(t, p, sink, s))
		want := 0
		if i == 3 {
			want = 1
		}
		if len(ev.queries) != want {
			t.Fatalf("snapshot %d: %d query events, want %d", i, len(ev.queries), want)
		}
		if want == 1 {
			q := ev.queries[0]
			near(t, "event CPU", cpuSeconds(&q.Totals), 1.5)
			near(t, "duration", float64(q.End-q.Start)/1e9, 1.5)
			if q.Status != events.QueryCompleted || q.Partial || q.Who.Database != "postgres" || q.Who.User != "gpadmin" {
				t.Errorf("event %+v: want completed, not partial, db postgres, user gpadmin", q)
			}
		}
	}
}

// Without the server log or an exit, the status says only what
// pg_stat_activity tells: completed when seen idle after it, aborted when
// idle in an aborted transaction, and unknown otherwise.
func TestQueryEventSaysHowItEnded(t *testing.T) {
	aborted := querySnap(2, idle(0, 1.5), nil, backend(1.5))
	aborted.Sessions[0].State = stateIdleAborted
	for _, tc := range []struct {
		name  string
		snaps []pipelinetest.Snapshot
		want  string
	}{
		{"idle after it", []pipelinetest.Snapshot{querySnap(2, idle(0, 1.5), nil, backend(1.5))}, events.QueryCompleted},
		{"aborted transaction after it", []pipelinetest.Snapshot{aborted}, events.QueryAborted},
		{"the next one started", []pipelinetest.Snapshot{querySnap(2, running(1.5), nil, backend(1.5))}, events.QueryUnknown},
		{"the session left", []pipelinetest.Snapshot{snap(2, nil, nil, backend(1.5))}, events.QueryUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, sink := newTestProcessor(t, queryConfig())
			snaps := append([]pipelinetest.Snapshot{querySnap(0, running(0), nil, backend(0)), querySnap(1, running(0), nil, backend(1))}, tc.snaps...)
			snaps = append(snaps, noSession(3), noSession(4))
			ev := feedEach(t, p, sink, snaps...)
			var first *events.FinishedQuery
			for i := range ev.queries {
				if ev.queries[i].Start == at(0).UnixNano() {
					if first != nil {
						t.Fatal("the query has two events")
					}
					first = &ev.queries[i]
				}
			}
			if first == nil || first.Status != tc.want {
				t.Fatalf("event %+v, want status %q", first, tc.want)
			}
		})
	}
}

// A query that ended before its session was first seen (the collector
// restarted after it) gets no event: its event, if any, is past.
func TestQueryEndedBeforeTheSessionWasSeenGetsNoEvent(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	ev := feedEach(t, p, sink,
		querySnap(10, idle(2, 3), nil, backend(1)),
		querySnap(11, idle(2, 3), nil, backend(1)),
		querySnap(12, idle(2, 3), nil, backend(1)))
	if len(ev.queries) != 0 {
		t.Fatalf("events %+v, want none", ev.queries)
	}
}

// A query that runs when its session is first seen is partial.
func TestQueryRunningWhenFirstSeenIsPartial(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	ev := feedEach(t, p, sink,
		querySnap(10, running(2), nil, backend(1)),
		querySnap(11, idle(2, 10.5), nil, backend(1.5)),
		querySnap(12, idle(2, 10.5), nil, backend(1.5)))
	if len(ev.queries) != 1 || !ev.queries[0].Partial {
		t.Fatalf("events %+v, want one, partial", ev.queries)
	}
}

// An ended query waits for the hosts it ran on: a step held back by a
// silent host is part of its final figures.
func TestQueryEventWaitsForASilentHost(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	ev := feedEach(t, p, sink,
		querySnap(0, running(0), nil, backend(0)),
		querySnap(1, running(0), nil, backend(1)),
		querySnap(2, idle(0, 1.5), []string{"sdw1"}),
		querySnap(3, idle(0, 1.5), []string{"sdw1"}))
	if len(ev.queries) != 0 {
		t.Fatalf("event while its host is silent: %+v", ev.queries)
	}
	ev = feedEach(t, p, sink, querySnap(4, idle(0, 1.5), nil, backend(1.5)))
	if len(ev.queries) != 1 {
		t.Fatalf("%d events once the host answered, want 1", len(ev.queries))
	}
	near(t, "CPU with the held-back step", cpuSeconds(&ev.queries[0].Totals), 1.5)
}

// A query whose host stays silent longer than the longest window gets its
// event then, partial.
func TestQueryEventOfAHostSilentPastTheWindowIsPartial(t *testing.T) {
	cfg := queryConfig()
	cfg.Windows = []time.Duration{5 * time.Second}
	p, sink := newTestProcessor(t, cfg)
	snaps := []pipelinetest.Snapshot{querySnap(0, running(0), nil, backend(0)), querySnap(1, running(0), nil, backend(1))}
	for sec := 2.0; sec <= 9; sec++ {
		snaps = append(snaps, querySnap(sec, idle(0, 1.5), []string{"sdw1"}))
	}
	ev := feedEach(t, p, sink, snaps...)
	if len(ev.queries) != 1 || !ev.queries[0].Partial {
		t.Fatalf("events %+v, want one, partial", ev.queries)
	}
}

// A session's event counts every process it had, the ones whose exit
// record came after the session left included.
func TestSessionEventCountsItsExitedProcesses(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	head := func(cpu float64) pipelinetest.Process { return proc("mdw", -1, 7, 1007, -100, cpu, 0) }
	exited := func(pr pipelinetest.Process) pipelinetest.Process { pr.Exited = true; return pr }
	start := querySnap(0, running(0), nil, head(1), backend(0))
	start.Sessions[0].BackendStart = at(-100)
	second := querySnap(1, idle(0, 0.5), nil, head(1.5), backend(2))
	second.Sessions[0].BackendStart = at(-100)
	ev := feedEach(t, p, sink,
		start, second,
		// Gone at 2; its processes' exit records come at 2 and 3.
		snap(2, nil, nil, exited(head(1.6))),
		snap(3, nil, nil, exited(backend(2.5))),
		noSession(4))
	if len(ev.sessions) != 1 {
		t.Fatalf("%d session events, want 1", len(ev.sessions))
	}
	s := ev.sessions[0]
	near(t, "lifetime CPU: the final totals of both processes", cpuSeconds(&s.Totals), 1.6+2.5)
	if s.Queries != 1 || s.Start != at(-100).UnixNano() || s.End != at(2).UnixNano() || !s.Partial {
		t.Errorf("session event %+v: want 1 query, start -100 s, end 2 s, partial (it started before the first snapshot)", s)
	}
}

// PostgreSQL's session id is the leader's pid: a new backend with the
// same pid is another session, and each gets its event.
func TestReusedSessionKeyIsAnotherSession(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	withStart := func(s pipelinetest.Snapshot, backendStart float64) pipelinetest.Snapshot {
		s.Sessions[0].BackendStart = at(backendStart)
		return s
	}
	ev := feedEach(t, p, sink,
		withStart(querySnap(0, running(0), nil, backend(0)), -1),
		withStart(querySnap(1, idle(0, 0.5), nil, backend(0.5)), -1),
		withStart(querySnap(2, idle(1.5, 1.8), nil, proc("sdw1", 0, 7, 4243, 1.2, 0.3, 0)), 1.2),
		withStart(querySnap(3, idle(1.5, 1.8), nil, proc("sdw1", 0, 7, 4243, 1.2, 0.3, 0)), 1.2),
		noSession(4), noSession(5))
	if len(ev.sessions) != 2 {
		t.Fatalf("%d session events, want 2: %+v", len(ev.sessions), ev.sessions)
	}
	if len(ev.queries) != 2 {
		t.Fatalf("%d query events, want 2: %+v", len(ev.queries), ev.queries)
	}
}

// A system process's session row gets no session event.
func TestSystemSessionGetsNoEvent(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	sys := querySnap(0, neverRan, nil, backend(0))
	sys.Sessions[0].System = true
	ev := feedEach(t, p, sink, sys, noSession(1), noSession(2))
	if len(ev.sessions) != 0 {
		t.Fatalf("session events %+v, want none", ev.sessions)
	}
}

// The time a query is seen waiting for a lock is counted, with the blocker.
func TestQueryEventCountsLockWaits(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	waiting := func(sec float64) pipelinetest.Snapshot {
		s := querySnap(sec, running(0), nil, backend(0))
		s.Sessions[0].Waiting = true
		s.Sessions[0].Greenplum = &snapshot.GreenplumSession{Wait: &snapshot.LockWait{Blocker: 99, Mode: "AccessShareLock"}}
		return s
	}
	ev := feedEach(t, p, sink, querySnap(0, running(0), nil, backend(0)), waiting(1), waiting(2),
		querySnap(3, idle(0, 2.5), nil, backend(0.1)), noSession(4))
	if len(ev.queries) != 1 {
		t.Fatalf("%d events", len(ev.queries))
	}
	near(t, "lock wait", float64(ev.queries[0].LockWait)/1e9, 2)
	if ev.queries[0].LockBlocker != 99 {
		t.Errorf("blocker %d, want 99", ev.queries[0].LockBlocker)
	}
}

// A counter no process of the query reported is absent from its event.
func TestQueryEventKnowsWhatWasMeasured(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	ev := feedEach(t, p, sink, querySnap(0, running(0), nil, backend(0)), querySnap(1, idle(0, 0.5), nil, backend(0.5)), noSession(2))
	if len(ev.queries) != 1 {
		t.Fatal(len(ev.queries))
	}
	known := ev.queries[0].Known
	if known&(1<<pipeline.CPUUser) == 0 || known&(1<<pipeline.DelaySwapin) != 0 {
		t.Errorf("known %b: want CPU, not the swap-in delay no process reported", known)
	}
}

// Events are not held back by max_finished: a burst of ended queries
// larger than it still gets one event each.
func TestEveryQueryOfABurstGetsItsEvent(t *testing.T) {
	cfg := queryConfig()
	cfg.Queries.MaxFinished = 1
	p, sink := newTestProcessor(t, cfg)
	var snaps []pipelinetest.Snapshot
	for i := range 5 {
		sec := float64(i)
		snaps = append(snaps, querySnap(sec, idle(sec-0.5, sec-0.2), nil, backend(sec)))
	}
	snaps = append(snaps, noSession(5), noSession(6))
	ev := feedEach(t, p, sink, snaps...)
	// The first one ended before the session was seen.
	if len(ev.queries) != 4 {
		t.Fatalf("%d events, want 4", len(ev.queries))
	}
	for _, q := range ev.queries {
		// 1 s of CPU per interval, 0.3 s of it its own: the cap.
		near(t, "CPU of a 0.3 s query", cpuSeconds(&q.Totals), 0.3)
	}
}

// busyTick is tick k (60 s apart) of a session that ends a query before
// every tick (started 30 s and ended 10 s before it), of a second session
// that lives from tick 1 to tick 3, running one query, and of a third that
// connects after tick 1, runs one statement and stays idle after it.
func busyTick(k int) pipelinetest.Snapshot {
	sec := float64(60 * k)
	s := sparseTick(k)
	s.Sessions = []pipelinetest.Session{{ID: 1, PID: 1001, DB: "postgres", User: "gpadmin", State: "idle",
		QueryStart: at(sec - 30), StateChange: at(sec - 10)}}
	if k >= 1 && k <= 3 {
		s.Sessions = append(s.Sessions, pipelinetest.Session{ID: 2, PID: 1002, DB: "postgres", User: "gpuser", State: "active",
			QueryStart: at(50), BackendStart: at(45)})
		s.Processes = append(s.Processes, proc("sdw2", 1, 2, 300, 45, float64(k), 0))
	}
	if k >= 2 {
		s.Sessions = append(s.Sessions, pipelinetest.Session{ID: 3, PID: 1003, DB: "postgres", User: "gpuser", State: "idle",
			QueryStart: at(70), StateChange: at(80), BackendStart: at(65)})
		s.Processes = append(s.Processes, proc("sdw2", 1, 3, 301, 65, 1, 0))
	}
	return s
}

// eventKeys counts the events of the outputs by query (session and start)
// and by ended session.
func eventKeys(t *testing.T, outs []pmetric.Metrics) (queries map[[2]int64]int, sessions map[int64]int) {
	queries, sessions = map[[2]int64]int{}, map[int64]int{}
	for _, md := range outs {
		ev := eventsOf(t, md)
		for _, q := range ev.queries {
			queries[[2]int64{q.Session.ID, q.Start}]++
		}
		for _, s := range ev.sessions {
			sessions[s.Session.ID]++
		}
	}
	return queries, sessions
}

// No query or session gets two events whatever happens between the
// receiver and the processor: a refused, lost or reordered batch, a
// restarted receiver or processor (a restarted collector).
func TestEveryQueryEndsOnce(t *testing.T) {
	cfg := queryConfig()
	cfg.Windows = []time.Duration{2 * time.Minute}
	clean, _, _ := sparseRun{tick: busyTick, config: cfg}.run(t)
	queries, cleanSessions := eventKeys(t, clean)
	// Queries of ticks 1..5 settle by tick 6 (tick 0's ended before the
	// session was seen); the second session's query and the session end
	// at tick 4 and settle at 5; the third session's statement settles at 3.
	if len(queries) != 7 || len(cleanSessions) != 1 {
		t.Fatalf("without faults: query events %v, session events %v; want 7 and 1", queries, cleanSessions)
	}
	for name, run := range map[string]sparseRun{
		"refused":             {fault: onFirstBatchOfTick2(refuse)},
		"lost":                {fault: onFirstBatchOfTick2(lose)},
		"reordered":           {fault: onFirstBatchOfTick2(hold), batchSize: 2},
		"receiver restarted":  {restartReceiverAt: 2},
		"processor restarted": {restartProcessAt: 4},
	} {
		t.Run(name, func(t *testing.T) {
			run.tick, run.config = busyTick, cfg
			outs, _, _ := run.run(t)
			queries, sessions := eventKeys(t, outs)
			for k, n := range queries {
				if n != 1 {
					t.Errorf("query %v has %d events", k, n)
				}
			}
			for k, n := range sessions {
				if n != 1 {
					t.Errorf("session %d has %d events", k, n)
				}
			}
			// Every session that ended has its event, whatever the batches
			// met; a processor restarted as the session left never saw it
			// (its state is in memory: docs/pipeline.md, finished work).
			for k := range cleanSessions {
				if sessions[k] == 0 && run.restartProcessAt == 0 {
					t.Errorf("session %d ended without an event", k)
				}
			}
			if len(queries) < 4 {
				t.Errorf("only %d query events: the faults cost more than the queries whose end they hid", len(queries))
			}
		})
	}
}

// A process is read after the snapshot time, by its host's read delay:
// the query's share runs to the read, so a backend busy on one core
// until it was read keeps all of its CPU (with the snapshot time as the
// end, the cap took 0.3 s of it).
func TestQueryShareRunsToTheRead(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	late := func(s pipelinetest.Snapshot) pipelinetest.Snapshot {
		for i := range s.Hosts {
			s.Hosts[i].ReadDelay = 300 * time.Millisecond
		}
		return s
	}
	// One core from 0.5 s on; each read 0.3 s after its snapshot's time.
	md := feed(t, p, sink,
		late(querySnap(0, neverRan, nil, backend(0))),
		late(querySnap(1, running(0.5), nil, backend(0.8))),
		late(querySnap(2, running(0.5), nil, backend(1.8))))
	near(t, "query CPU: all of the backend's", queryCPU(t, md, 0.5), 1.8)
}

// The collector's own monitoring connection runs a statement every scrape:
// neither those statements nor the session are the cluster's finished work,
// even when its last sighting no longer marks it (the collector forgets a
// connection's pid as it closes it, before the backend has left).
func TestCollectorsOwnSessionGetsNoEvent(t *testing.T) {
	for _, own := range []bool{false, true} {
		p, sink := newTestProcessor(t, queryConfig())
		snaps := []pipelinetest.Snapshot{
			querySnap(0, running(0), nil, backend(0)),
			querySnap(1, idle(0, 0.5), nil, backend(0.5)),
			querySnap(2, running(1.5), nil, backend(1)),
			querySnap(3, idle(1.5, 2.5), nil, backend(1.5)),
			noSession(4), noSession(5), noSession(6),
		}
		for i := range snaps[:3] {
			for j := range snaps[i].Sessions {
				snaps[i].Sessions[j].Own = own
			}
		}
		ev := feedEach(t, p, sink, snaps...)
		if own && (len(ev.queries) != 0 || len(ev.sessions) != 0) {
			t.Errorf("own session: %d query and %d session events, want none", len(ev.queries), len(ev.sessions))
		}
		if !own && (len(ev.queries) != 2 || len(ev.sessions) != 1) {
			t.Errorf("a user's session: %d query and %d session events, want 2 and 1", len(ev.queries), len(ev.sessions))
		}
	}
}

// sessionOf is session id with one process on sdw1 (pid 2000+id, created
// at backendStart), its query started at queryStart and running, or idle
// since idleAt when idleAt is not NaN.
func sessionOf(id int64, backendStart, queryStart, idleAt, cpu float64) (pipelinetest.Session, pipelinetest.Process) {
	s := pipelinetest.Session{ID: id, PID: 1000 + id, DB: "postgres", User: "gpadmin", State: "active",
		BackendStart: at(backendStart), QueryStart: at(queryStart)}
	if !math.IsNaN(idleAt) {
		s.State, s.StateChange = "idle", at(idleAt)
	}
	return s, proc("sdw1", 0, id, 2000+id, backendStart, cpu, 0)
}

// A collector started at -5 beside a session that began before it (7, its
// query at -50) sees a session that began after it but before its first
// snapshot (8) and one after that snapshot (9): only 7 and its query are
// partial, because they started before the collector; 8 was seen from its
// start as any session born between two snapshots (make run's first round
// was all partial).
func TestFirstRoundIsPartialOnlyWhenItIs(t *testing.T) {
	p, sink := newTestProcessorOpenedAt(t, queryConfig(), at(-5))
	round := func(sec float64, ids ...int64) pipelinetest.Snapshot {
		s := snap(sec, nil, nil)
		s.Hosts = []pipelinetest.Host{{Name: "sdw1", Up: true}}
		idleAt := math.NaN()
		if sec >= 2 {
			idleAt = 1.5
		}
		starts := map[int64][2]float64{7: {-100, -50}, 8: {-2, -1}, 9: {0.5, 0.7}}
		for _, id := range ids {
			sess, pr := sessionOf(id, starts[id][0], starts[id][1], idleAt, min(sec, 1.5)-starts[id][0])
			s.Sessions, s.Processes = append(s.Sessions, sess), append(s.Processes, pr)
		}
		return s
	}
	ev := feedEach(t, p, sink, round(0, 7, 8), round(1, 7, 8, 9), round(2, 7, 8, 9), noSession(3), noSession(4), noSession(5))
	if len(ev.queries) != 3 || len(ev.sessions) != 3 {
		t.Fatalf("%d query and %d session events, want 3 and 3", len(ev.queries), len(ev.sessions))
	}
	first := events.PartialCause{StartedBefore: true, Since: at(0).UnixNano()}
	for _, q := range ev.queries {
		want := q.Session.ID == 7
		if q.Partial != want || q.PartialCause.Partial() != want {
			t.Errorf("query of session %d: partial %v (%+v), want %v", q.Session.ID, q.Partial, q.PartialCause, want)
		}
		if want && !reflect.DeepEqual(q.PartialCause, first) {
			t.Errorf("query of session 7: cause %+v, want %+v (started before gpotel, counted from its first snapshot)", q.PartialCause, first)
		}
	}
	for _, s := range ev.sessions {
		want := s.Session.ID == 7
		if s.Partial != want || s.PartialCause.Partial() != want {
			t.Errorf("session %d: partial %v (%+v), want %v", s.Session.ID, s.Partial, s.PartialCause, want)
		}
		if want && !reflect.DeepEqual(s.PartialCause, first) {
			t.Errorf("session 7: cause %+v, want %+v", s.PartialCause, first)
		}
	}
}

// A session whose host never answers again is written once the longest
// window has passed: one event, partial, naming the silent host and when
// it went silent (issue 44: the flag could drop the host unseen).
func TestSessionOfAHostSilentPastTheWindowIsPartialNamingIt(t *testing.T) {
	cfg := queryConfig()
	cfg.Windows = []time.Duration{5 * time.Second}
	p, sink := newTestProcessor(t, cfg)
	head := proc("mdw", -1, 7, 1007, 0.5, 0.1, 0)
	seen := querySnap(1, running(0.8), nil, head, proc("sdw1", 0, 7, 4242, 0.6, 0.2, 0))
	seen.Sessions[0].BackendStart = at(0.5)
	silent := querySnap(2, running(0.8), []string{"sdw1"}, head)
	silent.Sessions[0].BackendStart = at(0.5)
	snaps := []pipelinetest.Snapshot{noSession(0), seen, silent}
	for sec := 3.0; sec <= 14; sec++ {
		gone := snap(sec, []string{"sdw1"}, nil)
		gone.Hosts = append(gone.Hosts, pipelinetest.Host{Name: "mdw", Up: true})
		snaps = append(snaps, gone)
	}
	ev := feedEach(t, p, sink, snaps...)
	want := events.PartialCause{Hosts: []string{"sdw1"}, Since: at(2).UnixNano()}
	if len(ev.sessions) != 1 {
		t.Fatalf("%d session events, want exactly 1", len(ev.sessions))
	}
	if s := ev.sessions[0]; !s.Partial || !reflect.DeepEqual(s.PartialCause, want) {
		t.Errorf("session event partial %v, cause %+v; want partial, %+v", s.Partial, s.PartialCause, want)
	}
	if len(ev.queries) != 1 {
		t.Fatalf("%d query events, want exactly 1", len(ev.queries))
	}
	if q := ev.queries[0]; !q.Partial || !reflect.DeepEqual(q.PartialCause, want) {
		t.Errorf("query event partial %v, cause %+v; want partial, %+v", q.Partial, q.PartialCause, want)
	}
}

// An event names at most pipeline.MaxPartialHosts silent hosts and counts
// the others.
func TestPartialEventNamesAtMostMaxPartialHosts(t *testing.T) {
	cfg := queryConfig()
	cfg.Windows = []time.Duration{5 * time.Second}
	p, sink := newTestProcessor(t, cfg)
	n := events.MaxPartialHosts + 3
	var procs []pipelinetest.Process
	var hosts []string
	for i := range n {
		h := fmt.Sprintf("sdw%02d", i+1)
		hosts = append(hosts, h)
		procs = append(procs, proc(h, int64(i), 7, int64(4000+i), 0.6, 0.2, 0))
	}
	seen := querySnap(1, running(0.8), nil, procs...)
	seen.Sessions[0].BackendStart = at(0.5)
	start := snap(0, nil, nil)
	for _, h := range hosts {
		start.Hosts = append(start.Hosts, pipelinetest.Host{Name: h, Up: true})
	}
	snaps := []pipelinetest.Snapshot{start, seen}
	for sec := 2.0; sec <= 14; sec++ {
		snaps = append(snaps, snap(sec, hosts, nil))
	}
	ev := feedEach(t, p, sink, snaps...)
	if len(ev.sessions) != 1 {
		t.Fatalf("%d session events, want 1", len(ev.sessions))
	}
	c := ev.sessions[0].PartialCause
	if !slices.Equal(c.Hosts, hosts[:events.MaxPartialHosts]) || c.MoreHosts != 3 {
		t.Errorf("cause %+v: want the first %d hosts named in host order and 3 more counted", c, events.MaxPartialHosts)
	}
}

// sessionSnap is a snapshot at sec of session s and its processes, every
// host of them answering.
func sessionSnap(sec float64, s pipelinetest.Session, procs ...pipelinetest.Process) pipelinetest.Snapshot {
	sn := snap(sec, nil, nil, procs...)
	sn.Sessions = []pipelinetest.Session{s}
	return sn
}

// A session that left while a host of its processes was silent gets its
// event once the host answers (its exit records are read then), complete.
func TestSessionEventWaitsForASilentHost(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	s, pr := sessionOf(7, 0.5, 0.6, math.NaN(), 0.2)
	later := pr
	later.CPUUser = 0.4
	ev := feedEach(t, p, sink, noSession(0), sessionSnap(1, s, pr), sessionSnap(2, s, later),
		snap(3, []string{"sdw1"}, nil), snap(4, []string{"sdw1"}, nil))
	if len(ev.sessions) != 0 {
		t.Fatalf("session event while its host is silent: %+v", ev.sessions)
	}
	ev = feedEach(t, p, sink, noSession(5))
	if len(ev.sessions) != 1 || ev.sessions[0].Partial {
		t.Fatalf("session events once its host answered: %+v, want one, complete", ev.sessions)
	}
}

// A session's event never ends before it started, even when the
// coordinator's backend_start is ahead of the snapshots' clock.
func TestSessionEventNeverEndsBeforeItStarted(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	s, pr := sessionOf(7, 30, 30.5, math.NaN(), 0.2)
	ev := feedEach(t, p, sink, noSession(0), sessionSnap(1, s, pr), noSession(2), noSession(3), noSession(4))
	if len(ev.sessions) != 1 {
		t.Fatalf("%d session events, want 1", len(ev.sessions))
	}
	if e := ev.sessions[0]; e.End < e.Start {
		t.Errorf("session event ends at %s, before its start %s", time.Unix(0, e.End).UTC(), time.Unix(0, e.Start).UTC())
	}
}

// A query event lists its segments by host, then content id, and leaves
// out a process of no known segment (its CPU still counts in the totals).
func TestQueryEventListsItsSegmentsInOrder(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	var first, second []pipelinetest.Process
	for seg := int64(5); seg >= 0; seg-- {
		first = append(first, proc("sdw1", seg, 7, 4000+seg, -100, 0.1, 0))
		second = append(second, proc("sdw1", seg, 7, 4000+seg, -100, 0.5, 0))
	}
	stray := proc("sdw1", 9, 7, 4100, -100, 0.1, 0)
	stray.NoSegment = true
	first = append(first, stray)
	stray.CPUUser = 0.5
	second = append(second, stray)
	ev := feedEach(t, p, sink,
		querySnap(0, running(0), nil, first...),
		querySnap(1, running(0), nil, second...),
		querySnap(2, idle(0, 1.5), nil, second...),
		querySnap(3, idle(0, 1.5), nil, second...))
	if len(ev.queries) != 1 {
		t.Fatalf("%d query events, want 1", len(ev.queries))
	}
	var segs []int32
	for _, u := range ev.queries[0].Segments {
		segs = append(segs, u.Segment)
	}
	if !slices.Equal(segs, []int32{0, 1, 2, 3, 4, 5}) {
		t.Errorf("the event's segments %v, want 0 to 5 in order and no unknown one", segs)
	}
	near(t, "the query's CPU: every process's, the stray's too", cpuSeconds(&ev.queries[0].Totals), 7*0.4)
}

// max_finished bounds the ended queries the output keeps to the most
// recently ended, besides one whose event is still due.
func TestMaxFinishedKeepsTheMostRecentlyEnded(t *testing.T) {
	cfg := queryConfig()
	cfg.Queries.MaxFinished = 2
	p, sink := newTestProcessor(t, cfg)
	var md pmetric.Metrics
	for i := range 5 {
		sec := float64(i)
		md = feed(t, p, sink, querySnap(sec, idle(sec-0.5, sec-0.2), nil, backend(sec)))
	}
	// 3.5 ended in the newest snapshot: its event is due; of the others,
	// the two that ended last.
	if n := countKind(md, pipeline.KindQuery); n != 3 {
		t.Errorf("%d query resources, want max_finished = 2 and the one whose event is due", n)
	}
	for _, start := range []float64{1.5, 2.5, 3.5} {
		if _, ok := queryResource(md, start); !ok {
			t.Errorf("the query that started at %v is not among the kept", start)
		}
	}
}

// idleSession is session 7, started at 0.5 and idle, having run nothing,
// with its backend on sdw1.
func idleSession(sec, cpu float64) pipelinetest.Snapshot {
	s := pipelinetest.Session{ID: 7, PID: 1007, DB: "postgres", User: "gpadmin", State: "idle", BackendStart: at(0.5)}
	return sessionSnap(sec, s, proc("sdw1", 0, 7, 2007, 0.5, cpu, 0))
}

// A session that ran no query still gets its event when it leaves.
func TestSessionThatRanNoQueryGetsItsEvent(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	ev := feedEach(t, p, sink, noSession(0), idleSession(1, 0.1), idleSession(2, 0.2), noSession(3), noSession(4), noSession(5))
	if len(ev.sessions) != 1 || ev.sessions[0].Queries != 0 || len(ev.queries) != 0 {
		t.Fatalf("events %+v, want one session event of no query", ev)
	}
}

// partial_since of an event whose hosts went silent one after the other is
// when the first went silent (three sessions on six hosts each: the order
// in which the hosts are looked at does not matter).
func TestPartialSinceIsTheFirstHostsSilence(t *testing.T) {
	cfg := queryConfig()
	cfg.Windows = []time.Duration{5 * time.Second}
	p, sink := newTestProcessor(t, cfg)
	hosts := []string{"sdw1", "sdw2", "sdw3", "sdw4", "sdw5", "sdw6"}
	sessions := func(sec float64, down []string) pipelinetest.Snapshot {
		var procs []pipelinetest.Process
		var rows []pipelinetest.Session
		for id := int64(7); id <= 9; id++ {
			rows = append(rows, pipelinetest.Session{ID: id, PID: 1000 + id, DB: "postgres", User: "gpadmin", State: "active",
				QueryStart: at(0.8), BackendStart: at(0.5)})
			procs = append(procs, proc("mdw", -1, id, 1000+id, 0.5, sec/10, 0))
			for i, h := range hosts {
				if !slices.Contains(down, h) {
					procs = append(procs, proc(h, int64(i), id, 4000+10*id+int64(i), 0.6, sec/10, 0))
				}
			}
		}
		s := snap(sec, down, nil, procs...)
		s.Sessions = rows
		return s
	}
	snaps := []pipelinetest.Snapshot{noSession(0), sessions(1, nil), sessions(2, hosts[:1])}
	for sec := 3.0; sec <= 14; sec++ {
		gone := snap(sec, hosts, nil)
		gone.Hosts = append(gone.Hosts, pipelinetest.Host{Name: "mdw", Up: true})
		snaps = append(snaps, gone)
	}
	ev := feedEach(t, p, sink, snaps...)
	if len(ev.sessions) != 3 || len(ev.queries) != 3 {
		t.Fatalf("%d session and %d query events, want 3 and 3", len(ev.sessions), len(ev.queries))
	}
	for _, s := range ev.sessions {
		if s.PartialCause.Since != at(2).UnixNano() || len(s.PartialCause.Hosts) != len(hosts) {
			t.Errorf("session %d: partial cause %+v, want the six hosts since %s", s.Session.ID, s.PartialCause, at(2))
		}
	}
	for _, q := range ev.queries {
		if q.PartialCause.Since != at(2).UnixNano() || len(q.PartialCause.Hosts) != len(hosts) {
			t.Errorf("query of session %d: partial cause %+v, want the six hosts since %s", q.Session.ID, q.PartialCause, at(2))
		}
	}
}
