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
	segments   map[hostSegment]*segmentUse
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
func (q *query) add(st *pipeline.Counters, share float64, ranNs int64, known uint32, hs hostSegment) {
	if q.segments == nil {
		q.segments = map[hostSegment]*segmentUse{}
	}
	u := q.segments[hs]
	if u == nil {
		u = &segmentUse{at: hs}
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
	u.cpu += part(st[pipeline.CPUUser] + st[pipeline.CPUSystem])
	u.read += part(st[pipeline.DiskRead])
	u.written += part(st[pipeline.DiskWrite])
}

// sessionQueries is one session's timeline of queries, and what its
// event will say once it ends (settle.go).
type sessionQueries struct {
	// since is when the session's activity was first seen: what happened
	// before is unknown and is attributed to no query.
	since   int64
	queries []*query // by start
	headPID int64    // gpotel.session.pid: the coordinator backend
	// forgotten is the latest start of a query dropped after its event:
	// pg_stat_activity may name it for long after, and it is not new.
	forgotten int64
	life      sessionLife
	says      serverSays // the log records and the exit of its coordinator backend
}

// find returns the query a head sighting names: while it runs, the one with
// its title's command count when there is one; otherwise (no count, or idle
// with a count past the statement's own) the one with its start.
func (sq *sessionQueries) find(ccnt, start int64, running bool) *query {
	for _, q := range sq.queries {
		if running && ccnt > 0 {
			if q.ccnt == ccnt {
				return q
			}
		} else if q.start == start {
			return q
		}
	}
	if running && ccnt > 0 {
		return nil
	}
	// A statement first seen with its predecessor's query_start and seen
	// again only with its own (idle, or running without a title count).
	for _, q := range slices.Backward(sq.queries) {
		if q.startStale && q.start < start {
			return q
		}
	}
	return nil
}

// owner returns the query a process whose title shows command count c
// worked for. Greenplum's dispatcher numbers a statement in its title and
// hands the statement's executors counts from there up to, not including,
// the next statement's title count: it is the last query seen with a title
// count at most c, unless that one is known to have ended at a smaller
// count. nil: its statement was never seen.
func (sq *sessionQueries) owner(c int64) *query {
	var last *query
	for _, q := range sq.queries { // by start, so by command count
		if q.ccnt > c {
			break
		}
		if q.lastCcnt != 0 && q.lastCcnt < c {
			last = nil
			continue
		}
		last = q
	}
	return last
}

// holdSpill sets what each query holds now from the session's workfile
// rows, each the owner's of its command count (an executor's count is
// past its statement's title count), and keeps the most each held.
func (sq *sessionQueries) holdSpill(rows []pipeline.Spill) {
	for _, q := range sq.queries {
		if q.spill != nil {
			q.spill.Bytes, q.spill.Files = 0, 0
		}
	}
	for _, r := range rows {
		q := sq.owner(r.CommandCount)
		if q == nil {
			continue
		}
		if q.spill == nil {
			q.spill = &pipeline.QuerySpill{}
		}
		q.spill.Bytes += r.Bytes
		q.spill.Files += r.Files
	}
	for _, q := range sq.queries {
		if sp := q.spill; sp != nil {
			sp.MaxBytes, sp.MaxFiles = max(sp.MaxBytes, sp.Bytes), max(sp.MaxFiles, sp.Files)
		}
	}
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

// share hands the steps of (from, to] to the queries that ran in it, by
// how long each ran there; time before since is nobody's to claim.
func (sq *sessionQueries) share(st *pipeline.Counters, from, to int64, known uint32, hs hostSegment) {
	sq.shareAmong(st, from, to, known, hs, func(*query) bool { return true })
}

// shareAmong is share over the queries for which eligible holds.
func (sq *sessionQueries) shareAmong(st *pipeline.Counters, from, to int64, known uint32, hs hostSegment, eligible func(*query) bool) {
	if to <= from {
		return
	}
	total := max(0, min(to, sq.since)-from)
	type overlap struct {
		q  *query
		ns int64
	}
	var parts [4]overlap
	overlaps := parts[:0]
	for _, q := range sq.queries {
		if !eligible(q) {
			continue
		}
		if ns := q.ran(from, to, sq.since); ns > 0 {
			overlaps = append(overlaps, overlap{q, ns})
			total += ns
		}
	}
	for _, o := range overlaps {
		o.q.add(st, float64(o.ns)/float64(total), o.ns, known, hs)
	}
}

// foldEndingsOf merges into q each query keyed by a title read after
// pg_stat_activity still showed q active, whose own start no sighting
// showed: Greenplum's idle title after a planned statement counts one past
// its running one, so such a query is q seen ending, not a new statement.
// idleCcnt is the count of the idle title q is now seen under; 0 when the
// session left, which ends every such query as q's.
func (sq *sessionQueries) foldEndingsOf(q *query, idleCcnt int64) {
	sq.queries = slices.DeleteFunc(sq.queries, func(p *query) bool {
		if p == q || !p.startStale || p.start != q.start || p.finished || idleCcnt != 0 && p.ccnt != idleCcnt {
			return false
		}
		q.fold(p)
		sq.life.queries--
		return true
	})
}

// leave marks the session gone at now (snapshot seq), its running queries
// ended with it.
func (sq *sessionQueries) leave(seq uint64, now int64) {
	for _, q := range slices.Clone(sq.queries) {
		if !q.startStale && slices.Contains(sq.queries, q) {
			sq.foldEndingsOf(q, 0)
		}
	}
	sq.life.leave(sq.queries, seq, now)
}

// fold adds what was attributed to p, which was q all along.
func (q *query) fold(p *query) {
	for c, v := range p.totals {
		q.totals[c] += v
	}
	for hs, u := range p.segments {
		if q.segments == nil {
			q.segments = map[hostSegment]*segmentUse{}
		}
		if mine := q.segments[hs]; mine != nil {
			mine.cpu, mine.read, mine.written = mine.cpu+u.cpu, mine.read+u.read, mine.written+u.written
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

// forget tells whether to drop q: its event is past and old is true.
func (sq *sessionQueries) forget(q *query, old bool) bool {
	if !q.finished || !old {
		return false
	}
	sq.forgotten = max(sq.forgotten, q.start)
	return true
}

// headCommandCount is the title command count of the session's head

// hostSegment is one segment instance: its host row and content id.
type hostSegment struct {
	host    uint32
	segment int32
}

// segmentUse is what a query's processes on one segment instance used: CPU
// in ns, disk bytes.
type segmentUse struct {
	at                 hostSegment
	cpu, read, written int64
}

// sortedSegments lists a query's segment use by host row, then content id,
// in buf's room.
func sortedSegments(buf []segmentUse, m map[hostSegment]*segmentUse) []segmentUse {
	out := buf[:0]
	for _, u := range m {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b segmentUse) int {
		return cmp.Or(cmp.Compare(a.at.host, b.at.host), cmp.Compare(a.at.segment, b.at.segment))
	})
	return out
}

// onSilentHost tells a query with a process on a host that did not answer
// in the newest snapshot.
func (q *query) onSilentHost(hosts *Hosts) bool {
	for hs := range q.segments {
		if hosts.Down[hs.host] {
			return true
		}
	}
	return false
}

// markSilentHosts marks q partial for each host of its processes that did
// not answer in the newest snapshot.
func (q *query) markSilentHosts(hosts *Hosts) {
	for hs := range q.segments {
		if hosts.Down[hs.host] {
			q.partial.hostSilent(hs.host, hosts.DownSince[hs.host])
		}
	}
}
