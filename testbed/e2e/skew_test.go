// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/groundtruth"
	"github.com/gpotel/gpotel/testbed/workload"
)

// Skew thresholds on 4 segments, where all work on one gives 1 - 1/4 = 0.75:
// skewed means more than two thirds of that, even means at most a third.
const (
	skewedAbove = 0.5
	evenBelow   = 0.25
)

// A query whose rows all live on one segment is reported skewed with that
// segment named; one spread evenly over every segment is not. Both
// sessions run dispatched queries of queryLength (the coordinator backend
// active in each, as a dispatcher is), each over several ticks; the
// session figures over a window and each query's own figures are checked.
func TestSkewNamesTheHotSegment(t *testing.T) {
	needBinaries(t)
	c := cluster.Start(t, cluster.Options{Hosts: 2, SegmentsPerHost: 2, Dialect: dialect.GP6})
	ctx := await.Context(t)
	s := launch(ctx, t, c, StackOptions{Binaries: bins, Config: configPath("testbed.yaml"), Dir: t.TempDir(), OTLPKeep: 10})
	api := dialAPI(t, s.API)

	// The last segment lives on the second host: neither the first segment
	// (the tie-break) nor the coordinator's host.
	hot := c.Segments[len(c.Segments)-1].Content
	started := time.Now()
	// Five ticks of config/testbed.yaml's 2 s.
	const queryLength = 10 * time.Second
	skewed, err := workload.Start(context.Background(), c, workload.Spec{Name: "e2e-skewed", Kind: workload.SkewedCPU, HotContent: hot, Duration: 90 * time.Second, QueryDuration: queryLength})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = skewed.Stop() })
	even, err := workload.Start(context.Background(), c, workload.Spec{Name: "e2e-even", Kind: workload.CPU, Duration: 90 * time.Second, QueryDuration: queryLength})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = even.Stop() })
	// What /proc says each backend used, to derive the skew gpotel must report.
	truth := sampleTruth(append(skewed.AllPids(), even.AllPids()...), 50*time.Millisecond)
	stopTruth := sync.OnceValue(truth.Stop)
	t.Cleanup(func() { _ = stopTruth() })

	// A state whose last window (10 s in testbed.yaml) lies wholly inside
	// both runs and the ground truth, with every segment counted.
	var skewedState, evenState *yagpcc.SessionState
	var skewedStat, evenStat *yagpcc.SystemStat
	waitFor(t, "both sessions' skew over a window inside their run", func() (bool, string) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for _, w := range []struct {
			sess  *workload.Session
			state **yagpcc.SessionState
			stat  **yagpcc.SystemStat
		}{{skewed, &skewedState, &skewedStat}, {even, &evenState, &evenStat}} {
			st, err := stateOf(cctx, api, w.sess.SessID())
			if err != nil || st == nil {
				return false, fmt.Sprintf("session %s: %v", w.sess.Name, err)
			}
			last := st.GetLastMetrics().GetSystemStat()
			at := st.GetTime().AsTime()
			old := at.Add(-time.Duration(last.GetWindowSeconds() * float64(time.Second)))
			first, newest := truth.span()
			switch {
			case last.GetWindowSeconds() < 9 || old.Before(started.Add(2*time.Second)):
				return false, fmt.Sprintf("session %s: window of %.1fs from %s", w.sess.Name, last.GetWindowSeconds(), old.Sub(started))
			case last.GetSkewSegments() != uint32(len(c.Segments)):
				return false, fmt.Sprintf("session %s: %d segments took part, want %d", w.sess.Name, last.GetSkewSegments(), len(c.Segments))
			case old.Before(first) || !at.Before(newest):
				return false, fmt.Sprintf("session %s: window %s..%s outside the ground truth", w.sess.Name, old.Format(time.TimeOnly), at.Format(time.TimeOnly))
			}
			*w.state, *w.stat = st, last
		}
		return true, ""
	})
	if err := stopTruth(); err != nil {
		t.Fatalf("ground truth: %v", err)
	}

	// The skew /proc gives over the same window: each segment's backends'
	// CPU, the coordinator left out, 1 - avg/max, and the hottest segment.
	for _, w := range []struct {
		name  string
		sess  *workload.Session
		state *yagpcc.SessionState
	}{{"skewed", skewed, skewedState}, {"even", even, evenState}} {
		stat := w.state.GetLastMetrics().GetSystemStat()
		want, wantHottest, bySegment := procSkew(t, truth, w.state, w.sess)
		t.Logf("%s: cpu skew %.3f, max/avg %.2f, hottest %s; /proc over the same window: skew %.3f, hottest %d, CPU by segment %v",
			w.name, stat.GetCpuSkew(), stat.GetCpuMaxOverAvg(), hottestText(stat), want, wantHottest, bySegment)
		if math.Abs(stat.GetCpuSkew()-want) > skewTolerance {
			t.Errorf("%s session: cpu skew %.3f, /proc's over the same window %.3f (by segment %v)", w.name, stat.GetCpuSkew(), want, bySegment)
		}
		if w.name == "skewed" && (stat.CpuHottestSegment == nil || stat.GetCpuHottestSegment() != int32(wantHottest)) {
			t.Errorf("skewed session: hottest segment %s, /proc's %d", hottestText(stat), wantHottest)
		}
	}
	// The workloads did what the test is about: one on a single segment,
	// the other spread.
	if want, hottest, _ := procSkew(t, truth, skewedState, skewed); want <= skewedAbove || hottest != hot {
		t.Errorf("the skewed workload was not skewed: /proc's skew %.3f, hottest %d (want above %.2f on %d)", want, hottest, skewedAbove, hot)
	}
	if want, _, _ := procSkew(t, truth, evenState, even); want >= evenBelow {
		t.Errorf("the even workload was not even: /proc's skew %.3f (want below %.2f)", want, evenBelow)
	}

	// GetClusterTop ranked by skew puts the skewed session before the even
	// one, with its CPU on the hot segment's host in its per-host breakdown,
	// and lists each session's queries: wait for one of each seen whole
	// (from its start, not partial) and ended, over at least three ticks.
	conn, err := grpc.NewClient(s.API, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	var top *gpotelv1.GetClusterTopResponse
	var skewedQuery, evenQuery *gpotelv1.QueryTop
	waitFor(t, "a whole, ended query of each session in GetClusterTop", func() (bool, string) {
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		defer ccancel()
		var err error
		top, err = gpotelv1.NewClusterTopClient(conn).GetClusterTop(cctx, &gpotelv1.GetClusterTopRequest{Key: gpotelv1.TopKey_TOP_KEY_SKEW, Limit: 100})
		if err != nil {
			return false, err.Error()
		}
		whole := func(sess *workload.Session) *gpotelv1.QueryTop {
			for _, q := range top.GetQueries() {
				if q.GetSessId() == int64(sess.SessID()) && q.GetCompleted() && !q.GetPartial() && q.GetDurationSeconds() >= 6 {
					return q
				}
			}
			return nil
		}
		skewedQuery, evenQuery = whole(skewed), whole(even)
		return skewedQuery != nil && evenQuery != nil, fmt.Sprintf("skewed session's query %v, even session's %v", skewedQuery, evenQuery)
	})
	for _, q := range []struct {
		name string
		q    *gpotelv1.QueryTop
	}{{"skewed", skewedQuery}, {"even", evenQuery}} {
		t.Logf("%s session's query started %s: %.1f s, cpu %.3f s, skew %.3f, max/avg %.2f, hottest %s",
			q.name, time.Unix(0, q.q.GetStartUnixNano()).Format(time.RFC3339Nano), q.q.GetDurationSeconds(),
			q.q.GetCpuSeconds(), q.q.GetCpuSkew(), q.q.GetCpuMaxOverAvg(), hottestOf(q.q.CpuHottestSegment))
	}
	if got := skewedQuery.GetCpuSkew(); got <= skewedAbove || skewedQuery.CpuHottestSegment == nil || skewedQuery.GetCpuHottestSegment() != int32(hot) {
		t.Errorf("skewed session's query: cpu skew %.3f, hottest %s; want above %.2f on segment %d", got, hottestOf(skewedQuery.CpuHottestSegment), skewedAbove, hot)
	}
	if got := evenQuery.GetCpuSkew(); got >= evenBelow {
		t.Errorf("even session's query: cpu skew %.3f, want below %.2f", got, evenBelow)
	}

	// Every query of the skewed session, short or long, puts no more CPU on
	// a segment than /proc says the session's backends there used: the idle
	// ones (and the waiting coordinator) next to nothing.
	idle := idleCPUByContent(t, skewed, hot)
	queries := querySegmentCPU(s.Sink.Received(), skewed.SessID())
	if len(queries) == 0 {
		t.Fatal("no query figures of the skewed session in the OTLP output")
	}
	for start, bySegment := range queries {
		for content, cpu := range bySegment {
			if content == hot {
				continue
			}
			if used, ok := idle[content]; !ok || cpu > used+idleSlack {
				t.Errorf("skewed session's query started %s: %.3f s of CPU on segment %d, whose backends /proc shows used %.3f s in all",
					start, cpu, content, used)
			}
		}
	}

	// Ranked by skew, the skewed session comes before the even one (the
	// collector's own discovery session may be anywhere).
	rank := func(id int) int {
		return slices.IndexFunc(top.GetSessions(), func(s *gpotelv1.SessionTop) bool { return s.GetSessId() == int64(id) })
	}
	if r, e := rank(skewed.SessID()), rank(even.SessID()); r < 0 || e >= 0 && e < r {
		t.Fatalf("GetClusterTop by skew: sessions %v, want session %d ranked before %d", top.GetSessions(), skewed.SessID(), even.SessID())
	}
	first := top.GetSessions()[rank(skewed.SessID())]
	hotHost := c.Segments[len(c.Segments)-1].Host
	var onHot, onSegments float64
	for _, h := range first.GetHosts() {
		if h.GetHostname() == cluster.CoordinatorHost {
			continue
		}
		onSegments += h.GetUsage().GetCpuCores()
		if h.GetHostname() == hotHost {
			onHot = h.GetUsage().GetCpuCores()
		}
	}
	t.Logf("GetClusterTop: skewed session at skew %.3f, %.3f of its %.3f segment-host cores on %s", first.GetCpuSkew(), onHot, onSegments, hotHost)
	if onSegments <= 0 || onHot < 0.9*onSegments {
		t.Errorf("per-host breakdown %v: want at least 90 %% of the segment hosts' CPU on %s", first.GetHosts(), hotHost)
	}
}

