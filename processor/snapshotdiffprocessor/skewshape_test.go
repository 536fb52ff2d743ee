// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"math"
	"testing"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
)

// The testbed's skewed_cpu session and its neighbours, tick by tick (2 s as
// in config/testbed.yaml): session 7's backend on segment 3 burns one core,
// its coordinator backend and its backends on segments 0-2 use nothing.
// Session 8 is the collector's own discovery session: it reads
// pg_stat_activity from inside its own statement, so every scrape shows it
// active in a query that started just before, and its gp_dist_random
// backends do the same work on every segment.

const skewTick = 2.0

// skewedSession is session 7's processes with segment 3 having burnt hot s.
func skewedSession(hot float64) []pipelinetest.Process {
	return []pipelinetest.Process{
		proc("mdw", -1, 7, 1007, -100, 0, 0),
		proc("sdw1", 0, 7, 10, -100, 0, 0), proc("sdw1", 1, 7, 11, -100, 0, 0),
		proc("sdw2", 2, 7, 12, -100, 0, 0), proc("sdw2", 3, 7, 13, -100, hot, 0),
	}
}

// discoverySession is session 8 at sec: every segment backend used 0.05 s per tick.
func discoverySession(sec float64) (pipelinetest.Session, []pipelinetest.Process) {
	cpu := 0.05 * sec / skewTick
	return pipelinetest.Session{ID: 8, PID: 1008, DB: "postgres", User: "gpadmin", State: "active", QueryStart: at(sec - 0.01)},
		[]pipelinetest.Process{
			proc("mdw", -1, 8, 1008, -100, 0, 0),
			proc("sdw1", 0, 8, 20, -100, cpu, 0), proc("sdw1", 1, 8, 21, -100, cpu, 0),
			proc("sdw2", 2, 8, 22, -100, cpu, 0), proc("sdw2", 3, 8, 23, -100, cpu, 0),
		}
}

// skewShapeSnap is the snapshot at sec with session 7's activity a and its hot CPU.
func skewShapeSnap(sec float64, a activity, hot float64) pipelinetest.Snapshot {
	disc, discProcs := discoverySession(sec)
	s := snap(sec, nil, nil, append(skewedSession(hot), discProcs...)...)
	s.Sessions = []pipelinetest.Session{sessionAt(a), disc}
	return s
}

// queriesOf lists a session's query resources.
func queriesOf(md pmetric.Metrics, session int64) []pmetric.ResourceMetrics {
	var out []pmetric.ResourceMetrics
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		ra := rms.At(i).Resource().Attributes()
		kind, _ := ra.Get(pipeline.AttrResourceKind)
		id, _ := ra.Get(pipeline.AttrSessionID)
		if kind.Str() == pipeline.KindQuery.String() && id.Int() == session {
			out = append(out, rms.At(i))
		}
	}
	return out
}

// A session whose coordinator backend runs no statement (what skewed_cpu
// did before its coordinator ran the query) has no query: pg_stat_activity
// shows none. The skewed-looking queries the e2e test once logged were the
// discovery session's, and they hold only its own, evenly spread CPU.
func TestSessionWithoutCoordinatorQueryHasNoQueryAndLendsNoCPU(t *testing.T) {
	p, sink := newTestProcessor(t, queryConfig())
	var snaps []pipelinetest.Snapshot
	for sec := 0.0; sec <= 20; sec += skewTick {
		snaps = append(snaps, skewShapeSnap(sec, neverRan, sec))
	}
	md := feed(t, p, sink, snaps...)
	if qs := queriesOf(md, 7); len(qs) != 0 {
		t.Errorf("session 7 ran no query on its coordinator, yet has %d query resources", len(qs))
	}
	discovery := queriesOf(md, 8)
	if len(discovery) < 5 {
		t.Fatalf("session 8: %d queries, want one per tick", len(discovery))
	}
	var cpu float64
	for _, rm := range discovery {
		cpu += rmFigure(t, rm, pipeline.QueryMetric(pipeline.MetricSessionCPUTime), pipeline.AttrCPUMode, pipeline.CPUModeUser)
		ratio, ok := lookupQueryFigure(rm, pipeline.QueryMetric(pipeline.MetricSessionSkewRatio), pipeline.AttrSkewFigure, pipeline.SkewFigureCPU)
		if ok && ratio > 1e-6 {
			t.Errorf("a discovery query's CPU skew %.3f: its backends did the same on every segment", ratio)
		}
	}
	// Its CPU since its first query start: 0.2 s a tick from 0 to 20, none of session 7's 20 s.
	near(t, "session 8's queries' CPU", cpu, 0.2*20/skewTick)
}

