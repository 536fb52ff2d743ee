// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package querylife

import (
	"slices"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/sessionaction"
)

// settleSnapshots is how many snapshots after the one that saw a query or
// a session end its event waits: an exit record of a process that exited
// before that snapshot's time is read by the next scrape at the latest,
// and every process seen since has its steps after the end (docs/pipeline.md,
// finished work).
const settleSnapshots = 1

// settle writes the events of the queries and sessions whose figures can
// no longer change: settleSnapshots after the snapshot that saw them end,
// with every host they ran on answering; one that waited for a silent host
// longer than the longest window is written then, partial.
func (t *Tracker) settle(hosts *Hosts, seq uint64, now int64, out *Work) {
	for key, sq := range t.sessions {
		t.settleSession(hosts, key, sq, seq, now, out)
	}
	t.retired = slices.DeleteFunc(t.retired, func(r retiredSession) bool {
		t.settleSession(hosts, r.key, r.sq, seq, now, out)
		return r.sq.life.ended && !slices.ContainsFunc(r.sq.queries, func(q *query) bool { return !q.finished })
	})
}

func (t *Tracker) settleSession(hosts *Hosts, key pipeline.SessionKey, sq *sessionQueries, seq uint64, now int64, out *Work) {
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
		if !waited && (seq < q.endSeen+settleSnapshots || q.onSilentHost(hosts) || t.logStateAt(q.end) == logBehind ||
			q.seen == sessionLeft && t.awaitsExit(sq)) {
			continue
		}
		q.finished = true
		if waited {
			q.markSilentHosts(hosts)
		}
		out.Finished = append(out.Finished, t.finishedQuery(hosts, key, sq, q))
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
		silent = silent || hosts.Down[h]
	}
	waited := now-l.gone > t.keep
	if !waited && (seq < l.goneSeen+settleSnapshots || silent || t.logStateAt(l.gone) == logBehind || t.awaitsExit(sq)) {
		return
	}
	l.ended = true
	for h := range l.hosts {
		if hosts.Down[h] {
			l.partial.hostSilent(h, hosts.DownSince[h])
		}
	}
	v := judgeSession(&sq.says, l.gone)
	out.Ended = append(out.Ended, events.EndedSession{Session: key, Who: l.who, Start: l.start, End: max(v.end, l.start),
		EndReason: v.status, SQLState: v.sqlstate, Message: v.message, Partial: l.partial.partial(), PartialCause: l.partial.cause(hosts.Names),
		Queries: l.queries, Totals: l.totals, Known: l.known, MemoryPeak: l.memoryPeak,
		SpillMax: l.spillMax, LockWait: l.lockWait, VmemPeak: l.vmemPeak})
}

func (t *Tracker) finishedQuery(hosts *Hosts, key pipeline.SessionKey, sq *sessionQueries, q *query) events.FinishedQuery {
	segs := sortedSegments(nil, q.segments)
	v := judgeQuery(q, &sq.says, t.logStateAt(q.end))
	f := events.FinishedQuery{Session: key, Who: sq.life.who, CommandCount: q.ccnt, Start: q.start, End: v.end,
		Status: v.status, SQLState: v.sqlstate, ErrorMessage: v.message, CancelReason: v.cancelReason,
		Partial: q.partial.partial(), PartialCause: q.partial.cause(hosts.Names), Totals: q.totals, Known: q.known,
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
		if u.At.Segment == pipeline.UnknownSegment {
			continue
		}
		f.Segments = append(f.Segments, pipeline.SegmentUse{Host: hosts.Names[u.At.Host], Segment: u.At.Segment,
			CPU: u.CPU, Read: u.Read, Written: u.Written})
	}
	return f
}

// awaitsExit tells a session gone without its head's exit where exit
// records come: a backend leaves pg_stat_activity before it exits, so its
// record may come a scrape or more after the first snapshot without it.
func (t *Tracker) awaitsExit(sq *sessionQueries) bool {
	return t.exitsHeard && sq.life.gone != 0 && sq.headPID != 0 && sq.says.exit == nil
}

// logStateAt is how far the log was read with respect to time at.
func (t *Tracker) logStateAt(at int64) logState {
	switch {
	case t.logReadThrough == 0:
		return logNotRead
	case t.logReadThrough >= at:
		return logCovers
	}
	return logBehind
}

// retire ends sq at now and keeps it until its events are written.
func (t *Tracker) retire(sq *sessionQueries, seq uint64, now int64) {
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
func (t *Tracker) noteMemory(procs Processes) {
	for key, sq := range t.sessions {
		sq.life.memoryPeak = max(sq.life.memoryPeak, procs.SessionMemory(key))
	}
}
