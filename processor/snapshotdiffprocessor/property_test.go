// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// truthProcess is one process of the ground-truth timeline: its counters at
// every snapshot time, whether or not a snapshot saw it.
type truthProcess struct {
	host    string
	seg     int64
	session int64
	pid     int64
	created float64 // s
	born    int     // first snapshot it is alive in
	died    int     // first snapshot it is no longer alive in
	cpuMS   []int64 // per snapshot
	read    []int64
	syscR   []int64
	rss     []int64 // per snapshot; nil: none
}

type truthTimeline struct {
	times   []float64 // s
	hostsUp []map[string]bool
	procs   []truthProcess
}

var propHosts = []string{"sdw1", "sdw2", "sdw3"}

func randomTimeline(rng *rand.Rand, snapshots, processes int) truthTimeline {
	tl := truthTimeline{}
	t := 0.0
	for k := 0; k < snapshots; k++ {
		tl.times = append(tl.times, t)
		t += float64(5 + rng.Intn(21)) // irregular intervals, 5–25 s
		up := map[string]bool{}
		for _, h := range propHosts {
			up[h] = rng.Float64() > 0.12
		}
		tl.hostsUp = append(tl.hostsUp, up)
	}
	for i := 0; i < processes; i++ {
		p := truthProcess{
			host:    propHosts[rng.Intn(len(propHosts))],
			seg:     int64(rng.Intn(4)),
			session: int64(1 + rng.Intn(4)),
			pid:     int64(100 + rng.Intn(6)), // a small pool: pids get reused
			born:    rng.Intn(snapshots) - snapshots/3,
		}
		p.born = max(p.born, 0)
		p.died = p.born + 1 + rng.Intn(snapshots)
		// Creation a little before the first snapshot it is alive in; unique.
		p.created = tl.times[p.born] - 1 - rng.Float64()*4 + float64(i)*1e-6
		var cpu, read, calls int64
		cpu, read, calls = rng.Int63n(100000), rng.Int63n(1<<40), rng.Int63n(1<<20)
		for k := 0; k < snapshots; k++ {
			if k >= p.born {
				cpu += rng.Int63n(20000)
				read += rng.Int63n(1 << 30)
				calls += rng.Int63n(5000)
				if rng.Float64() < 0.03 { // a counter that goes backwards
					read -= rng.Int63n(1 << 31)
					read = max(read, 0)
				}
			}
			p.cpuMS = append(p.cpuMS, cpu)
			p.read = append(p.read, read)
			p.syscR = append(p.syscR, calls)
		}
		tl.procs = append(tl.procs, p)
	}
	return tl
}

func (tl *truthTimeline) seen(p *truthProcess, k int) bool {
	return k >= p.born && k < p.died && tl.hostsUp[k][p.host]
}

func (tl *truthTimeline) snapshot(k int) pipelinetest.Snapshot {
	s := pipelinetest.Snapshot{Time: at(tl.times[k]), TmID: testTmID, Coordinator: "mdw"}
	for _, h := range propHosts {
		s.Hosts = append(s.Hosts, pipelinetest.Host{Name: h, Up: tl.hostsUp[k][h]})
	}
	for id := int64(1); id <= 4; id++ {
		s.Sessions = append(s.Sessions, pipelinetest.Session{ID: id, PID: id, State: "active"})
	}
	for i := range tl.procs {
		p := &tl.procs[i]
		if !tl.seen(p, k) {
			continue
		}
		proc := pipelinetest.Process{
			Host: p.host, Segment: p.seg, Session: p.session, PID: p.pid, Created: at(p.created),
			CPUUser: float64(p.cpuMS[k]) / 1000, ReadBytes: p.read[k], SyscR: p.syscR[k],
		}
		if p.rss != nil {
			proc.RSS = p.rss[k]
		}
		s.Processes = append(s.Processes, proc)
	}
	return s
}

// sessionTruth is what a session's figures must be, by brute force.
type sessionTruth struct {
	cpuMS, read, syscR       int64
	partial                  bool
	lifeCPUMS, lifeRead      int64
	lifePartial              bool
	processes                int
	hosts                    map[string]bool
	span                     float64
	oldIndex, retainedOldest int
}