// The skewed_cpu session as the testbed runs it now: its coordinator backend
// is active in a 10 s query (five ticks, not aligned with them) while
// segment 3 burns a core, query after query. Each query seen from its start
// is skewed 1 - 1/4 towards segment 3 and holds the CPU burnt while it ran.
func TestSkewedQueryOverSeveralTicksNamesTheHotSegment(t *testing.T) {
	const length = 10.0
	starts := []float64{1.3, 11.31, 21.32} // each begins just after the previous ended
	actAt := func(sec float64) activity {
		for i := len(starts) - 1; i >= 0; i-- {
			switch s := starts[i]; {
			case sec >= s+length:
				return idle(s, s+length)
			case sec >= s:
				return running(s)
			}
		}
		return neverRan
	}
	hotAt := func(sec float64) float64 {
		var burnt float64
		for _, s := range starts {
			burnt += max(0, min(sec, s+length)-s)
		}
		return burnt
	}
	p, sink := newTestProcessor(t, queryConfig())
	var snaps []pipelinetest.Snapshot
	for sec := 0.0; sec <= 34; sec += skewTick {
		snaps = append(snaps, skewShapeSnap(sec, actAt(sec), hotAt(sec)))
	}
	md := feed(t, p, sink, snaps...)
	cpu := []string{pipeline.AttrSkewFigure, pipeline.SkewFigureCPU}
	for _, s := range starts {
		// Within the boundary gap of 10 ms shared by time.
		if got := queryCPU(t, md, s); math.Abs(got-length) > 0.02 {
			t.Errorf("query at %gs: CPU %.3f s, want %.1f", s, got, length)
		}
		near(t, "cpu skew", queryFigure(t, md, s, pipeline.QueryMetric(pipeline.MetricSessionSkewRatio), cpu...), 0.75)
		near(t, "hottest segment", queryFigure(t, md, s, pipeline.QueryMetric(pipeline.MetricSessionSkewHottestSegment), cpu...), 3)
		near(t, "segments", queryFigure(t, md, s, pipeline.QueryMetric(pipeline.MetricSessionSkewSegments), cpu...), 4)
	}
}

// rmFigure reads one figure of a query resource.
func rmFigure(t testing.TB, rm pmetric.ResourceMetrics, metric string, attrs ...string) float64 {
	t.Helper()
	v, ok := lookupQueryFigure(rm, metric, attrs...)
	if !ok {
		t.Fatalf("query resource %v: no %s point with %v", rm.Resource().Attributes().AsRaw(), metric, attrs)
	}
	return v
}

func lookupQueryFigure(rm pmetric.ResourceMetrics, metric string, attrs ...string) (float64, bool) {
	ms := rm.ScopeMetrics().At(0).Metrics()
	for k := range ms.Len() {
		if ms.At(k).Name() != metric {
			continue
		}
		dps := ms.At(k).Gauge().DataPoints()
		for d := range dps.Len() {
			if dp := dps.At(d); attrsEqual(dp.Attributes(), attrs) {
				if dp.ValueType() == pmetric.NumberDataPointValueTypeDouble {
					return dp.DoubleValue(), true
				}
				return float64(dp.IntValue()), true
			}
		}
	}
	return 0, false
}
