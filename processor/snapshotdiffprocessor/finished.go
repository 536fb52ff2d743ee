// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"cmp"
	"slices"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/sessionaction"
)

// settleSnapshots is how many snapshots after the one that saw a query or
// a session end its event waits: an exit record of a process that exited
// before that snapshot's time is read by the next scrape at the latest,
// and every process seen since has its steps after the end (docs/pipeline.md,
// finished work).
const settleSnapshots = 1

// sessionLife is what a session's event says: who, from when to when,
// and its totals over every process it had, exited ones included.
type sessionLife struct {
	start        int64 // backend_start; the first snapshot that saw it without one
	backendStart int64 // 0: the server reported none
	who          pipeline.SessionWho
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
func (l *sessionLife) begin(act *sessionActivity, now, watchedFrom int64, firstSnapshot bool) {
	l.backendStart = act.backendStart
	l.start = cmp.Or(act.backendStart, now)
	if l.start < watchedFrom || (act.backendStart == 0 && firstSnapshot) {
		l.partial.startBefore(now)
	}
}

// reusedBy tells an activity of another session under the same key: its
// backend started at another time.
func (l *sessionLife) reusedBy(act *sessionActivity) bool {
	return l.backendStart != 0 && act.backendStart != 0 && act.backendStart != l.backendStart
}

// see takes in what the newest snapshot says of whose session it is.
func (l *sessionLife) see(act *sessionActivity) {
	l.who, l.system = act.who, act.system
	l.own = l.own || act.own
	l.vmemPeak = max(l.vmemPeak, act.vmem)
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

// retiredSession is a session whose key another one took before its event
// was written.
type retiredSession struct {
	key pipeline.SessionKey
	sq  *sessionQueries
}

// retire ends sq at now and keeps it until its events are written.
func (t *queryTracker) retire(sq *sessionQueries, seq uint64, now int64) {
	sq.leave(seq, now)
	for key, cur := range t.sessions {
		if cur == sq {
			t.retired = append(t.retired, retiredSession{key, sq})
			delete(t.sessions, key)
			return
		}
	}
}

// noteMemory keeps each session's largest resident memory over all its
// processes in one snapshot.
func (t *queryTracker) noteMemory(s *store) {
	rss := map[uint32]int64{}
	for i := range s.memBySH {
		m := &s.memBySH[i]
		rss[m.session] += m.memory[pipeline.MemRSS]
	}
	for key, sq := range t.sessions {
		if row, ok := s.sessions.index[key]; ok {
			sq.life.memoryPeak = max(sq.life.memoryPeak, rss[row])
		}
	}
}

// settle writes the events of the queries and sessions whose figures can
// no longer change: settleSnapshots after the snapshot that saw them end,
// with every host they ran on answering; one that waited for a silent host
// longer than the longest window is written then, partial.
func (t *queryTracker) settle(s *store, seq uint64, now int64, out *trackedWork) {
	for key, sq := range t.sessions {
		t.settleSession(s, key, sq, seq, now, out)
	}
	t.retired = slices.DeleteFunc(t.retired, func(r retiredSession) bool {
		t.settleSession(s, r.key, r.sq, seq, now, out)
		return r.sq.life.ended && !slices.ContainsFunc(r.sq.queries, func(q *query) bool { return !q.finished })
	})
}

func (t *queryTracker) settleSession(s *store, key pipeline.SessionKey, sq *sessionQueries, seq uint64, now int64, out *trackedWork) {
	for _, q := range sq.queries {
		if q.finished || q.end == 0 {
			continue
		}
		if q.end <= sq.since || sq.life.own {
			// It ended before gpotel saw its session (its event, if any, is
			// past), or it was gpotel's own statement, not the cluster's work.
			q.finished = true
			continue
		}
		waited := now-q.end > t.keep
		if !waited && (seq < q.endSeen+settleSnapshots || q.onSilentHost(s) || t.logStateAt(q.end) == logBehind ||
			q.seen == sessionLeft && t.awaitsExit(sq)) {
			continue
		}
		q.finished = true
		if waited {
			q.markSilentHosts(s)
		}
		out.finished = append(out.finished, t.finishedQuery(s, key, sq, q))
	}
	l := &sq.life
	if l.ended || l.gone == 0 {
		return
	}
	if l.system || l.own {
		l.ended = true
		return
	}
	silent := false
	for h := range l.hosts {
		silent = silent || s.hosts.down[h]
	}
	waited := now-l.gone > t.keep
	if !waited && (seq < l.goneSeen+settleSnapshots || silent || t.logStateAt(l.gone) == logBehind || t.awaitsExit(sq)) {
		return
	}
	l.ended = true
	for h := range l.hosts {
		if s.hosts.down[h] {
			l.partial.hostSilent(h, s.hosts.downSince[h])
		}
	}
	v := judgeSession(&sq.says, l.gone)
	out.ended = append(out.ended, pipeline.EndedSession{Session: key, Who: l.who, Start: l.start, End: max(v.end, l.start),
		EndReason: v.status, SQLState: v.sqlstate, Message: v.message, Partial: l.partial.partial(), PartialCause: l.partial.cause(s.hosts.names),
		Queries: l.queries, Totals: l.totals, Known: l.known, MemoryPeak: l.memoryPeak,
		SpillMax: l.spillMax, LockWait: l.lockWait, VmemPeak: l.vmemPeak})
}

// onSilentHost tells a query with a process on a host that did not answer
// in the newest snapshot.
func (q *query) onSilentHost(s *store) bool {
	for hs := range q.segments {
		if s.hosts.down[hs.host] {
			return true
		}
	}
	return false
}

// markSilentHosts marks q partial for each host of its processes that did
// not answer in the newest snapshot.
func (q *query) markSilentHosts(s *store) {
	for hs := range q.segments {
		if s.hosts.down[hs.host] {
			q.partial.hostSilent(hs.host, s.hosts.downSince[hs.host])
		}
	}
}

func (t *queryTracker) finishedQuery(s *store, key pipeline.SessionKey, sq *sessionQueries, q *query) pipeline.FinishedQuery {
	segs := sortedSegments(q.segments)
	v := judgeQuery(q, &sq.says, t.logStateAt(q.end))
	f := pipeline.FinishedQuery{Session: key, Who: sq.life.who, CommandCount: q.ccnt, Start: q.start, End: v.end,
		Status: v.status, SQLState: v.sqlstate, ErrorMessage: v.message, CancelReason: v.cancelReason,
		Partial: q.partial.partial(), PartialCause: q.partial.cause(s.hosts.names), Totals: q.totals, Known: q.known, Skew: sessionSkews(segs),
		LockWait: q.lockWait, LockBlocker: q.lockBlocker, VmemPeak: q.vmemPeak,
		EndedByRule: sessionaction.EndedByRule(sessionaction.QueryKey{Session: key, Ccnt: q.ccnt, Start: q.start}, v.status, v.cancelReason)}
	if t.text != nil {
		f.Text = t.text(q.text)
	}
	if q.spill != nil {
		sp := *q.spill
		f.Spill = &sp
	}
	for _, u := range segs {
		if u.at.segment == pipeline.UnknownSegment {
			continue
		}
		f.Segments = append(f.Segments, pipeline.SegmentUse{Host: s.hosts.names[u.at.host], Segment: u.at.segment,
			CPU: u.cpu, Read: u.read, Written: u.written})
	}
	return f
}

// sortedSegments lists a query's segment use by host row, then content id.
func sortedSegments(m map[hostSegment]*segmentUse) []segmentUse {
	out := make([]segmentUse, 0, len(m))
	for _, u := range m {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b segmentUse) int {
		return cmp.Or(cmp.Compare(a.at.host, b.at.host), cmp.Compare(a.at.segment, b.at.segment))
	})
	return out
}