// bruteForce computes window figures at snapshot n straight from the
// timeline: old is the retained snapshot (other than n) whose age is
// nearest to the window, ties to the older; a process counts from its last
// sighting at or before old (or from zero) up to its last sighting at or
// before n, never negative. A process unseen for longer than the buffer is
// forgotten and counts as new when seen again.
func (tl *truthTimeline) bruteForce(n int, window time.Duration, maxPoints int) map[int64]*sessionTruth {
	lo := 0
	if maxPoints > 0 {
		lo = max(0, n-maxPoints+1)
	}
	old := n
	if n > lo {
		best := math.Inf(1)
		for i := lo; i < n; i++ {
			d := math.Abs(tl.times[n] - tl.times[i] - window.Seconds())
			if d < best || d == best && i < old {
				best, old = d, i
			}
		}
	}
	answered := map[string]int{}
	for _, h := range propHosts {
		answered[h] = -1
		for k := 0; k <= n; k++ {
			if tl.hostsUp[k][h] {
				answered[h] = k
			}
		}
	}
	out := map[int64]*sessionTruth{}
	for id := int64(1); id <= 4; id++ {
		out[id] = &sessionTruth{hosts: map[string]bool{}, span: tl.times[n] - tl.times[old], oldIndex: old, retainedOldest: lo}
	}
	for i := range tl.procs {
		p := &tl.procs[i]
		st := out[p.session]
		// Split the sightings up to n into incarnations: a gap longer than
		// the buffer makes the processor forget the process.
		var incarnation []int
		flush := func() {
			if len(incarnation) == 0 {
				return
			}
			last := incarnation[len(incarnation)-1]
			defer func() { incarnation = incarnation[:0] }()
			if last < lo { // freed from the process table
				return
			}
			down := !tl.hostsUp[n][p.host]
			if last >= old && down {
				st.partial = true
			}
			if last == n || down && last >= answered[p.host] {
				st.lifeCPUMS += p.cpuMS[last]
				st.lifeRead += p.read[last]
				if down {
					st.lifePartial = true
				}
			}
			if last <= old {
				return
			}
			from := -1
			for _, k := range incarnation {
				if k <= old {
					from = k
				}
			}
			var cpu0, read0, sys0 int64
			if from >= 0 {
				cpu0, read0, sys0 = p.cpuMS[from], p.read[from], p.syscR[from]
			}
			st.cpuMS += max(0, p.cpuMS[last]-cpu0)
			st.read += max(0, p.read[last]-read0)
			st.syscR += max(0, p.syscR[last]-sys0)
		}
		prev := -1
		for k := 0; k <= n; k++ {
			if !tl.seen(p, k) {
				continue
			}
			if prev >= 0 && maxPoints > 0 && prev < k-maxPoints {
				flush()
			}
			incarnation = append(incarnation, k)
			prev = k
		}
		flush()
		if tl.seen(p, n) {
			st.processes++
			st.hosts[p.host] = true
		}
	}
	return out
}

func TestSessionDeltaEqualsBruteForceOverTimeline(t *testing.T) {
	windows := []time.Duration{30 * time.Second, 90 * time.Second, 4 * time.Minute}
	for seed := int64(1); seed <= 60; seed++ {
		rng := rand.New(rand.NewSource(seed))
		tl := randomTimeline(rng, 28, 40)
		maxPoints := 0 // automatic: 28 snapshots never exceed its floor of 30
		if seed%2 == 0 {
			maxPoints = 2 + rng.Intn(10)
		}
		p, sink := newTestProcessor(t, &Config{Windows: windows, MaxStoredPoints: maxPoints})
		for n := range tl.times {
			out := feed(t, p, sink, tl.snapshot(n))
			lifeDone := false
			for _, w := range windows {
				name := pipeline.WindowName(w)
				truth := tl.bruteForce(n, w, maxPoints)
				for id := int64(1); id <= 4; id++ {
					st := truth[id]
					where := fmt.Sprintf("seed %d snapshot %d window %s session %d (old %d, oldest %d)", seed, n, name, id, st.oldIndex, st.retainedOldest)
					check := func(what string, got, want float64) {
						t.Helper()
						if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
							t.Fatalf("%s: %s = %v, want %v", where, what, got, want)
						}
					}
					check("cpu user", figure(t, out, id, pipeline.MetricSessionCPUTime, pipeline.AttrWindow, name, pipeline.AttrCPUMode, pipeline.CPUModeUser), float64(st.cpuMS)/1000)
					check("read bytes", figure(t, out, id, pipeline.MetricSessionDiskIO, pipeline.AttrWindow, name, pipeline.AttrDirection, pipeline.DirectionRead), float64(st.read))
					check("read syscalls", figure(t, out, id, pipeline.MetricSessionIOSyscalls, pipeline.AttrWindow, name, pipeline.AttrDirection, pipeline.DirectionRead), float64(st.syscR))
					check("span", figure(t, out, id, pipeline.MetricSessionWindowSpan, pipeline.AttrWindow, name), st.span)
					check("partial", figure(t, out, id, pipeline.MetricSessionPartial, pipeline.AttrWindow, name), float64(boolInt(st.partial)))
					if st.span > 0 {
						check("read rate", figure(t, out, id, pipeline.MetricSessionDiskIO+pipeline.RateSuffix, pipeline.AttrWindow, name, pipeline.AttrDirection, pipeline.DirectionRead), float64(st.read)/st.span)
					}
					if !lifeDone {
						check("lifetime cpu", figure(t, out, id, pipeline.MetricSessionCPUTime, pipeline.AttrWindow, pipeline.WindowLifetime, pipeline.AttrCPUMode, pipeline.CPUModeUser), float64(st.lifeCPUMS)/1000)
						check("lifetime read", figure(t, out, id, pipeline.MetricSessionDiskIO, pipeline.AttrWindow, pipeline.WindowLifetime, pipeline.AttrDirection, pipeline.DirectionRead), float64(st.lifeRead))
						check("lifetime partial", figure(t, out, id, pipeline.MetricSessionPartial, pipeline.AttrWindow, pipeline.WindowLifetime), float64(boolInt(st.lifePartial)))
						check("processes", figure(t, out, id, pipeline.MetricSessionProcesses), float64(st.processes))
						check("hosts", figure(t, out, id, pipeline.MetricSessionHosts), float64(len(st.hosts)))
					}
				}
				lifeDone = true
			}
		}
	}
}

