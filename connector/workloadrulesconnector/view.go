// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workloadrulesconnector

import (
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/ownbackends"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/output"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// queryKey names the query a rule fires on: the session and its running
// (or, idle in a transaction, its last) query by command count and start.
type queryKey struct {
	session pipeline.SessionKey
	ccnt    int64 // 0: keyed by start
	start   int64 // query_start, unix ns; 0: none
}

// target is one client session of a snapshot a rule may act on, with
// every figure the rules read.
type target struct {
	key          queryKey
	pid          int64
	backendStart time.Time
	queryStart   time.Time

	user, database, application, group string
	queue                              string // the role's resource queue; "": unknown
	superuser                          bool

	values  [numFigures]float64
	present uint32 // bit per figure: absent figures satisfy no predicate
}

func (t *target) set(f figure, v float64) {
	t.values[f] = v
	t.present |= 1 << f
}

func (t *target) value(f figure) (float64, bool) { return t.values[f], t.present&(1<<f) != 0 }

// view is one snapshot as the rules see it.
type view struct {
	time    time.Time
	host    string // the coordinator
	dialect string
	targets []target
}

// viewReader decodes the processor's output through the contract's
// decoders (internal/pipeline), keeping its buffers from snapshot to
// snapshot.
type viewReader struct {
	needs      decoders
	windows    output.WindowMatcher
	superusers []string
	queries    map[pipeline.SessionKey]output.QueryOutput
	hosts      map[string]hostPressure
	// windowMissing counts, per read, the sessions with figures of other
	// windows but none of window: a window the processor does not compute.
	windowMissing int
}

// hostPressure is a host's "some" stall shares over the last minute.
type hostPressure struct{ cpu, memory, io float64 }

func newViewReader(needs decoders, window time.Duration, superusers []string) *viewReader {
	return &viewReader{needs: needs, windows: output.WindowMatcher{Last: window}, superusers: superusers,
		queries: map[pipeline.SessionKey]output.QueryOutput{}, hosts: map[string]hostPressure{}}
}

// read decodes md into v; ok is false for a batch that closes no snapshot.
func (r *viewReader) read(md pmetric.Metrics, v *view) (ok bool) {
	clear(r.queries)
	clear(r.hosts)
	r.windowMissing = 0
	v.targets = v.targets[:0]
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		rm := rms.At(i)
		attrs := rm.Resource().Attributes()
		switch pipeline.KindOf(attrs) {
		case pipeline.KindSnapshot:
			ok = true
			h := snapshot.DecodeSnapshot(rm)
			v.time, v.host = h.Time.AsTime().UTC(), h.Coordinator
			if d, found := attrs.Get(pipeline.AttrDialect); found {
				v.dialect = d.AsString()
			}
		case pipeline.KindHost:
			if r.needs&decodeHosts == 0 {
				continue
			}
			name, lines := snapshot.DecodeHostPressure(rm)
			var p hostPressure
			for _, l := range lines {
				if l.GetKind() != pipeline.PressureSome {
					continue
				}
				switch l.GetResource() {
				case "cpu":
					p.cpu = l.GetAvg60()
				case "memory":
					p.memory = l.GetAvg60()
				case "io":
					p.io = l.GetAvg60()
				}
			}
			r.hosts[name] = p
		case pipeline.KindQuery:
			if r.needs&decodeQueries == 0 {
				continue
			}
			if q, found := output.DecodeQuery(rm); found && !q.Completed {
				r.queries[q.Session] = q
			}
		}
	}
	if !ok {
		return false
	}
	for i := range rms.Len() {
		rm := rms.At(i)
		if pipeline.KindOf(rm.Resource().Attributes()) == pipeline.KindSession {
			r.readSession(rm, v)
		}
	}
	return true
}

