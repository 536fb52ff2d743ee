// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshot

import (
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// The wire form of the sparse batches rule (docs/pipeline.md): every
// process batch carries its host's batch sequence number in a batch
// resource; the closing batch says how many batches each host sent and
// which processes left. Package sparse holds the rule itself.

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

// AppendBatchHeader writes the batch resource. Its metrics are framing,
// never switched off.
func AppendBatchHeader(rms pmetric.ResourceMetricsSlice, scope Scope, ts pcommon.Timestamp, h BatchHeader) {
	_, ms := appendHostFraming(rms, scope, pipeline.KindBatch, h.TmID, h.Host, 3)
	dp := appendMetric(ms, pipeline.MetricBatchSequence, "The host's batch sequence number (docs/pipeline.md, the sparse batches rule).", "1", false).AppendEmpty()
	dp.SetTimestamp(ts)
	dp.SetIntValue(int64(h.Seq)) // #nosec G115 -- one per batch: never near 2^63
	dp = appendMetric(ms, pipeline.MetricBatchFull, "1 when the host's batches of this snapshot list every process it answered for.", "1", false).AppendEmpty()
	dp.SetTimestamp(ts)
	dp.SetIntValue(pipeline.BoolInt(h.Full))
}

// DecodeBatchHeader reads a batch resource.
func DecodeBatchHeader(rm pmetric.ResourceMetrics) (BatchHeader, error) {
	var h BatchHeader
	attrs := rm.Resource().Attributes()
	host, ok := attrs.Get(pipeline.AttrHostName)
	if !ok {
		return h, fmt.Errorf("batch resource lacks %s", pipeline.AttrHostName)
	}
	h.Host = host.Str()
	if tm, ok := attrs.Get(pipeline.AttrTmID); ok && tm.Type() == pcommon.ValueTypeInt {
		h.TmID = tm.Int()
	}
	seq, full := false, false
	pipeline.EachPoint(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
		switch m.Name() {
		case pipeline.MetricBatchSequence:
			if v := pipeline.IntValue(dp); v > 0 {
				h.Seq, seq = uint64(v), true
			}
		case pipeline.MetricBatchFull:
			h.Full, full = pipeline.IntValue(dp) != 0, true
		}
	})
	if !seq || !full {
		return h, fmt.Errorf("batch resource of %s lacks a positive %s or %s", h.Host, pipeline.MetricBatchSequence, pipeline.MetricBatchFull)
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
	_, ms := appendHostFraming(rms, scope, pipeline.KindDeparted, tmID, d.Host, 3)
	dps := appendMetric(ms, pipeline.MetricProcessDeparted, "Always 1: the process left since the previous snapshot (docs/pipeline.md, the sparse batches "+
		"rule).", "1", false)
	dps.EnsureCapacity(len(d.Processes))
	for _, p := range d.Processes {
		dp := dps.AppendEmpty()
		dp.SetStartTimestamp(pcommon.Timestamp(p.Creation)) // #nosec G115 -- a time after 1970
		dp.SetTimestamp(ts)
		dp.SetIntValue(1)
		da := dp.Attributes()
		da.EnsureCapacity(2)
		da.PutInt(pipeline.AttrProcessPID, p.PID)
		da.PutInt(pipeline.AttrSessionID, p.Session)
	}
}

// DecodeDepartures reads a departed resource; a point without pid,
// session or start time is skipped and counted.
func DecodeDepartures(rm pmetric.ResourceMetrics) (d HostDepartures, tmID int64, skipped int, err error) {
	if d.Host, tmID, err = hostOf(rm.Resource().Attributes(), "departed"); err != nil {
		return d, 0, 1, err
	}
	pipeline.EachPoint(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
		if m.Name() != pipeline.MetricProcessDeparted {
			return
		}
		pid, ok1 := dp.Attributes().Get(pipeline.AttrProcessPID)
		sess, ok2 := dp.Attributes().Get(pipeline.AttrSessionID)
		if !ok1 || !ok2 || pid.Type() != pcommon.ValueTypeInt || sess.Type() != pcommon.ValueTypeInt || dp.StartTimestamp() == 0 {
			skipped++
			if err == nil {
				err = fmt.Errorf("departed process on %s without an int %s, %s or a StartTimestamp", d.Host, pipeline.AttrProcessPID, pipeline.AttrSessionID)
			}
			return
		}
		d.Processes = append(d.Processes, Departure{Session: sess.Int(), PID: pid.Int(), Creation: int64(dp.StartTimestamp())}) // #nosec G115 -- ns since 1970
	})
	return d, tmID, skipped, err
}

// appendHostFraming appends a framing resource of one host (its kind,
// tm_id and host name; room for size attributes) with the given scope,
// and returns the resource's attributes and the scope's metrics.
func appendHostFraming(
	rms pmetric.ResourceMetricsSlice, scope Scope, kind pipeline.ResourceKind, tmID int64, host string, size int,
) (pcommon.Map, pmetric.MetricSlice) {
	rm := rms.AppendEmpty()
	attrs := rm.Resource().Attributes()
	attrs.EnsureCapacity(size)
	attrs.PutStr(pipeline.AttrResourceKind, kind.String())
	attrs.PutInt(pipeline.AttrTmID, tmID)
	attrs.PutStr(pipeline.AttrHostName, host)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(scope.Name)
	sm.Scope().SetVersion(scope.Version)
	return attrs, sm.Metrics()
}