// stillAndApart makes a timeline one a real host could show and sparse
// batches could leave figures out of: each counter holds still on about
// half the ticks, the memory changes on about a third, and no two
// processes of a host hold one pid at the same time (a pid is reused only
// after its process died).
func stillAndApart(rng *rand.Rand, tl *truthTimeline) {
	for i := range tl.procs {
		p := &tl.procs[i]
		for j := range tl.procs[:i] {
			q := &tl.procs[j]
			if q.host == p.host && q.pid == p.pid && p.born < q.died && q.born < p.died {
				p.pid = int64(1000 + i)
				break
			}
		}
		rss := rng.Int63n(1 << 30)
		for k := range tl.times {
			for _, c := range [][]int64{p.cpuMS, p.read, p.syscR} {
				if k > 0 && rng.Float64() < 0.5 && c[k] >= c[k-1] {
					c[k] = c[k-1]
				}
			}
			if rng.Float64() < 0.3 {
				rss = rng.Int63n(1 << 30)
			}
			p.rss = append(p.rss, rss)
		}
	}
}

// Sparse batches, down to the figure, give the figures dense batches give,
// and the same finished-query and ended-session events, every field: the
// same random timelines (hosts that do not answer, pids reused, counters
// that go back or hold still, memory that changes now and then, sessions
// that come and go running queries on several hosts) sent through the
// receiver's sparse sender and as dense batches.
func TestSparseBatchesGiveTheDenseFigures(t *testing.T) {
	windows := []time.Duration{30 * time.Second, 4 * time.Minute}
	var compared finishedWork // every event compared, to check the timelines have them
	for seed := int64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewSource(seed))
		tl := randomTimeline(rng, 28, 40)
		stillAndApart(rng, &tl)
		sessions := randomSessions(rng, tl.times)
		// The per-process output too: a figure a sparse batch left out
		// shows there even when no window moves.
		cfg := &Config{Windows: windows, EmitProcessMetrics: true, Queries: QueriesConfig{Enabled: true, Text: true, TextMaxLength: 1024, MaxFinished: 1000}}
		dense, denseSink := newTestProcessor(t, cfg)
		sparse, sparseSink := newTestProcessor(t, cfg)
		rec := pipelinetest.NewReceiver(sparse)
		walk := figureWalk{rng: rng, at: map[string]*[walkedFigures]int64{}}
		for n := range tl.times {
			snap := walk.fill(tl.snapshot(n))
			snap.Sessions = sessions[n]
			denseSink.Reset()
			sparseSink.Reset()
			feed(t, dense, denseSink, snap)
			if errs, err := rec.Send(context.Background(), snap); err != nil || len(errs) > 0 {
				t.Fatalf("seed %d snapshot %d: %v %v", seed, n, errs, err)
			}
			// Every point but how the batches travelled (their count and
			// sequence per host), which is what differs by design.
			gotFigures, wantFigures := everyPoint(sparseSink.AllMetrics()...), everyPoint(denseSink.AllMetrics()...)
			for _, figs := range []map[string]float64{gotFigures, wantFigures} {
				maps.DeleteFunc(figs, func(k string, _ float64) bool {
					metric := strings.Split(k, "|")[1]
					return metric == pipeline.MetricHostBatches || metric == pipeline.MetricHostSequence
				})
			}
			for k, w := range wantFigures {
				if g, ok := gotFigures[k]; !ok || g != w {
					t.Fatalf("seed %d snapshot %d: %s = %v (present %v) sparse, %v dense", seed, n, k, g, ok, w)
				}
			}
			for k, g := range gotFigures {
				if _, ok := wantFigures[k]; !ok {
					t.Fatalf("seed %d snapshot %d: %s = %v sparse, absent dense", seed, n, k, g)
				}
			}
			got, want := outputEvents(t, sparseSink.AllMetrics()), outputEvents(t, denseSink.AllMetrics())
			if diff := gocmp.Diff(want, got, gocmp.AllowUnexported(finishedWork{})); diff != "" {
				t.Fatalf("seed %d snapshot %d: the events differ (-dense +sparse):\n%s", seed, n, diff)
			}
			compared.queries = append(compared.queries, want.queries...)
			compared.sessions = append(compared.sessions, want.sessions...)
		}
	}
	// The timelines gave events of every kind to compare: queries on
	// several hosts, partial and complete, with workfiles and vmem.
	if !slices.ContainsFunc(compared.queries, func(q events.FinishedQuery) bool { return q.Partial }) ||
		!slices.ContainsFunc(compared.queries, func(q events.FinishedQuery) bool { return !q.Partial && q.Status == events.QueryCompleted }) ||
		!slices.ContainsFunc(compared.queries, func(q events.FinishedQuery) bool { return q.Spill != nil && q.VmemPeak > 0 }) ||
		!slices.ContainsFunc(compared.queries, func(q events.FinishedQuery) bool {
			return len(q.Segments) > 0 && q.Segments[0].Host != q.Segments[len(q.Segments)-1].Host
		}) ||
		!slices.ContainsFunc(compared.sessions, func(s events.EndedSession) bool { return s.Partial }) ||
		!slices.ContainsFunc(compared.sessions, func(s events.EndedSession) bool { return !s.Partial && s.Queries > 0 }) {
		t.Errorf("the timelines lack a kind of event: %d query events, %d session events", len(compared.queries), len(compared.sessions))
	}
}