// readSession adds the session as a target, unless it is one no rule may
// act on: a system process, one of the collector's own connections, or
// one the snapshot does not name well enough to act on (no backend pid or
// backend_start).
func (r *viewReader) readSession(rm pmetric.ResourceMetrics, v *view) {
	h, st, _, hasInfo, ok := snapshot.DecodeSession(rm)
	if !ok || !hasInfo || h.System || h.Own || h.PID <= 0 || !st.BackendStart.Valid {
		return
	}
	if _, own := ownbackends.Of(h.PID); own {
		return
	}
	v.targets = append(v.targets, target{})
	t := &v.targets[len(v.targets)-1]
	t.pid, t.backendStart = h.PID, st.BackendStart.V
	t.user, t.database, t.application, t.group = h.User, h.Database, st.ApplicationName.V, st.RsgName.V
	t.queue = h.ResourceQueue
	t.superuser = slices.Contains(r.superusers, h.User)
	t.key.session = h.Key
	if st.QueryStart.Valid {
		t.queryStart = st.QueryStart.V
		t.key.start = st.QueryStart.V.UnixNano()
	}
	if q, found := r.queries[h.Key]; found && st.Running() {
		t.key.ccnt = q.CommandCount
		readQuery(t, &q)
	}
	if r.needs&decodeSessionFigures != 0 {
		figs := output.DecodeSessionFigures(rm, &r.windows)
		if figs.Last == nil && figs.Total != nil {
			r.windowMissing++
		}
		readSessionFigures(t, figs)
	}
	if r.needs&decodeGreenplum != 0 {
		gp := snapshot.DecodeGreenplum(rm)
		if bytes, _, found := gp.VmemTotal(); found {
			t.set(sessionVmem, float64(bytes))
		}
		if gp.LockWait() != nil || st.Waiting.V {
			t.set(sessionLockWait, 1)
		} else {
			t.set(sessionLockWait, 0)
		}
	}
	if st.State.V == "idle in transaction" || st.State.V == "idle in transaction (aborted)" {
		if st.StateChange.Valid {
			t.set(sessionIdleInTransaction, max(v.time.Sub(st.StateChange.V).Seconds(), 0))
		}
	}
	if r.needs&decodeHosts != 0 {
		r.readHosts(t, st.Backends)
	}
}

func readQuery(t *target, q *output.QueryOutput) {
	s := q.Stat
	t.set(queryDuration, q.Duration)
	t.set(queryCPUTime, s.GetUserTimeSeconds()+s.GetKernelTimeSeconds())
	t.set(queryDiskIO, float64(s.GetReadBytes()+s.GetWriteBytes()))
	if s.BlkioDelaySeconds != nil {
		t.set(queryDiskDelay, *s.BlkioDelaySeconds)
	}
	if s.RunDelaySeconds != nil {
		t.set(queryRunDelay, *s.RunDelaySeconds)
	}
	if q.Spill != nil {
		t.set(querySpillSize, float64(q.Spill.Bytes))
		t.set(querySpillFiles, float64(q.Spill.Files))
	}
	if s.CpuHottestSegment != nil {
		t.set(querySkewRatio, s.GetCpuSkew())
		t.set(querySkewMaxOverAvg, s.GetCpuMaxOverAvg())
	}
}

func readSessionFigures(t *target, figs output.SessionOutput) {
	if st := figs.Total; st != nil {
		// Memory is a gauge of the newest snapshot, the same in either stat.
		t.set(sessionMemory, float64(st.GetRss()))
	}
	st := figs.Last
	if st == nil {
		return
	}
	t.set(sessionMemory, float64(st.GetRss()))
	t.set(sessionCgroupCPUPressure, st.GetCpuPressure())
	if st.CpuHottestSegment != nil {
		t.set(sessionSkewMaxOverAvg, st.GetCpuMaxOverAvg())
	}
	span := st.GetWindowSeconds()
	if span <= 0 {
		return // no interval yet: no rate
	}
	t.set(sessionCPURate, (st.GetUserTimeSeconds()+st.GetKernelTimeSeconds())/span)
	t.set(sessionDiskIORate, float64(st.GetReadBytes()+st.GetWriteBytes())/span)
	if st.RunDelaySeconds != nil {
		rate := *st.RunDelaySeconds / span
		t.set(sessionRunDelayRate, rate)
		if n := st.GetProcesses(); n > 0 {
			t.set(sessionRunDelayShare, rate/float64(n))
		}
	}
	if st.BlkioDelaySeconds != nil {
		t.set(sessionDiskDelayRate, *st.BlkioDelaySeconds/span)
	}
}

// readHosts sets the largest pressure of the hosts the session's
// processes run on.
func (r *viewReader) readHosts(t *target, backends []pipeline.BackendRef) {
	var most hostPressure
	found := false
	for _, b := range backends {
		p, ok := r.hosts[b.Host]
		if !ok {
			continue
		}
		found = true
		most = hostPressure{cpu: max(most.cpu, p.cpu), memory: max(most.memory, p.memory), io: max(most.io, p.io)}
	}
	if found {
		t.set(hostsCPUPressure, most.cpu)
		t.set(hostsMemoryPressure, most.memory)
		t.set(hostsIOPressure, most.io)
	}
}
