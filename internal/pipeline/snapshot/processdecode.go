// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshot

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// ProcessSample is one process as a process, exited or unrecorded
// resource holds it, as the processor reads it: every figure as an
// integer (seconds as nanoseconds), so that sums and differences are exact.
type ProcessSample struct {
	Kind     pipeline.ResourceKind
	Host     string
	TmID     int64
	Session  int64 // NoSession when the resource has none
	PID      int32
	Creation int64 // unix ns: the points' StartTimestamp
	Values   [pipeline.NumFigures]int64
	Present  uint64 // bit f set: Values[f] was reported (absent is not zero)
	Segment  int32  // gpotel.process.info's content id; pipeline.UnknownSegment without one
	// BackendType and System are gpotel.process.info's.
	BackendType string
	System      bool
	// Sparse is gpotel.process.info's: the sample holds only the figures
	// that changed since the receiver last sent the process; the others
	// are as they were (docs/pipeline.md, rule 8).
	Sparse bool
}

// Entry is the sample as the process encoder writes it: seconds back
// from nanoseconds. The processor writes the processes it carried
// unchanged with it (docs/pipeline.md, sparse batches).
func (s *ProcessSample) Entry() ProcessEntry {
	e := ProcessEntry{Session: s.Session, Segment: int64(s.Segment), BackendType: s.BackendType, System: s.System,
		Process: Process{PID: int64(s.PID), CreationTime: time.Unix(0, s.Creation).UTC(), HasStat: true}}
	for f := range pipeline.NumFigures {
		if s.Has(f) {
			e.Process.Set(f, float64(s.Values[f])/1e9, s.Values[f])
		}
	}
	return e
}

// Has tells whether the figure was reported.
func (s *ProcessSample) Has(f pipeline.Figure) bool { return s.Present&(1<<f) != 0 }

// Counters are the sample's cumulative counters, the processor's slots.
func (s *ProcessSample) Counters() []int64 { return s.Values[:pipeline.NumCounters] }

// CounterMask is Present over the counters.
func (s *ProcessSample) CounterMask() uint32 {
	return uint32(s.Present & (1<<pipeline.NumCounters - 1))
}

// Memory sums the sample's gauges by memory type (MemoryTypes).
func (s *ProcessSample) Memory() [pipeline.NumMemory]int64 {
	g := s.Gauges()
	return g.Memory()
}

// NumGauges is how many figures are gauges: the ones after the counters.
const NumGauges = int(pipeline.NumFigures) - pipeline.NumCounters

// A process's gauges fit one uint16 mask.
var _ [16 - NumGauges]struct{}

// Gauges are a process's gauges as last reported: what the processor
// keeps of each process to carry the ones a sparse entry leaves out.
type Gauges struct {
	Values  [NumGauges]int64 // figure NumCounters+g at g
	Present uint16           // bit g: Values[g] was reported
}

// Gauges are the sample's.
func (s *ProcessSample) Gauges() Gauges {
	g := Gauges{Present: uint16(s.Present >> pipeline.NumCounters)} // #nosec G115 -- NumGauges bits
	copy(g.Values[:], s.Values[pipeline.NumCounters:])
	return g
}

// Memory sums the gauges by memory type (MemoryTypes).
func (g *Gauges) Memory() [pipeline.NumMemory]int64 {
	var out [pipeline.NumMemory]int64
	for i := range NumGauges {
		if mt, ok := pipeline.MemoryTypeOf(pipeline.Figure(pipeline.NumCounters + i)); ok && g.Present&(1<<i) != 0 {
			out[mt] += g.Values[i]
		}
	}
	return out
}

// Fill makes a sparse sample whole: each figure it leaves out is as at
// the process's last sighting, the counters from last where known says
// they were reported, the gauges from g (docs/pipeline.md, rule 8).
func (s *ProcessSample) Fill(last *pipeline.Counters, known uint32, g *Gauges) {
	for c := range pipeline.NumCounters {
		if bit := uint64(1) << c; s.Present&bit == 0 && known&(1<<c) != 0 {
			s.Values[c], s.Present = last[c], s.Present|bit
		}
	}
	for i := range NumGauges {
		if bit := uint64(1) << (pipeline.NumCounters + i); s.Present&bit == 0 && g.Present&(1<<i) != 0 {
			s.Values[pipeline.NumCounters+i], s.Present = g.Values[i], s.Present|bit
		}
	}
	s.Sparse = false
}

// CommandCount is the title's cmd<N>; 0 when it has none (Greenplum
// counts from 1 and leaves cmd0 out of the title).
func (s *ProcessSample) CommandCount() int64 { return max(s.Values[pipeline.CommandCount], 0) }

// A process's figures fit one uint64 mask.
var _ [64 - pipeline.NumFigures]struct{}

// ProcessDecoder reads the process resources of a batch into samples
// (docs/pipeline.md, process resources). Reuse one across batches.
type ProcessDecoder struct {
	Samples []ProcessSample
	// Skipped counts points and resources left out as malformed; Err is
	// the first reason.
	Skipped int
	Err     error
}

var errNoPID = errors.New("process data point without an int " + pipeline.AttrProcessPID)

func (d *ProcessDecoder) fail(err error) {
	d.Skipped++
	if d.Err == nil {
		d.Err = err
	}
}

// Decode replaces d's samples with those of every resource of rms whose
// kind (kinds[i], from ReadBatch) holds processes. A point not at the batch's
// time t belongs to another snapshot and is left out.
func (d *ProcessDecoder) Decode(rms pmetric.ResourceMetricsSlice, kinds []pipeline.ResourceKind, t pcommon.Timestamp) {
	d.Samples, d.Skipped, d.Err = d.Samples[:0], 0, nil
	for i, kind := range kinds {
		if kind.HoldsProcesses() {
			d.decodeResource(rms.At(i), kind, t)
		}
	}
}

