package snapshotdiffprocessor

// windowFigures are one window's per-session results, indexed by session row.
type windowFigures struct {
	span    int64 // ns: newest time − old snapshot time
	deltas  []counters
	partial []bool
	// cluster sums every process of the window, whatever its session;
	// unattributed sums the exited processes no scrape saw, per segment;
	// unrecorded the postmasters' CPU beyond their children's exit records.
	cluster      counters
	unattributed map[hostSegment]*counters
	unrecorded   map[hostSegment]*counters
}

// hostSegment is one segment instance: its host row and content id.
type hostSegment struct {
	host    uint32
	segment int32
}

// figures are the session results of the newest snapshot, indexed by
// session row; the store computes them once per snapshot.
type figures struct {
	time            int64
	windows         []windowFigures
	lifetime        []counters
	lifetimePartial []bool
	processes       []int32
	hosts           []int32
	memoryCluster   []memoryGauges
	memoryMaxHost   []memoryGauges
	sessionIndex    map[sessionKey]uint32
	smoothed        *smoothedFigures // nil when smoothing is off
	queries         []queryFigures   // with query figures on
	hostNames       []string         // by host row, for the query figures
	segments        *segmentFigures
}

// sessionFigures is one session's view of figures.
type sessionFigures struct {
	known bool
	row   uint32
	f     *figures
}

func (f *figures) session(key sessionKey) sessionFigures {
	row, ok := f.sessionIndex[key]
	return sessionFigures{known: ok, row: row, f: f}
}

func (s *store) computeFigures() *figures {
	newest := s.ring[len(s.ring)-1]
	nSessions := len(s.sessionKeys)
	f := &figures{
		time:            newest.time,
		windows:         make([]windowFigures, len(s.windows)),
		lifetime:        make([]counters, nSessions),
		lifetimePartial: make([]bool, nSessions),
		processes:       make([]int32, nSessions),
		hosts:           make([]int32, nSessions),
		memoryCluster:   make([]memoryGauges, nSessions),
		memoryMaxHost:   make([]memoryGauges, nSessions),
		sessionIndex:    make(map[sessionKey]uint32, len(s.sessionIndex)),
	}
	for k, v := range s.sessionIndex {
		f.sessionIndex[k] = v
	}

	for w := range s.windows {
		oldSeq := s.oldSeq[w]
		wf := windowFigures{
			span:    newest.time - s.snapshotBySeq(oldSeq).time,
			deltas:  make([]counters, nSessions),
			partial: make([]bool, nSessions),
		}
		acc := s.acc[w]
		for row, seen := range s.procSeen {
			if seen == 0 || seen < oldSeq {
				continue
			}
			key := &s.procKeys[row]
			// Seen at old or later on a host that is silent now: we cannot
			// tell whether it still runs or what it used since.
			if s.hostDown[key.host] {
				wf.partial[key.session] = true
			}
			if seen == oldSeq {
				continue
			}
			d := &wf.deltas[key.session]
			var u *counters
			switch s.sessionKeys[key.session].id {
			case unattributedSession:
				u = segmentCounters(&wf.unattributed, hostSegment{key.host, s.procSeg[row]})
			case unrecordedSession:
				u = segmentCounters(&wf.unrecorded, hostSegment{key.host, s.procSeg[row]})
			}
			for c, v := range acc[row*numCounters : (row+1)*numCounters] {
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
	for row, seen := range s.procSeen {
		if seen == 0 || s.procGone[row] {
			continue
		}
		key := &s.procKeys[row]
		live := seen == newest.seq
		if s.hostDown[key.host] {
			if seen < s.hostAnswered[key.host] {
				continue
			}
			f.lifetimePartial[key.session] = true
		} else if !live {
			continue
		}
		t := &f.lifetime[key.session]
		for c, v := range s.procLast[row] {
			t[c] += v
		}
	}

	for _, span := range newest.bySession {
		for _, row := range newest.sessionRows(span.session) {
			if !s.procGone[row] {
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

// segmentCounters is hs's entry of *m, made on first use.
func segmentCounters(m *map[hostSegment]*counters, hs hostSegment) *counters {
	if *m == nil {
		*m = map[hostSegment]*counters{}
	}
	c := (*m)[hs]
	if c == nil {
		c = new(counters)
		(*m)[hs] = c
	}
	return c
}
