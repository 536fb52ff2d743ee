// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"slices"
	"strings"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor/internal/querylife"
)

// A segment instance, and what a session's processes used on it: the
// query lifecycle's declarations.
type (
	hostSegment = querylife.HostSegment
	segmentUse  = querylife.SegmentUse
)

// segmentFigures are, per session row, its use per segment instance, for
// each window (windows[w]) and for the live processes' lifetime totals.
type segmentFigures struct {
	windows  [][][]segmentUse
	lifetime [][]segmentUse
	// With emit_session_host_figures: per session row, its live processes
	// per host in the newest snapshot, in host-name order.
	hosts     [][]sessionHost
	hostNames []string
}

type sessionHost struct {
	host      uint32
	processes int32
	rss       int64
}

// computeSegmentFigures gathers the same processes as computeFigures does
// (a window: every process seen at its old snapshot or later, exits
// included; lifetime: the live ones), by segment instance.
func (s *store) computeSegmentFigures(withHosts bool) *segmentFigures {
	newest := s.windows.retained[len(s.windows.retained)-1]
	nSessions := len(s.sessions.keys)
	sf := &segmentFigures{windows: make([][][]segmentUse, len(s.windows.spans))}
	// Each live row's (session, segment instance) slot, looked up once for
	// every window.
	type slot struct {
		session uint32
		at      hostSegment
	}
	slotOf := make([]int32, len(s.procs.seen))
	var slotAt []hostSegment
	sessionSlots := make([][]int32, nSessions)
	index := make(map[slot]int32, len(s.procs.seen)/2) // sized: growing it cost more than filling it
	for row, seen := range s.procs.seen {
		key := &s.procs.keys[row]
		if seen == 0 || s.sessions.keys[key.session].ID == unattributedSession {
			slotOf[row] = -1
			continue
		}
		at := slot{key.session, hostSegment{Host: key.host, Segment: s.procs.seg[row]}}
		i, ok := index[at]
		if !ok {
			i = int32(len(slotAt)) // #nosec G115 -- fewer slots than process rows
			index[at] = i
			slotAt = append(slotAt, at.at)
			sessionSlots[key.session] = append(sessionSlots[key.session], i)
		}
		slotOf[row] = i
	}
	gather := func(include func(row int) bool, value func(row int) []int64) [][]segmentUse {
		totals := make([]segmentUse, len(slotAt))
		took := make([]bool, len(slotAt))
		for row, i := range slotOf {
			if i < 0 || !include(row) {
				continue
			}
			v := value(row)
			u := &totals[i]
			// A counter that went down over the window gives 0, as in the session figures.
			u.CPU += max(v[pipeline.CPUUser], 0) + max(v[pipeline.CPUSystem], 0)
			u.Read += max(v[pipeline.DiskRead], 0)
			u.Written += max(v[pipeline.DiskWrite], 0)
			took[i] = true
		}
		out := make([][]segmentUse, nSessions)
		for sess, slots := range sessionSlots {
			for _, i := range slots {
				if took[i] { // a segment took part in the window only with a process in it
					totals[i].At = slotAt[i]
					out[sess] = append(out[sess], totals[i])
				}
			}
		}
		return out
	}
	for w := range s.windows.spans {
		oldSeq, acc := s.windows.oldSeq[w], s.windows.acc[w]
		sf.windows[w] = gather(
			func(row int) bool { return s.procs.seen[row] >= oldSeq },
			func(row int) []int64 { return acc[row*pipeline.NumCounters : (row+1)*pipeline.NumCounters] })
	}
	sf.lifetime = gather(
		func(row int) bool {
			return s.procs.seen[row] == newest.seq && !s.procs.gone[row] && !s.hosts.down[s.procs.keys[row].host]
		},
		func(row int) []int64 { return s.procs.last[row][:] })

	if withHosts {
		sf.hostNames = append([]string(nil), s.hosts.names...)
		sf.hosts = make([][]sessionHost, nSessions)
		at := make(map[uint64]int, len(s.memBySH))
		on := func(session, host uint32) *sessionHost {
			k := uint64(session)<<32 | uint64(host)
			i, ok := at[k]
			if !ok {
				i = len(sf.hosts[session])
				at[k] = i
				sf.hosts[session] = append(sf.hosts[session], sessionHost{host: host})
			}
			return &sf.hosts[session][i]
		}
		for _, span := range newest.bySession {
			for _, row := range newest.sessionRows(span.session) {
				if !s.procs.gone[row] {
					on(span.session, s.procs.keys[row].host).processes++
				}
			}
		}
		for i := range s.memBySH {
			m := &s.memBySH[i]
			on(m.session, m.host).rss += m.memory[pipeline.MemRSS]
		}
		for _, hs := range sf.hosts {
			slices.SortFunc(hs, func(a, b sessionHost) int { return strings.Compare(sf.hostNames[a.host], sf.hostNames[b.host]) })
		}
	}
	return sf
}

// sessionSkews is the CPU and disk I/O skew of one session's uses.
func sessionSkews(uses []segmentUse) pipeline.SkewPair {
	l := newSkewLoads(len(uses))
	for _, u := range uses {
		l.add(u.At.Segment, u.CPU, u.Read+u.Written)
	}
	return l.skews()
}

// querySkews is the CPU and disk I/O skew of one query's uses.
func querySkews(uses []pipeline.SegmentUse) pipeline.SkewPair {
	l := newSkewLoads(len(uses))
	for _, u := range uses {
		l.add(u.Segment, u.CPU, u.Read+u.Written)
	}
	return l.skews()
}

// skewLoads are the CPU and the disk I/O loads of the segments that took part.
type skewLoads struct{ cpu, io []segmentLoad }

func newSkewLoads(n int) skewLoads {
	return skewLoads{cpu: make([]segmentLoad, 0, n), io: make([]segmentLoad, 0, n)}
}

func (l *skewLoads) add(segment int32, cpu, io int64) {
	if segment < 0 {
		return // the coordinator, or a process without a segment id
	}
	l.cpu = append(l.cpu, segmentLoad{segment, float64(cpu)})
	l.io = append(l.io, segmentLoad{segment, float64(io)})
}

func (l *skewLoads) skews() pipeline.SkewPair {
	return pipeline.SkewPair{CPU: outputSkew(skewOf(l.cpu)), IO: outputSkew(skewOf(l.io))}
}
