// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"cmp"
	"math"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// sessionActivity is what a session resource's gpotel.session.info says
// about the session's current (or last) query.
type sessionActivity struct {
	pid          int64 // gpotel.session.pid: the head process
	system       bool  // not a client session: it gets no session event
	own          bool  // the collector's own connection: no event of it or its queries
	running      bool
	aborted      bool  // idle in an aborted transaction
	waiting      bool  // waiting for a lock
	queryStart   int64 // unix ns; 0 when NULL
	stateChange  int64 // unix ns; 0 when NULL
	backendStart int64 // unix ns; 0 when NULL
	text         string
	who          pipeline.SessionWho
	// spill is the workfiles the session's commands hold now (Greenplum),
	// from the receiver's latest read; nil without one.
	spill []pipeline.Spill
	// blocker is the session holding the lock it waits for; 0: none known.
	blocker int64
	// vmem is Greenplum's vmem account of the session over every segment; 0: none.
	vmem int64
}

// stateIdleAborted is pg_stat_activity's state after a failed or
// cancelled statement inside a transaction.
const stateIdleAborted = "idle in transaction (aborted)"

// readActivities reads every session resource of a closing batch; one
// without its identity or its gpotel.session.info has no activity.
func readActivities(rms pmetric.ResourceMetricsSlice, kinds []pipeline.ResourceKind) map[pipeline.SessionKey]sessionActivity {
	acts := map[pipeline.SessionKey]sessionActivity{}
	for i, kind := range kinds {
		if kind != pipeline.KindSession {
			continue
		}
		h, st, _, hasInfo, ok := pipeline.DecodeSession(rms.At(i))
		if !ok || !hasInfo {
			continue
		}
		act := sessionActivity{pid: h.PID, system: h.System, own: h.Own, running: st.Running(), aborted: st.State.V == stateIdleAborted,
			waiting: waitsForLock(&st), queryStart: unixNano(st.QueryStart), stateChange: unixNano(st.StateChange),
			backendStart: unixNano(st.BackendStart), text: st.Query.V,
			who: pipeline.SessionWho{Database: h.Database, User: h.User, Application: st.ApplicationName,
				ClientAddress: st.ClientAddr, ClientPort: st.ClientPort, ResourceGroup: st.RsgName}}
		if g := pipeline.DecodeGreenplum(rms.At(i)); g != nil {
			act.spill = g.Spill
			if g.Wait != nil {
				act.waiting, act.blocker = true, g.Wait.Blocker
			}
			for _, m := range g.Memory {
				act.vmem += m.Bytes
			}
		}
		acts[h.Key] = act
	}
	return acts
}

// waitsForLock tells a session pg_stat_activity shows waiting for a lock:
// waiting for a lock (Greenplum 6: waiting, waiting_reason 'lock') or a
// Lock wait event (PostgreSQL 9.6 on, Greenplum 7).
func waitsForLock(st *pipeline.SessionState) bool {
	if st.Waiting.V {
		return !st.WaitingReason.Valid || st.WaitingReason.V == "lock"
	}
	return st.WaitEventType.V == "Lock"
}

// unixNano is a time as unix ns; 0 when NULL.
func unixNano(t pipeline.Null[time.Time]) int64 {
	if !t.Valid {
		return 0
	}
	return t.V.UnixNano()
}

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
// event will say once it ends (finished.go).
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

// rowSighting is what the tracker remembers of a process-table row.
type rowSighting struct {
	key  processKey // whose sighting it is: a reused row is a new process
	at   int64      // when it was last read (the snapshot time plus its host's read delay); 0: never
	ccnt int64
}

// queryTracker attributes every process's steps to its session's queries
// (docs/pipeline.md, query figures).
type queryTracker struct {
	keep        int64 // ns an ended query stays: the longest window
	maxFinished int
	sessions    map[pipeline.SessionKey]*sessionQueries
	// retired are sessions whose key a new session took (a reused pid on
	// PostgreSQL) while their event was still due.
	retired []retiredSession
	rows    []rowSighting // by store row
	// first is the time of the first snapshot of this timeline.
	first int64
	// opened is when the collector started (unix ns), 0 after a clock
	// step: what began after it was seen from its start.
	opened int64
	// text is a query's text as its event carries it; nil: none (queries::text off).
	text func(string) *string
	// logReadThrough: the coordinator's log records written before it have
	// been heard (unix ns); 0: no log is read.
	logReadThrough int64
	// exitsHeard: exit records come (an exit was heard), so a session that
	// left without its head's exit waits for it.
	exitsHeard bool
}

