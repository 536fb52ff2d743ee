// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
)

func queryConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Windows = []time.Duration{time.Minute}
	cfg.TimeConstants = nil
	return cfg
}

// activity is session 7's pg_stat_activity at one snapshot: the query that
// started at start (sec) and either runs or went idle at idleAt.
type activity struct {
	start  float64 // NaN: the session never ran a query
	idleAt float64 // NaN: still running
	text   string
}

func running(start float64) activity { return activity{start: start, idleAt: math.NaN()} }
func idle(start, end float64) activity {
	return activity{start: start, idleAt: end}
}

var neverRan = activity{start: math.NaN(), idleAt: math.NaN()}

// sessionAt is session 7 (head pid 1007 on mdw) with that activity.
func sessionAt(a activity) pipelinetest.Session {
	s := pipelinetest.Session{ID: 7, PID: 1007, DB: "postgres", User: "gpadmin", State: "active", Query: a.text}
	if !math.IsNaN(a.start) {
		s.QueryStart = at(a.start)
	}
	if !math.IsNaN(a.idleAt) {
		s.State, s.StateChange = "idle", at(a.idleAt)
	}
	return s
}

// querySnap is a snapshot at sec of session 7 with the given activity.
func querySnap(sec float64, a activity, down []string, procs ...pipelinetest.Process) pipelinetest.Snapshot {
	s := snap(sec, down, nil, procs...)
	s.Sessions = []pipelinetest.Session{sessionAt(a)}
	return s
}

// queryResource finds session 7's query resource that started at startSec.
func queryResource(md pmetric.Metrics, startSec float64) (pmetric.ResourceMetrics, bool) {
	want := pipeline.QueryStartValue(at(startSec))
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		ra := rms.At(i).Resource().Attributes()
		kind, _ := ra.Get(pipeline.AttrResourceKind)
		id, _ := ra.Get(pipeline.AttrSessionID)
		start, _ := ra.Get(pipeline.AttrQueryStart)
		if kind.Str() == pipeline.KindQuery.String() && id.Int() == 7 && start.Str() == want {
			return rms.At(i), true
		}
	}
	return pmetric.ResourceMetrics{}, false
}

// queryFigure reads one figure of the query that started at startSec.
func queryFigure(t testing.TB, md pmetric.Metrics, startSec float64, metric string, attrs ...string) float64 {
	t.Helper()
	rm, ok := queryResource(md, startSec)
	if !ok {
		t.Fatalf("no query resource of session 7 started at %gs", startSec)
	}
	return rmFigure(t, rm, metric, attrs...)
}

func queryCPU(t testing.TB, md pmetric.Metrics, startSec float64) float64 {
	t.Helper()
	return queryFigure(t, md, startSec, pipeline.QueryMetric(pipeline.MetricSessionCPUTime), pipeline.AttrCPUMode, pipeline.CPUModeUser)
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-6 {
		t.Errorf("%s = %.9f, want %.9f", what, got, want)
	}
}

// backend is session 7's process on sdw1 with cpu seconds used so far.
func backend(cpu float64) pipelinetest.Process { return proc("sdw1", 0, 7, 4242, -100, cpu, 0) }

func TestQueryBoundaryInsideAnIntervalSplitsItByTime(t *testing.T) {
	// One core from 0.5 s on: query 1 runs [0.5, 4.5), query 2 [4.5, 9.5), idle after.
	cpuAt := func(sec float64) float64 { return max(0, min(sec, 9.5)-0.5) }
	actAt := func(sec float64) activity {
		switch {
		case sec < 0.5:
			return neverRan
		case sec < 4.5:
			return running(0.5)
		case sec < 9.5:
			return running(4.5)
		}
		return idle(4.5, 9.5)
	}
	p, sink := newTestProcessor(t, queryConfig())
	var snaps []pipelinetest.Snapshot
	for sec := 0.0; sec <= 12; sec++ {
		snaps = append(snaps, querySnap(sec, actAt(sec), nil, backend(cpuAt(sec))))
	}
	md := feed(t, p, sink, snaps[:6]...)
	near(t, "query 1 CPU once query 2 runs", queryCPU(t, md, 0.5), 4)
	near(t, "query 2 CPU after its first half second", queryCPU(t, md, 4.5), 0.5)
	if got := queryFigure(t, md, 0.5, pipeline.MetricQueryCompleted); got != 1 {
		t.Errorf("query 1 completed = %v, want 1", got)
	}
	md = feed(t, p, sink, snaps[6:]...)
	near(t, "query 1 CPU at the end (nothing leaked in)", queryCPU(t, md, 0.5), 4)
	near(t, "query 2 CPU at the end", queryCPU(t, md, 4.5), 5)
	near(t, "query 2 duration", queryFigure(t, md, 4.5, pipeline.MetricQueryDuration), 5)
	near(t, "query 2 CPU of segment 0 on sdw1", queryFigure(t, md, 4.5, pipeline.MetricQuerySegmentCPUTime, pipeline.AttrHostName, "sdw1", pipeline.AttrSegmentID, "0"), 5)
	if got := queryFigure(t, md, 4.5, pipeline.MetricQueryPartial); got != 0 {
		t.Errorf("query 2 partial = %v, want 0: it was seen from its start", got)
	}
}

