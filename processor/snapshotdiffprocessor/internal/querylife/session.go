// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package querylife

import (
	"cmp"
	"slices"
	"time"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

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
func (sq *sessionQueries) holdSpill(rows []snapshot.Spill) {
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

// share hands the steps of (from, to] to the queries that ran in it, by
// how long each ran there; time before since is nobody's to claim.
func (sq *sessionQueries) share(st *pipeline.Counters, from, to int64, known uint32, hs HostSegment) {
	sq.shareAmong(st, from, to, known, hs, func(*query) bool { return true })
}

// shareAmong is share over the queries for which eligible holds.
func (sq *sessionQueries) shareAmong(st *pipeline.Counters, from, to int64, known uint32, hs HostSegment, eligible func(*query) bool) {
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

// forget tells whether to drop q: its event is past and old is true.
func (sq *sessionQueries) forget(q *query, old bool) bool {
	if !q.finished || !old {
		return false
	}
	sq.forgotten = max(sq.forgotten, q.start)
	return true
}

// addSessionStep adds one process's step to the session's totals.
func (sq *sessionQueries) addSessionStep(st *pipeline.Counters, known uint32, host uint32) {
	l := &sq.life
	for c, v := range st {
		l.totals[c] += v
	}
	l.known |= known
	if l.hosts == nil {
		l.hosts = map[uint32]bool{}
	}
	l.hosts[host] = true
}

// sessionLife is what a session's event says: who, from when to when,
// and its totals over every process it had, exited ones included.
type sessionLife struct {
	start        int64 // backend_start; the first snapshot that saw it without one
	backendStart int64 // 0: the server reported none
	who          events.SessionWho
	system       bool // not a client session: no event
	own          bool // the collector's own connection: no event, none of its queries either
	lastSeen     int64
	queries      int64
	totals       pipeline.Counters
	known        uint32
	hosts        map[uint32]bool // hosts its processes ran on
	partial      partialMark
	memoryPeak   int64
	spillMax     int64
	lockWait     int64
	vmemPeak     int64
	gone         int64  // the first snapshot without it; 0 while it lives
	goneSeen     uint64 // that snapshot's sequence number
	ended        bool   // its event was written, or none is due
}

// begin starts the life of a session first seen at now; one that started
// before gpotel watched (watchedFrom), or of unknown start seen in the
// timeline's first snapshot, is partial.
func (l *sessionLife) begin(act *Activity, now, watchedFrom int64, firstSnapshot bool) {
	l.backendStart = act.BackendStart
	l.start = cmp.Or(act.BackendStart, now)
	if l.start < watchedFrom || (act.BackendStart == 0 && firstSnapshot) {
		l.partial.startBefore(now)
	}
}

// reusedBy tells an activity of another session under the same key: its
// backend started at another time.
func (l *sessionLife) reusedBy(act *Activity) bool {
	return l.backendStart != 0 && act.BackendStart != 0 && act.BackendStart != l.backendStart
}

// see takes in what the newest snapshot says of whose session it is.
func (l *sessionLife) see(act *Activity) {
	l.who, l.system = act.Who, act.System
	l.own = l.own || act.Own
	l.vmemPeak = max(l.vmemPeak, act.Vmem)
}

// leave marks the session gone at now (snapshot seq), and its running
// query ended with it.
func (l *sessionLife) leave(queries []*query, seq uint64, now int64) {
	if l.gone == 0 {
		l.gone, l.goneSeen = now, seq
	}
	for _, q := range queries {
		q.endAt(now, sessionLeft, seq)
	}
}

// holdSpill keeps the most workfile bytes its queries held at once.
func (l *sessionLife) holdSpill(queries []*query) {
	var held int64
	for _, q := range queries {
		if q.spill != nil {
			held += q.spill.Bytes
		}
	}
	l.spillMax = max(l.spillMax, held)
}

// couldHaveSaid tells an ending that can be of this session: an exit of
// its coordinator backend; a log record whose session start, where it
// names one, is the backend's (to the second, as the log writes it).
func (l *sessionLife) couldHaveSaid(e *snapshot.Ending, headPID int64) bool {
	if e.Exited {
		return headPID != 0 && e.PID == headPID
	}
	if e.SessionStart != 0 && l.backendStart != 0 && e.SessionStart/int64(time.Second) != l.backendStart/int64(time.Second) {
		return false
	}
	return true
}

// serverSays is what the server told of one session: its log records,
// oldest first, and its coordinator backend's exit.
type serverSays struct {
	logged []snapshot.Ending
	exit   *snapshot.Ending
}

// maxLogged bounds the log records kept per session: a statement that
// fails ends there, so the last few are all a query or the session needs.
const maxLogged = 16

// retiredSession is a session whose key another one took before its event
// was written.
type retiredSession struct {
	key pipeline.SessionKey
	sq  *sessionQueries
}
