// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package querylife

import (
	"cmp"
	"math"
	"slices"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// Update takes in the newest committed snapshot with the activity of its
// sessions and returns every query to write, and what finished.
func (t *Tracker) Update(in *Snapshot) Work {
	now := in.Time
	if t.first == 0 {
		t.first = now
	}
	// prev is the previous snapshot's time; in the timeline's first, the
	// collector's start: what began after it is seen from its start.
	var prev int64
	switch {
	case t.first != now && in.Prev != 0:
		prev = in.Prev
	case t.first == now && t.opened < now:
		prev = t.opened
	}
	// The endings go to the sessions followed so far, under their keys
	// before this snapshot may give a key to another session.
	unplaced, ignored := t.hear(in.Endings)
	for key, act := range in.Activities {
		t.observe(in, key, &act, prev)
		if sq := t.sessions[key]; sq != nil {
			sq.holdSpill(act.Spill)
			sq.life.holdSpill(sq.queries)
		}
	}
	unplaced, late := t.hear(unplaced)
	ignored += late + endingsIn(unplaced)
	for key, sq := range t.sessions {
		if _, ok := in.Activities[key]; !ok {
			sq.leave(in.Seq, now) // the session is gone: so is its query
		}
	}
	t.attribute(in.Processes)
	t.markPartial(&in.Hosts)
	t.noteMemory(in.Processes)
	out := Work{IgnoredEndings: ignored}
	t.settle(&in.Hosts, in.Seq, now, &out)
	out.Queries = t.figures(in.Activities, &in.Hosts, now)
	return out
}

func endingsIn(hs []HostEndings) (n int) {
	for _, h := range hs {
		n += len(h.Endings)
	}
	return n
}

// hear takes in the endings of a closing batch: each log record and exit
// goes to its session (a record of another backend under the same
// PostgreSQL session id, or an exit of another process, is ignored and
// counted); the log's read-through time moves on. An ending of a session
// not followed yet is returned unplaced: the same batch's snapshot may be
// the first to see it (a session that lived across one snapshot exits
// before that snapshot's batch closes), so update hears it again once the
// snapshot is observed.
func (t *Tracker) hear(endings []HostEndings) (unplaced []HostEndings, ignored int) {
	for _, h := range endings {
		if h.LogReadThrough != 0 {
			t.logReadThrough = max(t.logReadThrough, h.LogReadThrough)
		}
		var later []snapshot.Ending
		for i := range h.Endings {
			e := h.Endings[i]
			t.exitsHeard = t.exitsHeard || e.Exited
			sq := t.sessions[pipeline.SessionKey{TmID: h.TmID, ID: e.Session}]
			switch {
			case sq == nil:
				later = append(later, e)
			case !sq.life.couldHaveSaid(&e, sq.headPID):
				ignored++
			case e.Exited:
				sq.says.exit = &e
			default:
				if len(sq.says.logged) == maxLogged {
					sq.says.logged = append(sq.says.logged[:0], sq.says.logged[1:]...)
				}
				sq.says.logged = append(sq.says.logged, e)
			}
		}
		if len(later) > 0 {
			unplaced = append(unplaced, HostEndings{HostEndings: snapshot.HostEndings{Host: h.Host, Endings: later}, TmID: h.TmID})
		}
	}
	return unplaced, ignored
}

// observe updates one session's timeline from its activity; prev is the
// previous snapshot's time, 0 in the timeline's first.
func (t *Tracker) observe(in *Snapshot, key pipeline.SessionKey, act *Activity, prev int64) {
	now := in.Time
	sq := t.sessions[key]
	if sq != nil && sq.life.reusedBy(act) {
		// The key names another session now (PostgreSQL's session id is the
		// leader's pid): the former one ended by this snapshot.
		t.retire(sq, in.Seq, now)
		sq = nil
	}
	if sq == nil {
		// A session first seen after the first snapshot was in none before,
		// so it began after the previous one read pg_stat_activity (its
		// backend_start may lie a moment before that snapshot's time): it
		// was seen from its start. Of any other, what came before now is
		// unknown.
		sq = &sessionQueries{since: now}
		if prev != 0 && act.BackendStart >= t.watchedFrom() && act.BackendStart < now {
			sq.since = act.BackendStart
		}
		sq.life.begin(act, now, t.watchedFrom(), now == t.first)
		t.sessions[key] = sq
	}
	sq.life.see(act)
	sq.headPID = act.PID
	prevSeen := sq.life.lastSeen
	sq.life.lastSeen = now
	if act.QueryStart == 0 || act.QueryStart <= sq.forgotten {
		return // the session never ran a query, or its query's event is past
	}
	ccnt := in.Processes.HeadCommandCount(key, act.PID)
	q := sq.find(ccnt, act.QueryStart, act.Running)
	if q != nil && act.QueryStart > q.start {
		// pg_stat_activity is read before the titles: the first sighting of a
		// command count may have carried the previous command's query_start.
		q.start, q.startStale = act.QueryStart, false
	}
	if q == nil {
		q = &query{start: act.QueryStart, text: act.Text}
		if act.QueryStart < sq.since {
			q.partial.startBefore(sq.since)
		}
		if act.Running {
			q.ccnt = ccnt
			q.startStale = slices.ContainsFunc(sq.queries, func(o *query) bool { return o.start == q.start })
		}
		sq.queries = append(sq.queries, q)
		sq.life.queries++
		slices.SortStableFunc(sq.queries, func(a, b *query) int { return int(sign(a.start - b.start)) })
	}
	if !act.Running {
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
			o.endAt(q.start, superseded, in.Seq)
		}
	}
	switch {
	case act.Running:
		q.end, q.seen, q.endSeen = 0, stillRunning, 0
		if act.Waiting && prevSeen != 0 {
			// Seen waiting now: count the interval since the previous sighting.
			waited := q.ran(prevSeen, now, sq.since)
			q.lockWait += waited
			sq.life.lockWait += waited
			q.lockBlocker = cmp.Or(act.Blocker, q.lockBlocker)
		}
		q.vmemPeak = max(q.vmemPeak, act.Vmem)
	default:
		end, seen := act.StateChange, seenIdle
		if end < q.start {
			end = now
		}
		if act.Aborted {
			seen = seenAborted
		}
		q.endAt(end, seen, in.Seq)
	}
}

