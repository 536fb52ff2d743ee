// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"math"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// sessionActivity is what a session resource's gpotel.session.info says
// about the session's current (or last) query.
type sessionActivity struct {
	pid         int64 // gpotel.session.pid: the head process
	running     bool
	queryStart  int64 // unix ns; 0 when NULL
	stateChange int64 // unix ns; 0 when NULL
	text        string
	// spill is the workfiles the session's commands hold now (Greenplum),
	// from the receiver's latest read; nil without one.
	spill []pipeline.Spill
}

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
		act := sessionActivity{pid: h.PID, running: st.Running(), queryStart: unixNano(st.QueryStart),
			stateChange: unixNano(st.StateChange), text: st.Query.V}
		if g := pipeline.DecodeGreenplum(rms.At(i)); g != nil {
			act.spill = g.Spill
		}
		acts[h.Key] = act
	}
	return acts
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
	// ccnt is the head's title command count while it ran; 0 when keyed by
	// start. lastCcnt is the head's count once idle after it (Greenplum's
	// dispatcher hands its executors counts past its own title's); 0 unseen.
	ccnt, lastCcnt int64
	start, end     int64 // unix ns; end is 0 while it runs
	text           string
	totals         pipeline.Counters
	segments       map[hostSegment]*segmentUse
	// partial: its start was before the session was first seen, or a host
	// of its processes did not answer while it ran.
	partial bool
	// spill is its workfiles; nil until a read saw it hold some.
	spill *pipeline.QuerySpill
}