// walkedFigures are the figures figureWalk moves: every one of a process
// the truth timeline leaves at zero.
const walkedFigures = 27

// figureWalk moves every figure of a process the truth timeline does not,
// each on its own: a counter holds still or grows, a gauge holds or jumps.
type figureWalk struct {
	rng *rand.Rand
	at  map[string]*[walkedFigures]int64 // by host, pid and start
}

func (w *figureWalk) fill(s pipelinetest.Snapshot) pipelinetest.Snapshot {
	for i := range s.Processes {
		p := &s.Processes[i]
		key := fmt.Sprint(p.Host, "/", p.PID, "/", p.Created.UnixNano())
		v := w.at[key]
		if v == nil {
			v = new([walkedFigures]int64)
			w.at[key] = v
		}
		for f := range v {
			switch {
			case w.rng.Float64() < 0.5: // holds still
			case f >= 18: // a gauge
				v[f] = w.rng.Int63n(1 << 30)
			default:
				v[f] += w.rng.Int63n(1 << 20)
			}
		}
		p.CPUSystem, p.WriteBytes, p.CancelledWrite = float64(v[0])/1000, v[1], v[2]
		p.DiskDelay, p.RChar, p.WChar, p.SyscW = float64(v[3])/1000, v[4], v[5], v[6]
		p.MajorFaults, p.MinorFault, p.Voluntary, p.Involuntary = v[7], v[8], v[9], v[10]
		p.RunDelay, p.SwapinDelay, p.FreepagesDelay = float64(v[11])/1000, float64(v[12])/1000, float64(v[13])/1000
		p.ThrashingDelay, p.CompactDelay, p.WpcopyDelay, p.IRQDelay = float64(v[14])/1000, float64(v[15])/1000, float64(v[16])/1000, float64(v[17])/1000
		p.RSSAnon, p.RSSFile, p.RSSShmem, p.Virtual, p.Peak, p.VirtualPeak = v[18], v[19], v[20], v[21], v[22], v[23]
		p.Swap, p.PageTables, p.Threads = v[24], v[25], v[26]%64+1
	}
	return s
}