func newQueryTracker(keep time.Duration, maxFinished int, text func(string) *string) *queryTracker {
	return &queryTracker{keep: int64(keep), maxFinished: maxFinished, sessions: map[pipeline.SessionKey]*sessionQueries{}, text: text}
}

// restart forgets every timeline: their times belong to a clock that was
// stepped back. Queries seen again are marked partial; what was due an
// event and had not settled gets none (its figures span two clocks).
func (t *queryTracker) restart() {
	clear(t.sessions)
	t.retired = nil
	t.logReadThrough = 0
	t.rows = t.rows[:0]
	t.first, t.opened = 0, 0
}

// watchedFrom is when gpotel began to watch this timeline: the collector's
// start, or the timeline's first snapshot when that came first (after a
// clock step). What started before is partial.
func (t *queryTracker) watchedFrom() int64 {
	if t.opened != 0 && t.opened < t.first {
		return t.opened
	}
	return t.first
}

// queryFigures is one query as written after a snapshot.
type queryFigures struct {
	session pipeline.SessionKey
	query
	segments []segmentUse // by host row, then content id
}

// trackedWork is what the tracker writes after a snapshot: every query to
// write figures of, and the events of the queries and sessions that
// finished (finished.go).
type trackedWork struct {
	queries  []queryFigures
	finished []pipeline.FinishedQuery
	ended    []pipeline.EndedSession
	// ignoredEndings counts the log records and exits of no session
	// followed, or of another backend than the session's.
	ignoredEndings int
}

func endingsIn(hs []hostEndings) (n int) {
	for _, h := range hs {
		n += len(h.Endings)
	}
	return n
}

// update takes in the newest committed snapshot of s with the activity of
// its sessions and returns every query to write, and what finished.
func (t *queryTracker) update(s *store, acts map[pipeline.SessionKey]sessionActivity, endings []hostEndings) trackedWork {
	newest := s.windows.retained[len(s.windows.retained)-1]
	now := newest.time
	if t.first == 0 {
		t.first = now
	}
	// prev is the previous snapshot's time; in the timeline's first, the
	// collector's start: what began after it is seen from its start.
	var prev int64
	switch {
	case t.first != now && len(s.windows.retained) > 1:
		prev = s.windows.retained[len(s.windows.retained)-2].time
	case t.first == now && t.opened < now:
		prev = t.opened
	}
	// The endings go to the sessions followed so far, under their keys
	// before this snapshot may give a key to another session.
	unplaced, ignored := t.hear(endings)
	for key, act := range acts {
		t.observe(s, newest, key, &act, now, prev)
		if sq := t.sessions[key]; sq != nil {
			sq.holdSpill(act.spill)
			sq.life.holdSpill(sq.queries)
		}
	}
	unplaced, late := t.hear(unplaced)
	ignored += late + endingsIn(unplaced)
	for key, sq := range t.sessions {
		if _, ok := acts[key]; !ok {
			sq.leave(newest.seq, now) // the session is gone: so is its query
		}
	}
	t.attribute(s, newest, now)
	t.markPartial(s)
	t.noteMemory(s)
	out := trackedWork{ignoredEndings: ignored}
	t.settle(s, newest.seq, now, &out)
	out.queries = t.figures(acts, now)
	return out
}

