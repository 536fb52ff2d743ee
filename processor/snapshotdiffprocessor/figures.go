// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"cmp"
	"slices"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/output"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor/internal/querylife"
)

// windowFigures are one window's per-session results, indexed by session row.
type windowFigures struct {
	span    int64 // ns: newest time − old snapshot time
	deltas  []pipeline.Counters
	partial []bool
	// cluster sums every process of the window, whatever its session;
	// unattributed sums the exited processes no scrape saw, per segment;
	// unrecorded the postmasters' CPU beyond their children's exit records.
	cluster      pipeline.Counters
	unattributed map[hostSegment]*pipeline.Counters
	unrecorded   map[hostSegment]*pipeline.Counters
}

// figures are the session results of the newest snapshot, indexed by
// session row; the store computes them once per snapshot.
type figures struct {
	time            int64
	windows         []windowFigures
	lifetime        []pipeline.Counters
	lifetimePartial []bool
	// known are the counters some process of the session reported (bit
	// per Figure): the others are absent from its figures, not 0.
	known         []uint32
	processes     []int32
	hosts         []int32
	memoryCluster []memoryGauges
	memoryMaxHost []memoryGauges
	sessionIndex  map[pipeline.SessionKey]uint32
	smoothed      *smoothedFigures // nil when smoothing is off
	work          querylife.Work   // with query figures on
	hostNames     []string         // by host row, for the per-segment cluster figures
	segments      *segmentFigures
	// carried are the processes the store carried unchanged, by host, as
	// last sighted (emit_process_metrics on).
	carried [][]snapshot.ProcessSample
}

// sessionFigures is one session's view of figures.
type sessionFigures struct {
	known bool
	row   uint32
	f     *figures
}

func (f *figures) session(key pipeline.SessionKey) sessionFigures {
	row, ok := f.sessionIndex[key]
	return sessionFigures{known: ok, row: row, f: f}
}

func (s *store) computeFigures() *figures {
	newest := s.windows.retained[len(s.windows.retained)-1]
	nSessions := len(s.sessions.keys)
	f := &figures{
		time:            newest.time,
		windows:         make([]windowFigures, len(s.windows.spans)),
		lifetime:        make([]pipeline.Counters, nSessions),
		lifetimePartial: make([]bool, nSessions),
		known:           make([]uint32, nSessions),
		processes:       make([]int32, nSessions),
		hosts:           make([]int32, nSessions),
		memoryCluster:   make([]memoryGauges, nSessions),
		memoryMaxHost:   make([]memoryGauges, nSessions),
		sessionIndex:    make(map[pipeline.SessionKey]uint32, len(s.sessions.index)),
	}
	for k, v := range s.sessions.index {
		f.sessionIndex[k] = v
	}

	for w := range s.windows.spans {
		oldSeq := s.windows.oldSeq[w]
		wf := windowFigures{
			span:    newest.time - s.windows.bySeq(oldSeq).time,
			deltas:  make([]pipeline.Counters, nSessions),
			partial: make([]bool, nSessions),
		}
		acc := s.windows.acc[w]
		for row, seen := range s.procs.seen {
			if seen == 0 || seen < oldSeq {
				continue
			}
			key := &s.procs.keys[row]
			// Seen at old or later on a host that is silent now: we cannot
			// tell whether it still runs or what it used since.
			if s.hosts.down[key.host] {
				wf.partial[key.session] = true
			}
			if seen == oldSeq {
				continue
			}
			d := &wf.deltas[key.session]
			var u *pipeline.Counters
			switch s.sessions.keys[key.session].ID {
			case unattributedSession:
				u = segmentEntry(&wf.unattributed, hostSegment{Host: key.host, Segment: s.procs.seg[row]})
			case unrecordedSession:
				u = segmentEntry(&wf.unrecorded, hostSegment{Host: key.host, Segment: s.procs.seg[row]})
			}
			for c, v := range acc[row*pipeline.NumCounters : (row+1)*pipeline.NumCounters] {
				if v > 0 { // a counter that went down over the window gives 0
					d[c] += v
					wf.cluster[c] += v
					if u != nil {
						u[c] += v
					}
				}
			}
		}
		f.windows[w] = wf
	}

	// Lifetime: live processes' cumulative counters; a silent host's
	// processes count as last seen while it was answering.
	for row, seen := range s.procs.seen {
		if seen == 0 || s.procs.gone[row] {
			continue
		}
		key := &s.procs.keys[row]
		live := seen == newest.seq
		if s.hosts.down[key.host] {
			if seen < s.hosts.answered[key.host] {
				continue
			}
			f.lifetimePartial[key.session] = true
		} else if !live {
			continue
		}
		t := &f.lifetime[key.session]
		for c, v := range s.procs.last[row] {
			t[c] += v
		}
	}

	// Every process the store holds for a session, exited ones too: those
	// the windows and the lifetime count.
	held := make([]bool, nSessions)
	for row, seen := range s.procs.seen {
		if seen != 0 {
			session := s.procs.keys[row].session
			f.known[session] |= s.procs.known[row]
			held[session] = true
		}
	}
	for session, h := range held {
		if !h {
			f.known[session] = pipeline.EveryCounter
		}
	}

	for _, span := range newest.bySession {
		for _, row := range newest.sessionRows(span.session) {
			if !s.procs.gone[row] {
				f.processes[span.session]++
			}
		}
	}
	// Memory is summed per host first, then reduced over hosts; both the sum
	// and the maximum are independent of the order of the hosts.
	for i := range s.memBySH {
		m := &s.memBySH[i]
		f.hosts[m.session]++
		cl, mx := &f.memoryCluster[m.session], &f.memoryMaxHost[m.session]
		for k, v := range m.memory {
			cl[k] += v
			mx[k] = max(mx[k], v)
		}
	}
	return f
}

// segmentEntry is hs's entry of *m, made on first use.
func segmentEntry(m *map[hostSegment]*pipeline.Counters, hs hostSegment) *pipeline.Counters {
	if *m == nil {
		*m = map[hostSegment]*pipeline.Counters{}
	}
	c := (*m)[hs]
	if c == nil {
		c = new(pipeline.Counters)
		(*m)[hs] = c
	}
	return c
}

// segmentCounters lists bySegment's counters by host name, then content id.
func segmentCounters(bySegment map[hostSegment]*pipeline.Counters, hostNames []string) []output.SegmentCounters {
	out := make([]output.SegmentCounters, 0, len(bySegment))
	for hs, c := range bySegment {
		out = append(out, output.SegmentCounters{Host: hostNames[hs.Host], Segment: hs.Segment, Counters: *c})
	}
	slices.SortFunc(out, func(a, b output.SegmentCounters) int {
		return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.Segment, b.Segment))
	})
	return out
}
