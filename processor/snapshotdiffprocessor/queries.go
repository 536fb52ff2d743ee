// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor/internal/querylife"
)

// stateIdleAborted is pg_stat_activity's state after a failed or
// cancelled statement inside a transaction.
const stateIdleAborted = "idle in transaction (aborted)"

// readActivities reads every session resource of a closing batch; one
// without its identity or its gpotel.session.info has no activity.
func readActivities(rms pmetric.ResourceMetricsSlice, kinds []pipeline.ResourceKind) map[pipeline.SessionKey]querylife.Activity {
	acts := map[pipeline.SessionKey]querylife.Activity{}
	for i, kind := range kinds {
		if kind != pipeline.KindSession {
			continue
		}
		h, st, _, hasInfo, ok := snapshot.DecodeSession(rms.At(i))
		if !ok || !hasInfo {
			continue
		}
		act := querylife.Activity{PID: h.PID, System: h.System, Own: h.Own, Running: st.Running(), Aborted: st.State.V == stateIdleAborted,
			Waiting: waitsForLock(&st), QueryStart: unixNano(st.QueryStart), StateChange: unixNano(st.StateChange),
			BackendStart: unixNano(st.BackendStart), Text: st.Query.V,
			Who: events.SessionWho{Database: h.Database, User: h.User, Application: st.ApplicationName,
				ClientAddress: st.ClientAddr, ClientPort: st.ClientPort, ResourceGroup: st.RsgName}}
		if g := snapshot.DecodeGreenplum(rms.At(i)); g != nil {
			act.Spill = g.Spill
			if g.Wait != nil {
				act.Waiting, act.Blocker = true, g.Wait.Blocker
			}
			for _, m := range g.Memory {
				act.Vmem += m.Bytes
			}
		}
		acts[h.Key] = act
	}
	return acts
}

// waitsForLock tells a session pg_stat_activity shows waiting for a lock:
// waiting for a lock (Greenplum 6: waiting, waiting_reason 'lock') or a
// Lock wait event (PostgreSQL 9.6 on, Greenplum 7).
func waitsForLock(st *snapshot.SessionState) bool {
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

// querySnapshot is the newest committed snapshot of s as the query
// tracker reads it, with the activities and endings of its closing batch.
func querySnapshot(s *store, acts map[pipeline.SessionKey]querylife.Activity, endings []querylife.HostEndings) *querylife.Snapshot {
	retained := s.windows.retained
	newest := retained[len(retained)-1]
	in := &querylife.Snapshot{Seq: newest.seq, Time: newest.time, Activities: acts, Endings: endings,
		Hosts:     querylife.Hosts{Names: s.hosts.names, Down: s.hosts.down, DownSince: s.hosts.downSince},
		Processes: &storeProcesses{s: s, newest: newest}}
	if len(retained) > 1 {
		in.Prev = retained[len(retained)-2].time
	}
	return in
}

// storeProcesses reads the store's newest snapshot for the query tracker.
type storeProcesses struct {
	s      *store
	newest *storedSnapshot
	rss    []int64 // by session row; nil until asked
}

func (v *storeProcesses) Sessions() int { return len(v.s.sessions.keys) }

func (v *storeProcesses) SessionRow(key pipeline.SessionKey) (uint32, bool) {
	row, ok := v.s.sessions.index[key]
	return row, ok
}

func (v *storeProcesses) HeadCommandCount(key pipeline.SessionKey, pid int64) int64 {
	s := v.s
	row, ok := s.sessions.index[key]
	if !ok || pid == 0 {
		return 0
	}
	for _, r := range v.newest.sessionRows(row) {
		if int64(s.procs.keys[r].pid) == pid && s.procs.seg[r] == -1 {
			return s.procs.ccnt[r]
		}
	}
	return 0
}

func (v *storeProcesses) SessionMemory(key pipeline.SessionKey) int64 {
	row, ok := v.s.sessions.index[key]
	if !ok {
		return 0
	}
	if v.rss == nil {
		v.rss = make([]int64, len(v.s.sessions.keys))
		for i := range v.s.memBySH {
			m := &v.s.memBySH[i]
			v.rss[m.session] += m.memory[pipeline.MemRSS]
		}
	}
	return v.rss[row]
}

func (v *storeProcesses) Steps(yield func(*querylife.Step)) {
	s, newest := v.s, v.newest
	var step querylife.Step
	buf := newest.steps
	for _, row := range newest.rows {
		buf, _ = nextStep(buf, &step.Counters)
		clampSteps(&step.Counters)
		key := s.procs.keys[row]
		step.Row = row
		step.Process = querylife.ProcessID{Creation: key.creation, Session: key.session, PID: key.pid, Host: key.host}
		step.Segment, step.CommandCount, step.Known = s.procs.seg[row], s.procs.ccnt[row], s.procs.known[row]
		// The step runs to when the process was read: after the snapshot
		// time by its host's read delay (an exit record's totals were
		// final before the scrape).
		step.ReadAt = newest.time
		if !s.procs.gone[row] {
			step.ReadAt += s.hosts.readDelay[key.host]
		}
		yield(&step)
	}
}