// attribute shares every process's steps of the newest snapshot among its
// session's queries.
func (t *Tracker) attribute(procs Processes) {
	// By session row: one map lookup per session, not per process.
	timelines := make([]*sessionQueries, procs.Sessions())
	for key, sq := range t.sessions {
		if row, ok := procs.SessionRow(key); ok {
			timelines[row] = sq
		}
	}
	procs.Steps(func(step *Step) {
		for len(t.rows) <= int(step.Row) {
			t.rows = append(t.rows, rowSighting{})
		}
		id := step.Process
		rs := &t.rows[step.Row]
		from, prevCcnt := id.Creation, int64(0)
		if rs.at != 0 && rs.id == id {
			from, prevCcnt = rs.at, rs.ccnt
		}
		// The step runs to when the process was read.
		readAt, ccnt := step.ReadAt, step.CommandCount
		*rs = rowSighting{id: id, at: readAt, ccnt: ccnt}
		// A process that did nothing still takes part: its segment counts as
		// 0 in the query's skew, and its host in the query's partial mark.
		sq := timelines[id.Session]
		if sq == nil {
			return
		}
		st := &step.Counters
		hs := HostSegment{id.Host, step.Segment}
		known := step.Known
		sq.addSessionStep(st, known, id.Host)
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
			if hs.Segment == -1 && int64(id.PID) == sq.headPID {
				if ns := q.ran(from, readAt, sq.since); ns > 0 {
					q.add(st, 1, ns, known, hs)
				}
				break
			}
			q.add(st, 1, readAt-max(from, q.start), known, hs)
		case ccnt > 0:
			sq.shareAmong(st, from, readAt, known, hs, func(q *query) bool { return q.mayHaveRun(prevCcnt, ccnt) })
		default:
			sq.share(st, from, readAt, known, hs)
		}
	})
}

// markPartial flags the queries running now that have a process on a host
// that did not answer.
func (t *Tracker) markPartial(hosts *Hosts) {
	if !slices.Contains(hosts.Down, true) {
		return
	}
	for _, sq := range t.sessions {
		for _, q := range sq.queries {
			if q.end != 0 {
				continue
			}
			q.markSilentHosts(hosts)
		}
	}
}

// figures drops what is too old and copies out every query left: the
// running ones and those that ended within the longest window, at most
// maxFinished of the latter (the most recently ended).
//
// A query whose event is still due stays whatever its age or number (settle
// bounds how long that is).
func (t *Tracker) figures(acts map[pipeline.SessionKey]Activity, hosts *Hosts, now int64) []Figures {
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
	var out []Figures
	for key, sq := range t.sessions {
		sq.queries = slices.DeleteFunc(sq.queries, func(q *query) bool { return sq.forget(q, q.end < cutoff) })
		for _, q := range sq.queries {
			t.segs = sortedSegments(t.segs, q.segments)
			out = append(out, q.figures(key, t.segs, hosts.Names))
		}
	}
	// Deterministic output: by session, then start.
	slices.SortFunc(out, func(a, b Figures) int {
		switch {
		case a.Session != b.Session:
			return a.Session.Compare(b.Session)
		}
		return int(sign(a.Start - b.Start))
	})
	return out
}

// figures are q as written after a snapshot, its segments sorted; host
// names by host row.
func (q *query) figures(session pipeline.SessionKey, segs []SegmentUse, names []string) Figures {
	f := Figures{Session: session, CommandCount: q.ccnt, Start: q.start, End: q.end, Text: q.text, Totals: q.totals,
		Known: q.known, Partial: q.partial.partial()}
	if q.spill != nil {
		sp := *q.spill
		f.Spill = &sp
	}
	f.Segments = make([]pipeline.SegmentUse, 0, len(segs))
	for _, u := range segs {
		f.Segments = append(f.Segments, pipeline.SegmentUse{Host: names[u.At.Host], Segment: u.At.Segment, CPU: u.CPU, Read: u.Read, Written: u.Written})
	}
	return f
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