func TestQueryBoundaryShareIsByTimeNotByWork(t *testing.T) {
	// Query 1 burns a core until 1.5 s, query 2 half a core after it: the
	// interval (1, 2] used 0.75 s and each query ran half of it.
	cpuAt := func(sec float64) float64 { return min(sec, 1.5) + max(0, sec-1.5)/2 }
	p, sink := newTestProcessor(t, queryConfig())
	md := feed(t, p, sink,
		querySnap(0, running(0), nil, backend(cpuAt(0))),
		querySnap(1, running(0), nil, backend(cpuAt(1))),
		querySnap(2, running(1.5), nil, backend(cpuAt(2))))
	near(t, "query 1", queryCPU(t, md, 0), 1+0.375)
	near(t, "query 2", queryCPU(t, md, 1.5), 0.375)
}

func TestQueryBornAndFinishedBetweenTwoTicksGetsItsFinalFigures(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	md := feed(t, p, sink,
		querySnap(0, neverRan, nil, backend(0)),
		// It ran [0.5, 1.5) on one core; at 2 the session is idle.
		querySnap(2, idle(0.5, 1.5), nil, backend(1)))
	near(t, "its CPU", queryCPU(t, md, 0.5), 1)
	near(t, "its duration", queryFigure(t, md, 0.5, pipeline.MetricQueryDuration), 1)
	if got := queryFigure(t, md, 0.5, pipeline.MetricQueryCompleted); got != 1 {
		t.Errorf("completed = %v, want 1", got)
	}
	// Idle until 4: nothing more is its.
	md = feed(t, p, sink, querySnap(4, idle(0.5, 1.5), nil, backend(1.01)))
	near(t, "its CPU after an idle interval", queryCPU(t, md, 0.5), 1)
}

func TestReusedPidIsANewProcessOfTheQuery(t *testing.T) {
	old := func(cpu float64) pipelinetest.Process { return proc("sdw1", 0, 7, 4242, -10, cpu, 0) }
	reused := func(cpu float64) pipelinetest.Process { return proc("sdw1", 0, 7, 4242, 3.5, cpu, 0) }
	p, sink := newTestProcessor(t, queryConfig())
	md := feed(t, p, sink,
		querySnap(0, running(0), nil, old(5)), // 5 s used before the query: not its
		querySnap(3, running(0), nil, old(8)),
		querySnap(4, running(0), nil, reused(0.5)), // the old one exited; pid 4242 is new since 3.5
		querySnap(5, running(0), nil, reused(1.5)))
	near(t, "query CPU: 3 s of the old process, 1.5 s of the new one", queryCPU(t, md, 0), 4.5)
}

func TestMissedTickSharesTheWiderIntervalAndMarksTheQueryPartial(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	md := feed(t, p, sink,
		querySnap(0, running(0), nil, backend(0)),
		querySnap(1, running(0), nil, backend(1)),
		querySnap(2, running(0), []string{"sdw1"}), // sdw1 did not answer
		querySnap(4, running(3), nil, backend(4)))
	// The step (1, 4] is shared by time: 2 s to query 1, 1 s to query 2.
	near(t, "query 1", queryCPU(t, md, 0), 3)
	near(t, "query 2", queryCPU(t, md, 3), 1)
	if got := queryFigure(t, md, 0, pipeline.MetricQueryPartial); got != 1 {
		t.Errorf("query 1 partial = %v, want 1: a host of its processes did not answer while it ran", got)
	}
}