// processHeader is what a process resource says about all its processes.
type processHeader struct {
	host          string
	tmID, session int64
}

// readProcessHeader reads a resource's identity. An exited resource
// without gpotel.session.id holds exited processes no scrape saw; an
// unrecorded resource never has one.
func readProcessHeader(attrs pcommon.Map, kind pipeline.ResourceKind) (processHeader, error) {
	h := processHeader{session: NoSession}
	host, ok := attrs.Get(pipeline.AttrHostName)
	if !ok {
		return h, fmt.Errorf("%s resource lacks %s", kind, pipeline.AttrHostName)
	}
	h.host = host.Str()
	tm, ok := attrs.Get(pipeline.AttrTmID)
	if !ok || tm.Type() != pcommon.ValueTypeInt {
		return h, fmt.Errorf("%s resource lacks an int %s", kind, pipeline.AttrTmID)
	}
	h.tmID = tm.Int()
	if kind == pipeline.KindUnrecorded {
		return h, nil
	}
	id, ok := attrs.Get(pipeline.AttrSessionID)
	switch {
	case !ok && kind == pipeline.KindExited:
		return h, nil
	case !ok || id.Type() != pcommon.ValueTypeInt:
		return h, fmt.Errorf("%s resource lacks an int %s", kind, pipeline.AttrSessionID)
	}
	h.session = id.Int()
	return h, nil
}

// decodeResource appends one sample per process of rm. Every metric lists
// the processes in the same order, so a cursor finds a point's process
// without a lookup; a point out of order costs a scan.
func (d *ProcessDecoder) decodeResource(rm pmetric.ResourceMetrics, kind pipeline.ResourceKind, t pcommon.Timestamp) {
	h, err := readProcessHeader(rm.Resource().Attributes(), kind)
	if err != nil {
		d.fail(err)
		return
	}
	first := len(d.Samples)
	sms := rm.ScopeMetrics()
	for i := range sms.Len() {
		ms := sms.At(i).Metrics()
		for j := range ms.Len() {
			m := ms.At(j)
			pm, ok := pipeline.ProcessMetricNamed(m.Name())
			if !ok {
				continue
			}
			dps := pipeline.NumberPoints(m)
			cur := first
			for k := range dps.Len() {
				dp := dps.At(k)
				pid, ok := dp.Attributes().Get(pipeline.AttrProcessPID)
				if !ok || pid.Type() != pcommon.ValueTypeInt {
					d.fail(errNoPID)
					continue
				}
				start := int64(dp.StartTimestamp()) // #nosec G115 -- nanoseconds since 1970 fit until 2262
				if start == 0 {
					d.fail(fmt.Errorf("process %d: data point without a StartTimestamp (its creation time)", pid.Int()))
					continue
				}
				if dp.Timestamp() != t {
					d.fail(fmt.Errorf("process %d: data point at %d in a batch of time %d (one snapshot, one time)", pid.Int(), dp.Timestamp(), t))
					continue
				}
				cur = d.find(first, cur, int32(pid.Int()), start) // #nosec G115 -- a pid
				if cur == len(d.Samples) {
					d.Samples = append(d.Samples, ProcessSample{Kind: kind, Host: h.host, TmID: h.tmID, Session: h.session,
						PID: int32(pid.Int()), Creation: start, Segment: pipeline.UnknownSegment}) // #nosec G115 -- a pid
				}
				apply(&d.Samples[cur], pm, dp)
			}
		}
	}
}

// find returns the index in Samples[first:] of the process (pid, creation),
// looking at cur and after it first; len(Samples) when it is not there.
func (d *ProcessDecoder) find(first, cur int, pid int32, creation int64) int {
	is := func(i int) bool { return d.Samples[i].PID == pid && d.Samples[i].Creation == creation }
	for i := cur; i < len(d.Samples); i++ {
		if is(i) {
			return i
		}
	}
	for i := first; i < cur && i < len(d.Samples); i++ {
		if is(i) {
			return i
		}
	}
	return len(d.Samples)
}

// apply puts one point of metric pm into its process's sample.
func apply(s *ProcessSample, pm *pipeline.ProcessMetric, dp pmetric.NumberDataPoint) {
	if pm == pipeline.ProcessInfo {
		attrs := dp.Attributes()
		if seg, ok := attrs.Get(pipeline.AttrSegmentID); ok && seg.Type() == pcommon.ValueTypeInt {
			s.Segment = int32(seg.Int()) // #nosec G115 -- a content id
		}
		if bt, ok := attrs.Get(pipeline.AttrBackendType); ok {
			s.BackendType = bt.Str()
		}
		if sys, ok := attrs.Get(pipeline.AttrProcessSystem); ok {
			s.System = sys.Bool()
		}
		if sparse, ok := attrs.Get(pipeline.AttrProcessSparse); ok {
			s.Sparse = sparse.Bool()
		}
		return
	}
	f := pm.Figures()[0]
	if pm.Attr != "" {
		v, ok := dp.Attributes().Get(pm.Attr)
		if !ok {
			return // the attribute was switched off: which figure it is, is lost
		}
		if f, ok = pm.FigureOf(v.Str()); !ok {
			return
		}
	}
	if pm.Double {
		s.Values[f] = pipeline.NanosValue(dp)
	} else {
		s.Values[f] = pipeline.IntValue(dp)
	}
	s.Present |= 1 << f
}
