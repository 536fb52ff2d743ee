// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package querylife

import (
	"cmp"
	"math"
	"slices"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// query is one command of a session and what was attributed to it.
type query struct {
	// ccnt is the head's title command count while it ran, or in its idle
	// title right after it when no snapshot saw it run; 0 when keyed by
	// start (a server that numbers none). lastCcnt is the head's count once idle after it (Greenplum's
	// dispatcher hands its executors counts past its own title's); 0 unseen.
	ccnt, lastCcnt int64
	start, end     int64 // unix ns; end is 0 while it runs
	// startStale: start is the previous statement's query_start, read
	// before the title that showed this statement's count; its own start
	// is the first later query_start seen.
	startStale bool
	text       string
	totals     pipeline.Counters
	segments   map[HostSegment]*SegmentUse
	// known are the counters some process of it reported (bit per Figure).
	known uint32
	// partial: its start was before the session was first seen, or a host
	// of its processes did not answer while it ran.
	partial partialMark
	// spill is its workfiles; nil until a read saw it hold some.
	spill *pipeline.QuerySpill
	// seen is what the snapshots saw of its end; stillRunning while it runs.
	seen endSighting
	// endSeen is the sequence number of the snapshot that first saw it
	// ended; 0 while it runs.
	endSeen uint64
	// finished: its event was written, or it ended before its session was
	// first seen and gets none.
	finished    bool
	lockWait    int64 // ns it was seen waiting for a lock
	lockBlocker int64 // the last session seen holding that lock
	vmemPeak    int64 // the largest vmem account of its session while it ran
}

// add hands q the share of one process's step st that falls to it, the
// process having worked for it ranNs of the step's interval. A process
// runs on one CPU at a time (PostgreSQL backends are single-threaded), so
// q gets at most ranNs of CPU from it: when the share would give more (the
// step holds work of a statement no snapshot saw), the whole share is
// scaled down to fit, and the rest belongs to no query.
func (q *query) add(st *pipeline.Counters, share float64, ranNs int64, known uint32, hs HostSegment) {
	if q.segments == nil {
		q.segments = map[HostSegment]*SegmentUse{}
	}
	u := q.segments[hs]
	if u == nil {
		u = &SegmentUse{At: hs}
		q.segments[hs] = u
	}
	q.known |= known
	if cpu := float64(st[pipeline.CPUUser]+st[pipeline.CPUSystem]) * share; cpu > float64(ranNs) {
		share *= float64(ranNs) / cpu
	}
	part := func(v int64) int64 { return int64(math.Round(float64(v) * share)) }
	for c, v := range st {
		if v != 0 {
			q.totals[c] += part(v)
		}
	}
	u.CPU += part(st[pipeline.CPUUser] + st[pipeline.CPUSystem])
	u.Read += part(st[pipeline.DiskRead])
	u.Written += part(st[pipeline.DiskWrite])
}

// mayHaveRun tells whether a process whose title counts went from lo to hi
// can have worked for q.
func (q *query) mayHaveRun(lo, hi int64) bool {
	return q.ccnt <= hi && (q.lastCcnt == 0 || q.lastCcnt >= lo)
}

// ran is how long q ran inside (from, to] after since.
func (q *query) ran(from, to, since int64) int64 {
	lo, hi := max(from, q.start, since), to
	if q.end != 0 {
		hi = min(hi, q.end)
	}
	return max(hi-lo, 0)
}

// fold adds what was attributed to p, which was q all along.
func (q *query) fold(p *query) {
	for c, v := range p.totals {
		q.totals[c] += v
	}
	for hs, u := range p.segments {
		if q.segments == nil {
			q.segments = map[HostSegment]*SegmentUse{}
		}
		if mine := q.segments[hs]; mine != nil {
			mine.CPU, mine.Read, mine.Written = mine.CPU+u.CPU, mine.Read+u.Read, mine.Written+u.Written
		} else {
			q.segments[hs] = u
		}
	}
	q.known |= p.known
	q.lastCcnt = max(q.lastCcnt, p.ccnt, p.lastCcnt)
	q.lockWait += p.lockWait
	q.lockBlocker = cmp.Or(p.lockBlocker, q.lockBlocker)
	q.vmemPeak = max(q.vmemPeak, p.vmemPeak)
	if p.spill != nil {
		if q.spill == nil {
			q.spill = &pipeline.QuerySpill{}
		}
		q.spill.MaxBytes, q.spill.MaxFiles = max(q.spill.MaxBytes, p.spill.MaxBytes), max(q.spill.MaxFiles, p.spill.MaxFiles)
		q.spill.Bytes, q.spill.Files = q.spill.Bytes+p.spill.Bytes, q.spill.Files+p.spill.Files
	}
	for _, h := range p.partial.hosts {
		q.partial.hostSilent(h, p.partial.silentSince)
	}
}

// endAt ends q at end, how it ended, first seen in snapshot seq; a query
// already ended keeps the end it was first seen with.
func (q *query) endAt(end int64, seen endSighting, seq uint64) {
	if q.end != 0 {
		return
	}
	q.end, q.seen, q.endSeen = end, seen, seq
}

// endSighting is what the snapshots saw of a query's end.
type endSighting uint8

const (
	stillRunning endSighting = iota
	seenIdle                 // its session idle after it: state_change is its end
	seenAborted              // idle in an aborted transaction after it
	sessionLeft              // its session was gone while it ran
	superseded               // the next statement had started before a snapshot saw it end
)

// headCommandCount is the title command count of the session's head

// HostSegment is one segment instance: its host row and content id.
type HostSegment struct {
	Host    uint32
	Segment int32
}

// SegmentUse is what a query's processes on one segment instance used: CPU
// in ns, disk bytes.
type SegmentUse struct {
	At                 HostSegment
	CPU, Read, Written int64
}

// sortedSegments lists a query's segment use by host row, then content id,
// in buf's room.
func sortedSegments(buf []SegmentUse, m map[HostSegment]*SegmentUse) []SegmentUse {
	out := buf[:0]
	for _, u := range m {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b SegmentUse) int {
		return cmp.Or(cmp.Compare(a.At.Host, b.At.Host), cmp.Compare(a.At.Segment, b.At.Segment))
	})
	return out
}

// onSilentHost tells a query with a process on a host that did not answer
// in the newest snapshot.
func (q *query) onSilentHost(hosts *Hosts) bool {
	for hs := range q.segments {
		if hosts.Down[hs.Host] {
			return true
		}
	}
	return false
}

// markSilentHosts marks q partial for each host of its processes that did
// not answer in the newest snapshot.
func (q *query) markSilentHosts(hosts *Hosts) {
	for hs := range q.segments {
		if hosts.Down[hs.Host] {
			q.partial.hostSilent(hs.Host, hosts.DownSince[hs.Host])
		}
	}
}