func TestQueryStartedBeforeTheFirstSnapshotIsPartialAndCountsFromIt(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	md := feed(t, p, sink,
		querySnap(10, running(2), nil, backend(8)),
		querySnap(11, running(2), nil, backend(9)))
	near(t, "CPU since the first snapshot", queryCPU(t, md, 2), 1)
	if got := queryFigure(t, md, 2, pipeline.MetricQueryPartial); got != 1 {
		t.Errorf("partial = %v, want 1: its start was not seen", got)
	}
}

// gpSnap is session 7 on Greenplum: the head (pid 1007, coordinator) and
// one segment process, each with its title's command count.
func gpSnap(sec float64, a activity, headCcnt int64, headCPU float64, segCcnt int64, segCPU float64) pipelinetest.Snapshot {
	head := proc("mdw", -1, 7, 1007, -100, headCPU, 0)
	head.CommandCount = headCcnt
	seg := proc("sdw1", 0, 7, 4242, -100, segCPU, 0)
	seg.CommandCount = segCcnt
	return querySnap(sec, a, nil, head, seg)
}

func TestSegmentTitleWithTheSameCommandCountAtBothEndsTakesTheWholeStep(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	md := feed(t, p, sink,
		gpSnap(0, running(0), 3, 0, 3, 0),
		gpSnap(1, running(0), 3, 0, 3, 1),
		// The coordinator moved on to command 4 at 1.5; the segment process
		// still finished command 3's slice until 2.
		gpSnap(2, running(1.5), 4, 0, 3, 2))
	q3, ok := queryResource(md, 0)
	if !ok {
		t.Fatal("no query 3")
	}
	if v, _ := q3.Resource().Attributes().Get(pipeline.AttrQueryCommandCount); v.Int() != 3 {
		t.Errorf("command count attribute %v, want 3", v.AsRaw())
	}
	if v, _ := q3.Resource().Attributes().Get(pipeline.AttrQueryKeySource); v.Str() != pipeline.QueryKeyCommandCount {
		t.Errorf("key source %q, want %q", v.Str(), pipeline.QueryKeyCommandCount)
	}
	near(t, "command 3", queryCPU(t, md, 0), 2)
	near(t, "command 4", queryCPU(t, md, 1.5), 0)
}

func TestSkewOfAQueryNamesItsHottestSegment(t *testing.T) {
	segs := func(cpu float64) []pipelinetest.Process {
		return []pipelinetest.Process{
			proc("sdw1", 0, 7, 10, -100, cpu, 0), proc("sdw1", 1, 7, 11, -100, cpu/4, 0),
			proc("sdw2", 2, 7, 12, -100, cpu/4, 0), proc("sdw2", 3, 7, 13, -100, cpu/4, 0),
		}
	}
	p, sink := newTestProcessor(t, queryConfig())
	md := feed(t, p, sink,
		querySnap(0, running(0), nil, segs(0)...),
		querySnap(4, running(0), nil, segs(4)...))
	// Loads 4, 1, 1, 1: avg 1.75, max 4.
	cpu := []string{pipeline.AttrSkewFigure, pipeline.SkewFigureCPU}
	near(t, "cpu skew", queryFigure(t, md, 0, pipeline.QueryMetric(pipeline.MetricSessionSkewRatio), cpu...), 1-1.75/4)
	near(t, "cpu max/avg", queryFigure(t, md, 0, pipeline.QueryMetric(pipeline.MetricSessionSkewMaxOverAvg), cpu...), 4/1.75)
	near(t, "hottest segment", queryFigure(t, md, 0, pipeline.QueryMetric(pipeline.MetricSessionSkewHottestSegment), cpu...), 0)
	near(t, "segments", queryFigure(t, md, 0, pipeline.QueryMetric(pipeline.MetricSessionSkewSegments), cpu...), 4)
}

