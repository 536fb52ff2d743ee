// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Sparse process batches (docs/pipeline.md, sparse batches): the receiver sends a
// process only when one of its figures changed since it last sent it, or
// when a full batch is due; every process batch carries its host's batch
// sequence number; the closing batch says how many batches each host sent
// and which processes left. Comparing for equality is not diffing: the
// processor alone computes steps.

// BatchHeader is what the batch resource of a process batch says.
type BatchHeader struct {
	Host string
	TmID int64
	// Seq numbers the host's batches from 1, one up per batch, across
	// snapshots, for as long as the receiver runs.
	Seq uint64
	// Full: the host's batches of this snapshot list every process it
	// answered for; otherwise only those whose figures changed since the
	// receiver last sent them.
	Full bool
}

// appendBatchHeader writes the batch resource. Its metrics are framing,
// never switched off.
func appendBatchHeader(rms pmetric.ResourceMetricsSlice, scope Scope, ts pcommon.Timestamp, h BatchHeader) {
	rm := rms.AppendEmpty()
	attrs := rm.Resource().Attributes()
	attrs.EnsureCapacity(3)
	attrs.PutStr(AttrResourceKind, KindBatch.String())
	attrs.PutInt(AttrTmID, h.TmID)
	attrs.PutStr(AttrHostName, h.Host)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(scope.Name)
	sm.Scope().SetVersion(scope.Version)
	ms := sm.Metrics()
	dp := appendMetric(ms, MetricBatchSequence, "The host's batch sequence number (docs/pipeline.md, rule 8).", "1", false).AppendEmpty()
	dp.SetTimestamp(ts)
	dp.SetIntValue(int64(h.Seq)) // #nosec G115 -- one per batch: never near 2^63
	dp = appendMetric(ms, MetricBatchFull, "1 when the host's batches of this snapshot list every process it answered for.", "1", false).AppendEmpty()
	dp.SetTimestamp(ts)
	dp.SetIntValue(boolInt(h.Full))
}

// DecodeBatchHeader reads a batch resource.
func DecodeBatchHeader(rm pmetric.ResourceMetrics) (BatchHeader, error) {
	var h BatchHeader
	attrs := rm.Resource().Attributes()
	host, ok := attrs.Get(AttrHostName)
	if !ok {
		return h, fmt.Errorf("batch resource lacks %s", AttrHostName)
	}
	h.Host = host.Str()
	if tm, ok := attrs.Get(AttrTmID); ok && tm.Type() == pcommon.ValueTypeInt {
		h.TmID = tm.Int()
	}
	seq, full := false, false
	eachPoint(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
		switch m.Name() {
		case MetricBatchSequence:
			if v := intValue(dp); v > 0 {
				h.Seq, seq = uint64(v), true
			}
		case MetricBatchFull:
			h.Full, full = intValue(dp) != 0, true
		}
	})
	if !seq || !full {
		return h, fmt.Errorf("batch resource of %s lacks a positive %s or %s", h.Host, MetricBatchSequence, MetricBatchFull)
	}
	return h, nil
}

// Departure is a process that left since the previous snapshot.
type Departure struct {
	Session  int64
	PID      int64
	Creation int64 // unix ns: its points' StartTimestamp
}

// HostDepartures are one host's departures, listed in the closing batch.
type HostDepartures struct {
	Host      string
	Processes []Departure
}

// appendDepartures writes one departed resource: a point per process,
// its pid and session as attributes, its creation time as StartTimestamp.
func appendDepartures(rms pmetric.ResourceMetricsSlice, scope Scope, ts pcommon.Timestamp, tmID int64, d *HostDepartures) {
	rm := rms.AppendEmpty()
	attrs := rm.Resource().Attributes()
	attrs.EnsureCapacity(3)
	attrs.PutStr(AttrResourceKind, KindDeparted.String())
	attrs.PutInt(AttrTmID, tmID)
	attrs.PutStr(AttrHostName, d.Host)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(scope.Name)
	sm.Scope().SetVersion(scope.Version)
	dps := appendMetric(sm.Metrics(), MetricProcessDeparted, "Always 1: the process left since the previous snapshot (docs/pipeline.md, rule 8).", "1", false)
	dps.EnsureCapacity(len(d.Processes))
	for _, p := range d.Processes {
		dp := dps.AppendEmpty()
		dp.SetStartTimestamp(pcommon.Timestamp(p.Creation)) // #nosec G115 -- a time after 1970
		dp.SetTimestamp(ts)
		dp.SetIntValue(1)
		da := dp.Attributes()
		da.EnsureCapacity(2)
		da.PutInt(AttrProcessPID, p.PID)
		da.PutInt(AttrSessionID, p.Session)
	}
}