// idleSlack is CPU a query may show on a segment beyond what /proc says its
// backends there used: the clock-tick rounding of two /proc reads.
const idleSlack = 0.02

// skewTolerance is how far gpotel's skew may be from /proc's over the same
// window: each segment's CPU agrees to a few percent (tolerance), and
// 1 - avg/max moves by about that much.
const skewTolerance = 0.05

// procSkew is the CPU skew of a session over the state's window as /proc
// tells it: its backends' CPU per segment (the coordinator left out), 1 -
// avg/max, and the hottest segment (a tie goes to the lowest content id).
func procSkew(t *testing.T, truth *truthSeries, st *yagpcc.SessionState, w *workload.Session) (skew float64, hottest int, bySegment map[int]float64) {
	t.Helper()
	bySegment = map[int]float64{}
	cpu := func(p groundtruth.Process) float64 { return p.CPUSeconds() }
	for content, pids := range w.History() {
		if content == cluster.CoordinatorContent {
			continue
		}
		bySegment[content] = windowTruth(t, truth, st, pids, cpu)
	}
	var sum, top float64
	hottest = cluster.CoordinatorContent
	for _, content := range slices.Sorted(maps.Keys(bySegment)) {
		v := max(bySegment[content], 0)
		sum += v
		if v > top {
			top, hottest = v, content
		}
	}
	if top <= 0 {
		t.Fatalf("session %s used no CPU on any segment over the window: %v", w.Name, bySegment)
	}
	return 1 - sum/float64(len(bySegment))/top, hottest, bySegment
}