// A segment whose process took part and did nothing counts as 0, as in the
// session skew: a query whose rows all sit on one segment is fully skewed.
func TestSkewOfAQueryCountsItsIdleSegments(t *testing.T) {
	segs := func(cpu float64) []pipelinetest.Process {
		return []pipelinetest.Process{
			proc("sdw1", 0, 7, 10, -100, cpu, 0), proc("sdw1", 1, 7, 11, -100, 0, 0),
			proc("sdw2", 2, 7, 12, -100, 0, 0), proc("sdw2", 3, 7, 13, -100, 0, 0),
		}
	}
	p, sink := newTestProcessor(t, queryConfig())
	md := feed(t, p, sink,
		querySnap(0, running(0), nil, segs(0)...),
		querySnap(4, running(0), nil, segs(4)...))
	cpu := []string{pipeline.AttrSkewFigure, pipeline.SkewFigureCPU}
	near(t, "cpu skew", queryFigure(t, md, 0, pipeline.QueryMetric(pipeline.MetricSessionSkewRatio), cpu...), 0.75)
	near(t, "segments", queryFigure(t, md, 0, pipeline.QueryMetric(pipeline.MetricSessionSkewSegments), cpu...), 4)
}

func TestQueryTextOnlyWhenSwitchedOnAndCut(t *testing.T) {
	long := strings.Repeat("é", 10) // 20 bytes
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprint("text=", on), func(t *testing.T) {
			cfg := queryConfig()
			cfg.Queries.Text, cfg.Queries.TextMaxLength = on, 5
			p, sink := newTestProcessor(t, cfg)
			a := running(0)
			a.text = long
			md := feed(t, p, sink, querySnap(0, a, nil, backend(0)))
			rm, ok := queryResource(md, 0)
			if !ok {
				t.Fatal("no query resource")
			}
			v, has := rm.Resource().Attributes().Get(pipeline.AttrDBQueryText)
			switch {
			case !on && has:
				t.Errorf("db.query.text %q with the switch off", v.Str())
			case on && v.Str() != "éé":
				t.Errorf("db.query.text %q, want the first two characters (5 bytes cut on a character boundary)", v.Str())
			}
		})
	}
}

func TestEndedQueryIsKeptForTheLongestWindowThenDropped(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	md := feed(t, p, sink,
		querySnap(0, running(0), nil, backend(0)),
		querySnap(1, idle(0, 0.5), nil, backend(0.5)),
		querySnap(60, idle(0, 0.5), nil, backend(0.5)))
	if _, ok := queryResource(md, 0); !ok {
		t.Error("ended query gone before the 1m window passed")
	}
	md = feed(t, p, sink, querySnap(61, idle(0, 0.5), nil, backend(0.5)))
	if _, ok := queryResource(md, 0); ok {
		t.Error("ended query still written more than 1m after it ended")
	}
}

func TestQueryFiguresOffWritesNoQueryResource(t *testing.T) {
	cfg := queryConfig()
	cfg.Queries.Enabled = false
	p, sink := newTestProcessor(t, cfg)
	md := feed(t, p, sink, querySnap(0, running(0), nil, backend(0)), querySnap(1, running(0), nil, backend(1)))
	if n := countKind(md, pipeline.KindQuery); n != 0 {
		t.Errorf("%d query resources with queries::enabled false", n)
	}
}

func TestQueryFiguresWhenTheClosingBatchHoldsProcessesToo(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	for _, s := range []pipelinetest.Snapshot{
		querySnap(0, running(0), nil, backend(0)),
		querySnap(1, running(0), nil, backend(1)),
	} {
		if err := p.ConsumeMetrics(context.Background(), s.Metrics()); err != nil {
			t.Fatal(err)
		}
	}
	all := sink.AllMetrics()
	md := all[len(all)-1]
	near(t, "query CPU", queryCPU(t, md, 0), 1)
	if n := countKind(md, pipeline.KindProcess); n != 0 {
		t.Errorf("%d process resources forwarded without emit_process_metrics", n)
	}
}

func TestCommandCountSeenBeforeItsQueryStartTakesTheLaterStart(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	md := feed(t, p, sink,
		gpSnap(0, running(0), 3, 0, 3, 0),
		// Command 4 began between the catalog read (still command 3's start) and the titles.
		gpSnap(1, running(0), 4, 0, 4, 1),
		gpSnap(2, running(0.9), 4, 0, 4, 2))
	if _, ok := queryResource(md, 0.9); !ok {
		t.Fatal("command 4 not keyed at its own query_start 0.9")
	}
	// Command 3 ran until command 4 began, not until its own start.
	near(t, "command 3's duration", queryFigure(t, md, 0, pipeline.MetricQueryDuration), 0.9)
}