func (q *query) add(st *pipeline.Counters, share float64, hs hostSegment) {
	if q.segments == nil {
		q.segments = map[hostSegment]*segmentUse{}
	}
	u := q.segments[hs]
	if u == nil {
		u = &segmentUse{at: hs}
		q.segments[hs] = u
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

// sessionQueries is one session's timeline of queries.
type sessionQueries struct {
	// since is when the session's activity was first seen: what happened
	// before is unknown and is attributed to no query.
	since   int64
	queries []*query // by start
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

// share hands the steps of (from, to] to the queries that ran in it, by
// how long each ran there; time before since is nobody's to claim.
func (sq *sessionQueries) share(st *pipeline.Counters, from, to int64, hs hostSegment) {
	sq.shareAmong(st, from, to, hs, func(*query) bool { return true })
}

// shareAmong is share over the queries for which eligible holds.
func (sq *sessionQueries) shareAmong(st *pipeline.Counters, from, to int64, hs hostSegment, eligible func(*query) bool) {
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
		lo := max(from, q.start, sq.since)
		hi := to
		if q.end != 0 {
			hi = min(hi, q.end)
		}
		if hi > lo {
			overlaps = append(overlaps, overlap{q, hi - lo})
			total += hi - lo
		}
	}
	for _, o := range overlaps {
		o.q.add(st, float64(o.ns)/float64(total), hs)
	}
}

// rowSighting is what the tracker remembers of a process-table row.
type rowSighting struct {
	key  processKey // whose sighting it is: a reused row is a new process
	at   int64      // time of the last sighting; 0: none
	ccnt int64
}

// queryTracker attributes every process's steps to its session's queries
// (docs/pipeline.md, query figures).
type queryTracker struct {
	keep        int64 // ns an ended query stays: the longest window
	maxFinished int
	sessions    map[pipeline.SessionKey]*sessionQueries
	rows        []rowSighting // by store row
}

func newQueryTracker(keep time.Duration, maxFinished int) *queryTracker {
	return &queryTracker{keep: int64(keep), maxFinished: maxFinished, sessions: map[pipeline.SessionKey]*sessionQueries{}}
}

// restart forgets every timeline: their times belong to a clock that was
// stepped back. Queries seen again are marked partial.
func (t *queryTracker) restart() {
	clear(t.sessions)
	t.rows = t.rows[:0]
}

// queryFigures is one query as written after a snapshot.
type queryFigures struct {
	session pipeline.SessionKey
	query
	segments []segmentUse // by host row, then content id
}

// update takes in the newest committed snapshot of s with the activity of
// its sessions and returns every query to write.
func (t *queryTracker) update(s *store, acts map[pipeline.SessionKey]sessionActivity) []queryFigures {
	newest := s.ring[len(s.ring)-1]
	now := newest.time
	for key, act := range acts {
		t.observe(s, newest, key, act, now)
		if sq := t.sessions[key]; sq != nil {
			sq.holdSpill(act.spill)
		}
	}
	for key, sq := range t.sessions {
		if _, ok := acts[key]; ok {
			continue
		}
		for _, q := range sq.queries {
			if q.end == 0 {
				q.end = now // the session is gone: so is its query
			}
		}
	}
	t.attribute(s, newest, now)
	t.markPartial(s)
	return t.figures(acts, now)
}

// observe updates one session's timeline from its activity.
func (t *queryTracker) observe(s *store, newest *storedSnapshot, key pipeline.SessionKey, act sessionActivity, now int64) {
	sq := t.sessions[key]
	if sq == nil {
		sq = &sessionQueries{since: now}
		t.sessions[key] = sq
	}
	if act.queryStart == 0 {
		return // the session never ran a query
	}
	ccnt := headCommandCount(s, newest, key, act.pid)
	q := sq.find(ccnt, act.queryStart, act.running)
	if q != nil && act.queryStart > q.start {
		// pg_stat_activity is read before the titles: the first sighting of a
		// command count may have carried the previous command's query_start.
		q.start = act.queryStart
	}
	if q == nil {
		q = &query{start: act.queryStart, text: act.text, partial: act.queryStart < sq.since}
		if act.running {
			q.ccnt = ccnt
		}
		sq.queries = append(sq.queries, q)
		slices.SortStableFunc(sq.queries, func(a, b *query) int { return int(sign(a.start - b.start)) })
	}
	if !act.running {
		q.lastCcnt = max(q.lastCcnt, ccnt)
	}
	// A query still open that started before this one ended by its start at the latest.
	for _, o := range sq.queries {
		if o != q && o.end == 0 && o.start <= q.start {
			o.end = q.start
		}
	}
	switch {
	case act.running:
		q.end = 0
	case act.stateChange >= q.start:
		q.end = act.stateChange
	default:
		q.end = now
	}
}

// headCommandCount is the title command count of the session's head
// process (its pid on the coordinator) in the newest snapshot; 0 when none.
func headCommandCount(s *store, newest *storedSnapshot, key pipeline.SessionKey, pid int64) int64 {
	row, ok := s.sessionIndex[key]
	if !ok || pid == 0 {
		return 0
	}
	for _, r := range newest.sessionRows(row) {
		if int64(s.procKeys[r].pid) == pid && s.procSeg[r] == -1 {
			return s.procCcnt[r]
		}
	}
	return 0
}

// attribute shares every process's steps of the newest snapshot among its
// session's queries.
func (t *queryTracker) attribute(s *store, newest *storedSnapshot, now int64) {
	for len(t.rows) < len(s.procKeys) {
		t.rows = append(t.rows, rowSighting{})
	}
	// By store session row: one map lookup per session, not per process.
	timelines := make([]*sessionQueries, len(s.sessionKeys))
	for key, sq := range t.sessions {
		if row, ok := s.sessionIndex[key]; ok {
			timelines[row] = sq
		}
	}
	buf := newest.steps
	for _, row := range newest.rows {
		var st pipeline.Counters
		buf, _ = nextStep(buf, &st)
		clampSteps(&st)
		key := s.procKeys[row]
		rs := &t.rows[row]
		from, prevCcnt := key.creation, int64(0)
		if rs.at != 0 && rs.key == key {
			from, prevCcnt = rs.at, rs.ccnt
		}
		ccnt := s.procCcnt[row]
		*rs = rowSighting{key: key, at: now, ccnt: ccnt}
		// A process that did nothing still takes part: its segment counts as
		// 0 in the query's skew, and its host in the query's partial mark.
		sq := timelines[key.session]
		if sq == nil {
			continue
		}
		hs := hostSegment{key.host, s.procSeg[row]}
		switch {
		case ccnt > 0 && ccnt == prevCcnt:
			// Greenplum bumps the title at every dispatch: the same count at
			// both ends means the process ran only that command in between.
			if q := sq.owner(ccnt); q != nil && q.start < now {
				q.add(&st, 1, hs)
			}
		case ccnt > 0:
			sq.shareAmong(&st, from, now, hs, func(q *query) bool { return q.mayHaveRun(prevCcnt, ccnt) })
		default:
			sq.share(&st, from, now, hs)
		}
	}
}

// markPartial flags the queries running now that have a process on a host
// that did not answer.
func (t *queryTracker) markPartial(s *store) {
	if !slices.Contains(s.hostDown, true) {
		return
	}
	for _, sq := range t.sessions {
		for _, q := range sq.queries {
			if q.end != 0 {
				continue
			}
			for hs := range q.segments {
				if s.hostDown[hs.host] {
					q.partial = true
				}
			}
		}
	}
}

// figures drops what is too old and copies out every query left: the
// running ones and those that ended within the longest window, at most
// maxFinished of the latter (the most recently ended).
func (t *queryTracker) figures(acts map[pipeline.SessionKey]sessionActivity, now int64) []queryFigures {
	var ended []int64
	for key, sq := range t.sessions {
		sq.queries = slices.DeleteFunc(sq.queries, func(q *query) bool { return q.end != 0 && q.end < now-t.keep })
		if _, live := acts[key]; !live && len(sq.queries) == 0 {
			delete(t.sessions, key)
		}
		for _, q := range sq.queries {
			if q.end != 0 {
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
		sq.queries = slices.DeleteFunc(sq.queries, func(q *query) bool { return q.end != 0 && q.end < cutoff })
		for _, q := range sq.queries {
			f := queryFigures{session: key, query: *q}
			f.query.segments = nil
			for _, u := range q.segments {
				f.segments = append(f.segments, *u)
			}
			slices.SortFunc(f.segments, func(a, b segmentUse) int {
				if a.at.host != b.at.host {
					return int(sign(int64(a.at.host) - int64(b.at.host)))
				}
				return int(sign(int64(a.at.segment) - int64(b.at.segment)))
			})
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