// DecodeDepartures reads a departed resource; a point without pid,
// session or start time is skipped and counted.
func DecodeDepartures(rm pmetric.ResourceMetrics) (d HostDepartures, tmID int64, skipped int, err error) {
	attrs := rm.Resource().Attributes()
	host, ok := attrs.Get(AttrHostName)
	tm, tmOK := attrs.Get(AttrTmID)
	if !ok || !tmOK || tm.Type() != pcommon.ValueTypeInt {
		return d, 0, 1, fmt.Errorf("departed resource lacks %s or an int %s", AttrHostName, AttrTmID)
	}
	d.Host, tmID = host.Str(), tm.Int()
	eachPoint(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
		if m.Name() != MetricProcessDeparted {
			return
		}
		pid, ok1 := dp.Attributes().Get(AttrProcessPID)
		sess, ok2 := dp.Attributes().Get(AttrSessionID)
		if !ok1 || !ok2 || pid.Type() != pcommon.ValueTypeInt || sess.Type() != pcommon.ValueTypeInt || dp.StartTimestamp() == 0 {
			skipped++
			if err == nil {
				err = fmt.Errorf("departed process on %s without an int %s, %s or a StartTimestamp", d.Host, AttrProcessPID, AttrSessionID)
			}
			return
		}
		d.Processes = append(d.Processes, Departure{Session: sess.Int(), PID: pid.Int(), Creation: int64(dp.StartTimestamp())}) // #nosec G115 -- ns since 1970
	})
	return d, tmID, skipped, err
}

// sentProcess is what the receiver last sent of one process: enough to
// tell whether any of its figures changed, not the figures.
type sentProcess struct {
	session  int64
	creation int64
	hash     uint64
	tick     uint64 // the last snapshot that answered for it
}

// sentHost is the receiver's memory of one host.
type sentHost struct {
	seq   uint64                // of its last batch
	procs map[int64]sentProcess // by pid; nil: a full batch is due
	// This snapshot's.
	tick     uint64
	full     bool
	batches  int64
	refused  bool
	departed []Departure // pids reused this snapshot: their old process left
}

// hashProcess fingerprints everything a process batch says of a process,
// so that equal fingerprints mean nothing to send (a 64-bit hash with a
// per-run random seed: a change goes unseen with odds of 2^-64).
func hashProcess(seed maphash.Seed, e *ProcessEntry) uint64 {
	var buf [8 * (int(NumFigures) + 4)]byte
	b := buf[:0]
	var present uint64
	for f := range NumFigures {
		v := e.Process.Values[f]
		if v.OK {
			present |= 1 << f
		}
		b = binary.LittleEndian.AppendUint64(b, uint64(v.Int)^math.Float64bits(v.Float)) // #nosec G115 -- bits
	}
	b = binary.LittleEndian.AppendUint64(b, present)
	b = binary.LittleEndian.AppendUint64(b, uint64(e.Session)) // #nosec G115 -- bits
	b = binary.LittleEndian.AppendUint64(b, uint64(e.Segment)) // #nosec G115 -- bits
	b = binary.LittleEndian.AppendUint64(b, uint64(boolInt(e.System)))
	var h maphash.Hash
	h.SetSeed(seed)
	_, _ = h.Write(b)
	_, _ = h.WriteString(e.BackendType)
	return h.Sum64()
}

// departures lists, in pid order, the processes of hs the snapshot of
// tick did not answer for, and forgets them.
func (hs *sentHost) departures(tick uint64) []Departure {
	out := hs.departed
	hs.departed = nil
	for pid, p := range hs.procs {
		if p.tick != tick {
			out = append(out, Departure{Session: p.session, PID: pid, Creation: p.creation})
			delete(hs.procs, pid)
		}
	}
	slices.SortFunc(out, func(a, b Departure) int {
		return cmp.Or(cmp.Compare(a.PID, b.PID), cmp.Compare(a.Creation, b.Creation))
	})
	return out
}