// idleCPUByContent is the lifetime CPU seconds, read from /proc now, of a
// session's live backends on every content but hot.
func idleCPUByContent(t *testing.T, w *workload.Session, hot int) map[int]float64 {
	t.Helper()
	out := map[int]float64{}
	for content, pids := range w.Pids() {
		if content == hot {
			continue
		}
		total, err := groundtruth.Sum(pids)
		if err != nil {
			t.Fatalf("content %d: %v", content, err)
		}
		out[content] = total.CPUSeconds()
	}
	return out
}

// querySegmentCPU is gpotel.query.segment.cpu.time by segment of every
// query of the session in the newest snapshot that has query figures, by
// the query's start.
func querySegmentCPU(batches []pmetric.Metrics, sessID int) map[string]map[int]float64 {
	var newest time.Time
	var out map[string]map[int]float64
	for _, md := range batches {
		rms := md.ResourceMetrics()
		for i := range rms.Len() {
			attrs := rms.At(i).Resource().Attributes()
			kind, _ := attrs.Get(pipeline.AttrResourceKind)
			id, _ := attrs.Get(pipeline.AttrSessionID)
			if kind.Str() != pipeline.KindQuery.String() || id.Int() != int64(sessID) {
				continue
			}
			start, _ := attrs.Get(pipeline.AttrQueryStart)
			pts, _ := points(rms.At(i), pipeline.MetricQuerySegmentCPUTime)
			for k := range pts.Len() {
				dp := pts.At(k)
				at := dp.Timestamp().AsTime()
				if at.Before(newest) {
					continue
				}
				if at.After(newest) {
					newest, out = at, map[string]map[int]float64{}
				}
				content := int(intAttr(dp.Attributes(), pipeline.AttrSegmentID))
				if out[start.Str()] == nil {
					out[start.Str()] = map[int]float64{}
				}
				out[start.Str()][content] += dp.DoubleValue()
			}
		}
	}
	return out
}

func hottestText(st *yagpcc.SystemStat) string { return hottestOf(st.CpuHottestSegment) }

func hottestOf(segment *int32) string {
	if segment == nil {
		return "none"
	}
	return fmt.Sprint(*segment)
}