// randomSessions is what pg_stat_activity says of sessions 1 to 4 at each
// snapshot time: they come and go (a key reused by a later backend) and
// run queries that start, run over several snapshots or end between two,
// some holding workfiles, vmem or waiting for a lock.
func randomSessions(rng *rand.Rand, times []float64) [][]pipelinetest.Session {
	out := make([][]pipelinetest.Session, len(times))
	queries := 0
	for id := int64(1); id <= 4; id++ {
		var cur *pipelinetest.Session // nil: no session under id
		last := 0.0                   // s, its latest start or state change
		for k, now := range times {
			prev := now - 5
			if k > 0 {
				prev = times[k-1]
			}
			// pick is a time after lo and before now.
			pick := func(lo float64) float64 { return lo + (now-lo)*(0.1+0.8*rng.Float64()) }
			switch {
			case cur == nil && (k == 0 && rng.Float64() < 0.8 || rng.Float64() < 0.3):
				start := now - 30 // before gpotel watched
				if k > 0 {
					start = pick(prev)
				}
				cur = &pipelinetest.Session{ID: id, PID: id, DB: "db", User: "u", State: "idle", BackendStart: at(start), StateChange: at(start)}
				last = start
			case cur != nil && rng.Float64() < 0.08:
				cur = nil // it left
			}
			if cur == nil {
				continue
			}
			lo := max(prev, last)
			switch r := rng.Float64(); {
			case cur.State == "active" && r < 0.4: // it ended
				last = pick(lo)
				cur.State, cur.StateChange = "idle", at(last)
			case cur.State == "idle" && r < 0.7: // one started
				queries++
				last = pick(lo)
				cur.State, cur.Query, cur.QueryStart, cur.StateChange = "active", fmt.Sprint("select ", queries), at(last), at(last)
			case r < 0.85: // one started and ended between two snapshots
				queries++
				start := pick(lo)
				last = pick(start)
				cur.State, cur.Query, cur.QueryStart, cur.StateChange = "idle", fmt.Sprint("select ", queries), at(start), at(last)
			}
			cur.Greenplum = nil
			if cur.State == "active" && rng.Float64() < 0.5 {
				cur.Greenplum = &snapshot.GreenplumSession{
					Spill:  []snapshot.Spill{{Segment: rng.Int63n(4), Bytes: rng.Int63n(1 << 30), Files: 1 + rng.Int63n(8)}},
					Memory: []snapshot.SegmentMemory{{Segment: rng.Int63n(4), Bytes: rng.Int63n(1 << 30)}},
				}
				if rng.Float64() < 0.3 {
					cur.Greenplum.Wait = &snapshot.LockWait{Segment: -1, Mode: "ShareLock", Object: "public.t", Blocker: 1 + id%4, BlockerMode: "ExclusiveLock"}
				}
			}
			out[k] = append(out[k], *cur)
		}
	}
	return out
}

// sortedEvents is ev in the order of their keys, each query's segments and
// partial hosts by host name: the order in which one output lists its
// events, or the host table's order of rows (which host answered first),
// says nothing.
func sortedEvents(ev finishedWork) finishedWork {
	for _, q := range ev.queries {
		slices.SortFunc(q.Segments, func(a, b pipeline.SegmentUse) int {
			return cmp.Or(strings.Compare(a.Host, b.Host), cmp.Compare(a.Segment, b.Segment))
		})
		slices.Sort(q.PartialCause.Hosts)
	}
	for _, s := range ev.sessions {
		slices.Sort(s.PartialCause.Hosts)
	}
	slices.SortFunc(ev.queries, func(a, b events.FinishedQuery) int {
		return cmp.Or(a.Session.Compare(b.Session), cmp.Compare(a.Start, b.Start))
	})
	slices.SortFunc(ev.sessions, func(a, b events.EndedSession) int {
		return cmp.Or(a.Session.Compare(b.Session), cmp.Compare(a.Start, b.Start))
	})
	return ev
}

// outputEvents are the events of every output in mds.
func outputEvents(t testing.TB, mds []pmetric.Metrics) finishedWork {
	var all finishedWork
	for _, md := range mds {
		ev := eventsOf(t, md)
		all.queries = append(all.queries, ev.queries...)
		all.sessions = append(all.sessions, ev.sessions...)
	}
	return sortedEvents(all)
}