// The statement whose first sighting carried the previous one's query_start
// may end before a sighting shows its own: it is still one query, keyed at
// its own start once known.
func TestCommandCountSeenBeforeItsQueryStartEndsAsOneQuery(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	md := feed(t, p, sink,
		gpSnap(0, running(0), 3, 0, 3, 0),
		gpSnap(1, running(0), 4, 0, 4, 1),
		gpSnap(2, idle(0.9, 1.5), 5, 0, 5, 1.5))
	if n := queryResources(md); n != 2 {
		t.Errorf("%d queries, want commands 3 and 4", n)
	}
	if _, ok := queryResource(md, 0.9); !ok {
		t.Fatal("command 4 not keyed at its own query_start 0.9")
	}
	near(t, "command 3's duration", queryFigure(t, md, 0, pipeline.MetricQueryDuration), 0.9)
	near(t, "command 4's duration", queryFigure(t, md, 0.9, pipeline.MetricQueryDuration), 0.6)
}

// A running statement with a title count of its own is never the one
// whose own start is still unknown.
func TestNextCommandCountIsNotTheStatementWithAnUnknownStart(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	md := feed(t, p, sink,
		gpSnap(0, running(0), 3, 0, 3, 0),
		gpSnap(1, running(0), 4, 0, 4, 1),
		gpSnap(2, running(1.8), 5, 0, 5, 2))
	if n := queryResources(md); n != 3 {
		t.Errorf("%d queries, want commands 3, 4 and 5", n)
	}
	if _, ok := queryResource(md, 1.8); !ok {
		t.Fatal("command 5 not keyed at its own query_start 1.8")
	}
}

// queryResources counts session 7's query resources in md.
func queryResources(md pmetric.Metrics) int {
	n := 0
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		ra := rms.At(i).Resource().Attributes()
		kind, _ := ra.Get(pipeline.AttrResourceKind)
		id, _ := ra.Get(pipeline.AttrSessionID)
		if kind.Str() == pipeline.KindQuery.String() && id.Int() == 7 {
			n++
		}
	}
	return n
}

// On Greenplum the dispatcher's title shows a statement's command count
// while it runs and a larger one once idle (its executors were handed the
// larger one, checked on a real Greenplum 6): the idle title is the same
// statement ending, not another query.
func TestIdleTitleWithALargerCommandCountEndsTheSameQuery(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	md := feed(t, p, sink,
		gpSnap(0, running(0), 1, 0, 2, 0),
		gpSnap(1, running(0), 1, 0, 2, 1),
		gpSnap(2, idle(0, 1.5), 2, 0, 2, 1.5))
	if n := queryResources(md); n != 1 {
		t.Errorf("%d queries, want the one statement", n)
	}
	q, ok := queryResource(md, 0)
	if !ok {
		t.Fatal("no query started at 0")
	}
	if v, _ := q.Resource().Attributes().Get(pipeline.AttrQueryCommandCount); v.Int() != 1 {
		t.Errorf("command count %v, want 1 (the title's while it ran)", v.AsRaw())
	}
	near(t, "duration", queryFigure(t, md, 0, pipeline.MetricQueryDuration), 1.5)
	near(t, "cpu", queryCPU(t, md, 0), 1.5)
}

// A statement shorter than a snapshot interval is seen only idle: the
// coordinator backend's idle title keeps its last command's count, which
// numbers it (checked on a real Greenplum 6: cmd2 idle after cmd1 ran).
func TestQueryNoSnapshotSawRunningTakesTheIdleTitlesCommandCount(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	md := feed(t, p, sink,
		gpSnap(0, neverRan, 0, 0, 0, 0),
		gpSnap(1, idle(0.2, 0.4), 6, 0.1, 0, 0.1))
	q, ok := queryResource(md, 0.2)
	if !ok {
		t.Fatal("no query started at 0.2")
	}
	if v, ok := q.Resource().Attributes().Get(pipeline.AttrQueryCommandCount); !ok || v.Int() != 6 {
		t.Errorf("command count %v (present %v), want 6 (the idle title's right after it)", v.Int(), ok)
	}
	if v, _ := q.Resource().Attributes().Get(pipeline.AttrQueryKeySource); v.Str() != pipeline.QueryKeyCommandCount {
		t.Errorf("key source %q, want %q", v.Str(), pipeline.QueryKeyCommandCount)
	}
}