// observe updates one session's timeline from its activity; prev is the
// previous snapshot's time, 0 in the timeline's first.
func (t *queryTracker) observe(s *store, newest *storedSnapshot, key pipeline.SessionKey, act *sessionActivity, now, prev int64) {
	sq := t.sessions[key]
	if sq != nil && sq.life.reusedBy(act) {
		// The key names another session now (PostgreSQL's session id is the
		// leader's pid): the former one ended by this snapshot.
		t.retire(sq, newest.seq, now)
		sq = nil
	}
	if sq == nil {
		// A session first seen after the first snapshot was in none before,
		// so it began after the previous one read pg_stat_activity (its
		// backend_start may lie a moment before that snapshot's time): it
		// was seen from its start. Of any other, what came before now is
		// unknown.
		sq = &sessionQueries{since: now}
		if prev != 0 && act.backendStart >= t.watchedFrom() && act.backendStart < now {
			sq.since = act.backendStart
		}
		sq.life.begin(act, now, t.watchedFrom(), now == t.first)
		t.sessions[key] = sq
	}
	sq.life.see(act)
	sq.headPID = act.pid
	prevSeen := sq.life.lastSeen
	sq.life.lastSeen = now
	if act.queryStart == 0 || act.queryStart <= sq.forgotten {
		return // the session never ran a query, or its query's event is past
	}
	ccnt := headCommandCount(s, newest, key, act.pid)
	q := sq.find(ccnt, act.queryStart, act.running)
	if q != nil && act.queryStart > q.start {
		// pg_stat_activity is read before the titles: the first sighting of a
		// command count may have carried the previous command's query_start.
		q.start, q.startStale = act.queryStart, false
	}
	if q == nil {
		q = &query{start: act.queryStart, text: act.text}
		if act.queryStart < sq.since {
			q.partial.startBefore(sq.since)
		}
		if act.running {
			q.ccnt = ccnt
			q.startStale = slices.ContainsFunc(sq.queries, func(o *query) bool { return o.start == q.start })
		}
		sq.queries = append(sq.queries, q)
		sq.life.queries++
		slices.SortStableFunc(sq.queries, func(a, b *query) int { return int(sign(a.start - b.start)) })
	}
	if !act.running {
		sq.foldEndingsOf(q, ccnt)
		q.lastCcnt = max(q.lastCcnt, ccnt)
		// A statement no snapshot saw running is numbered by the idle title
		// right after it: the coordinator keeps its last command's count.
		if q.ccnt == 0 {
			q.ccnt = ccnt
		}
	}
	// A query still open that started before this one ended by its start at
	// the latest. One with the same start is the statement whose query_start
	// this one's first sighting carried: it ends at this one's own start,
	// known at a later sighting.
	for _, o := range sq.queries {
		if o != q && o.end == 0 && o.start < q.start {
			o.endAt(q.start, superseded, newest.seq)
		}
	}
	switch {
	case act.running:
		q.end, q.seen, q.endSeen = 0, stillRunning, 0
		if act.waiting && prevSeen != 0 {
			// Seen waiting now: count the interval since the previous sighting.
			waited := q.ran(prevSeen, now, sq.since)
			q.lockWait += waited
			sq.life.lockWait += waited
			q.lockBlocker = cmp.Or(act.blocker, q.lockBlocker)
		}
		q.vmemPeak = max(q.vmemPeak, act.vmem)
	default:
		end, seen := act.stateChange, seenIdle
		if end < q.start {
			end = now
		}
		if act.aborted {
			seen = seenAborted
		}
		q.endAt(end, seen, newest.seq)
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
// process (its pid on the coordinator) in the newest snapshot; 0 when none.
func headCommandCount(s *store, newest *storedSnapshot, key pipeline.SessionKey, pid int64) int64 {
	row, ok := s.sessions.index[key]
	if !ok || pid == 0 {
		return 0
	}
	for _, r := range newest.sessionRows(row) {
		if int64(s.procs.keys[r].pid) == pid && s.procs.seg[r] == -1 {
			return s.procs.ccnt[r]
		}
	}
	return 0
}

// attribute shares every process's steps of the newest snapshot among its
// session's queries.
func (t *queryTracker) attribute(s *store, newest *storedSnapshot, now int64) {
	for len(t.rows) < len(s.procs.keys) {
		t.rows = append(t.rows, rowSighting{})
	}
	// By store session row: one map lookup per session, not per process.
	timelines := make([]*sessionQueries, len(s.sessions.keys))
	for key, sq := range t.sessions {
		if row, ok := s.sessions.index[key]; ok {
			timelines[row] = sq
		}
	}
	buf := newest.steps
	for _, row := range newest.rows {
		var st pipeline.Counters
		buf, _ = nextStep(buf, &st)
		clampSteps(&st)
		key := s.procs.keys[row]
		rs := &t.rows[row]
		from, prevCcnt := key.creation, int64(0)
		if rs.at != 0 && rs.key == key {
			from, prevCcnt = rs.at, rs.ccnt
		}
		// The step runs to when the process was read: after the snapshot
		// time by its host's read delay (an exit record's totals were
		// final before the scrape).
		readAt := now
		if !s.procs.gone[row] {
			readAt += s.hosts.readDelay[key.host]
		}
		ccnt := s.procs.ccnt[row]
		*rs = rowSighting{key: key, at: readAt, ccnt: ccnt}
		// A process that did nothing still takes part: its segment counts as
		// 0 in the query's skew, and its host in the query's partial mark.
		sq := timelines[key.session]
		if sq == nil {
			continue
		}
		hs := hostSegment{key.host, s.procs.seg[row]}
		known := s.procs.known[row]
		sq.addSessionStep(&st, known, key.host)
		switch {
		case ccnt > 0 && ccnt == prevCcnt:
			// Greenplum bumps the title at every dispatch: the same count at
			// both ends means the process ran only that command in between
			// (an executor may finish its slice after the dispatcher moved
			// on). The head's idle title keeps its last statement's count:
			// it worked for that statement only while the statement ran.
			q := sq.owner(ccnt)
			if q == nil || q.start >= readAt {
				break
			}
			if hs.segment == -1 && int64(key.pid) == sq.headPID {
				if ns := q.ran(from, readAt, sq.since); ns > 0 {
					q.add(&st, 1, ns, known, hs)
				}
				break
			}
			q.add(&st, 1, readAt-max(from, q.start), known, hs)
		case ccnt > 0:
			sq.shareAmong(&st, from, readAt, known, hs, func(q *query) bool { return q.mayHaveRun(prevCcnt, ccnt) })
		default:
			sq.share(&st, from, readAt, known, hs)
		}
	}
}

// markPartial flags the queries running now that have a process on a host
// that did not answer.
func (t *queryTracker) markPartial(s *store) {
	if !slices.Contains(s.hosts.down, true) {
		return
	}
	for _, sq := range t.sessions {
		for _, q := range sq.queries {
			if q.end != 0 {
				continue
			}
			q.markSilentHosts(s)
		}
	}
}

// figures drops what is too old and copies out every query left: the
// running ones and those that ended within the longest window, at most
// maxFinished of the latter (the most recently ended).
//
// A query whose event is still due stays whatever its age or number (settle
// bounds how long that is).
func (t *queryTracker) figures(acts map[pipeline.SessionKey]sessionActivity, now int64) []queryFigures {
	var ended []int64
	for key, sq := range t.sessions {
		sq.queries = slices.DeleteFunc(sq.queries, func(q *query) bool { return sq.forget(q, q.end < now-t.keep) })
		if _, live := acts[key]; !live && len(sq.queries) == 0 && sq.life.ended {
			delete(t.sessions, key)
		}
		for _, q := range sq.queries {
			if q.finished {
				ended = append(ended, q.end)
			}
		}
	}
	cutoff := int64(math.MinInt64)
	if len(ended) > t.maxFinished {
		slices.Sort(ended)
		cutoff = ended[len(ended)-t.maxFinished]
	}
	var out []queryFigures
	for key, sq := range t.sessions {
		sq.queries = slices.DeleteFunc(sq.queries, func(q *query) bool { return sq.forget(q, q.end < cutoff) })
		for _, q := range sq.queries {
			f := queryFigures{session: key, query: *q, segments: sortedSegments(q.segments)}
			f.query.segments = nil
			out = append(out, f)
		}
	}
	// Deterministic output: by session, then start.
	slices.SortFunc(out, func(a, b queryFigures) int {
		switch {
		case a.session != b.session:
			return a.session.Compare(b.session)
		}
		return int(sign(a.start - b.start))
	})
	return out
}

func sign(v int64) int64 {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}