// An executor's title carries the command count it was handed, never
// smaller than its statement's: the work of a statement no snapshot saw
// running belongs to no later query.
func TestSegmentWorkOfAStatementNeverSeenIsNoLaterQuerys(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	md := feed(t, p, sink,
		gpSnap(0, neverRan, 0, 0, 0, 0),
		// Statement 1 ran from 0.2 to 0.8 (executors handed 2); statement 3 began at 0.9.
		gpSnap(1, running(0.9), 3, 0, 2, 0.5),
		gpSnap(2, running(0.9), 3, 0, 2, 0.5))
	near(t, "statement 3's cpu", queryCPU(t, md, 0.9), 0)
}

// Greenplum sets a statement's idle title (its count + 1 after a planned
// statement) before pg_stat_activity says idle, and the two are read apart:
// a snapshot between them sees the statement active under the idle title's
// count (seen on 6.24.3 after a cancel). That is the same statement
// ending, not a new one: one query keeps its key and all its work.
func TestIdleTitleBeforeTheIdleStateIsTheSameStatement(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	md := feed(t, p, sink,
		gpSnap(0, running(0), 1, 0, 2, 0),
		gpSnap(1, running(0), 1, 0.1, 2, 1),
		gpSnap(2, running(0), 2, 0.2, 2, 2), // the title went idle first
		gpSnap(3, idle(0, 2.5), 2, 0.2, 2, 2))
	if n := queryResources(md); n != 1 {
		t.Fatalf("%d queries, want the one statement", n)
	}
	q, ok := queryResource(md, 0)
	if !ok {
		t.Fatal("no query started at 0")
	}
	if v, _ := q.Resource().Attributes().Get(pipeline.AttrQueryCommandCount); v.Int() != 1 {
		t.Errorf("command count %d, want 1 (its running title's)", v.Int())
	}
	near(t, "its CPU", queryCPU(t, md, 0), 2.2)
}

// The same read when the session leaves right after its statement (a
// client that disconnects on the error of a cancelled statement): the
// query keyed by the idle title is the statement itself, and one event
// tells it with all its work.
func TestIdleTitleBeforeTheSessionLeftIsTheSameStatement(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	ev := feedEach(t, p, sink,
		gpSnap(0, running(0), 1, 0, 2, 0),
		gpSnap(1, running(0), 1, 0.1, 2, 1),
		gpSnap(2, running(0), 2, 0.2, 2, 2),
		noSession(3), noSession(4), noSession(5), noSession(6), noSession(7), noSession(8))
	if len(ev.queries) != 1 {
		t.Fatalf("%d query events, want the one statement", len(ev.queries))
	}
	q := ev.queries[0]
	if q.CommandCount != 1 {
		t.Errorf("command count %d, want 1 (its running title's)", q.CommandCount)
	}
	if cpu := cpuSeconds(&q.Totals); math.Abs(cpu-2.2) > 1e-6 {
		t.Errorf("its CPU %.3f s, want 2.2", cpu)
	}
	for _, u := range q.Segments {
		if u.Segment == 0 && math.Abs(float64(u.CPU)/1e9-2) > 1e-6 {
			t.Errorf("segment 0's CPU %.3f s, want 2", float64(u.CPU)/1e9)
		}
	}
}

// A session first seen after gpotel began watching was in no snapshot
// before: it began after the previous snapshot read pg_stat_activity,
// though its backend_start may lie a moment before that snapshot's time.
// Its queries were seen from their start and are not partial (make run
// showed one "started_before" 90 s after the collector started).
func TestANewSessionsQueryIsNotPartialThoughItBeganBeforeThePreviousSnapshotsTime(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	feed(t, p, sink, noSession(0), noSession(2))
	s := querySnap(4, running(3), nil, backend(0.5))
	s.Sessions[0].BackendStart = at(1.9)
	md := feed(t, p, sink, s)
	if got := queryFigure(t, md, 3, pipeline.MetricQueryPartial); got != 0 {
		t.Errorf("partial = %v, want 0: the session was seen from its start", got)
	}
}
