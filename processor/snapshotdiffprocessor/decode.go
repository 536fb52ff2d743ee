package snapshotdiffprocessor

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	sc "github.com/gpotel/gpotel/internal/gpsemconv"
)

// processDecoder turns the process resources of one batch into samples
// (docs/pipeline.md, process resources). It is reused across batches.
type processDecoder struct {
	samples  []processSample
	skipped  int
	firstErr error
}

var errNoPID = errors.New("process data point without an int " + sc.AttrProcessPID)

func (d *processDecoder) fail(err error) {
	d.skipped++
	if d.firstErr == nil {
		d.firstErr = err
	}
}

// decode replaces d's samples with those of every process resource in rms.
func (d *processDecoder) decode(rms pmetric.ResourceMetricsSlice, kinds []resourceKind) {
	d.samples, d.skipped, d.firstErr = d.samples[:0], 0, nil
	for i, kind := range kinds {
		if kind.isProcesses() {
			d.decodeResource(rms.At(i), kind)
		}
	}
}

// processHeader is what a process resource says about all its processes.
type processHeader struct {
	host          string
	tmID, session int64
}

// An exited resource without gpotel.session.id holds the exited processes
// no scrape saw (unattributedSession); an unrecorded resource never has one
// (unrecordedSession).
func readProcessHeader(attrs pcommon.Map, kind resourceKind) (processHeader, error) {
	var h processHeader
	host, ok := attrs.Get(sc.AttrHostName)
	if !ok {
		return h, fmt.Errorf("process resource lacks %s", sc.AttrHostName)
	}
	h.host = host.Str()
	for _, a := range []struct {
		key string
		dst *int64
	}{{sc.AttrTmID, &h.tmID}, {sc.AttrSessionID, &h.session}} {
		v, ok := attrs.Get(a.key)
		if a.key == sc.AttrSessionID {
			switch {
			case kind == kindUnrecorded:
				h.session = unrecordedSession
				continue
			case !ok && kind == kindExited:
				h.session = unattributedSession
				continue
			}
		}
		if !ok || v.Type() != pcommon.ValueTypeInt {
			return h, fmt.Errorf("process resource lacks an int %s", a.key)
		}
		*a.dst = v.Int()
	}
	return h, nil
}

// decodeResource appends one sample per process of rm. Every metric lists
// the processes in the same order, so a cursor finds a point's process
// without a lookup; a point out of order costs a scan.
func (d *processDecoder) decodeResource(rm pmetric.ResourceMetrics, kind resourceKind) {
	h, err := readProcessHeader(rm.Resource().Attributes(), kind)
	exited := kind != kindProcess
	if err != nil {
		d.fail(err)
		return
	}
	first := len(d.samples)
	sms := rm.ScopeMetrics()
	for i := range sms.Len() {
		ms := sms.At(i).Metrics()
		for j := range ms.Len() {
			m := ms.At(j)
			apply := pointApplier(m)
			if apply == nil {
				continue
			}
			var dps pmetric.NumberDataPointSlice
			switch m.Type() {
			case pmetric.MetricTypeSum:
				dps = m.Sum().DataPoints()
			case pmetric.MetricTypeGauge:
				dps = m.Gauge().DataPoints()
			default:
				continue
			}
			cur := first
			for k := range dps.Len() {
				dp := dps.At(k)
				pid, ok := dp.Attributes().Get(sc.AttrProcessPID)
				if !ok || pid.Type() != pcommon.ValueTypeInt {
					d.fail(errNoPID)
					continue
				}
				start := int64(dp.StartTimestamp())
				if start == 0 {
					d.fail(fmt.Errorf("process %d: data point without a StartTimestamp (its creation time)", pid.Int()))
					continue
				}
				cur = d.find(first, cur, int32(pid.Int()), start)
				if cur == len(d.samples) {
					d.samples = append(d.samples, processSample{Host: h.host, TmID: h.tmID, Session: h.session, PID: int32(pid.Int()), Creation: start, Exited: exited, Segment: unknownSegment})
				}
				apply(&d.samples[cur], dp)
			}
		}
	}
}

// find returns the index in samples[first:] of the process (pid, creation),
// looking at cur and after it first; len(samples) when it is not there.
func (d *processDecoder) find(first, cur int, pid int32, creation int64) int {
	is := func(i int) bool { return d.samples[i].PID == pid && d.samples[i].Creation == creation }
	for i := cur; i < len(d.samples); i++ {
		if is(i) {
			return i
		}
	}
	for i := first; i < cur && i < len(d.samples); i++ {
		if is(i) {
			return i
		}
	}
	return len(d.samples)
}

// pointApplier returns how a point of m goes into a sample, nil for a
// metric the processor does not read.
func pointApplier(m pmetric.Metric) func(*processSample, pmetric.NumberDataPoint) {
	if cm, ok := counterByProcessMetric[m.Name()]; ok {
		return func(s *processSample, dp pmetric.NumberDataPoint) {
			slot := -1
			if cm.attr == "" {
				slot = cm.slots[0].slot
			} else if v, ok := dp.Attributes().Get(cm.attr); ok {
				for _, as := range cm.slots {
					if as.value == v.Str() {
						slot = as.slot
					}
				}
			}
			if slot < 0 {
				return
			}
			if cm.seconds {
				s.Counters[slot] = nanosValue(dp)
			} else {
				s.Counters[slot] = intValue(dp)
			}
			s.Present |= 1 << slot
		}
	}
	memory := func(slot int) func(*processSample, pmetric.NumberDataPoint) {
		return func(s *processSample, dp pmetric.NumberDataPoint) { s.Memory[slot] += intValue(dp) }
	}
	switch m.Name() {
	case sc.MetricProcessInfo:
		return func(s *processSample, dp pmetric.NumberDataPoint) {
			if seg, ok := dp.Attributes().Get(sc.AttrSegmentID); ok && seg.Type() == pcommon.ValueTypeInt {
				s.Segment = int32(seg.Int()) // #nosec G115 -- a content id
			}
		}
	case sc.MetricProcessCommandCount:
		return func(s *processSample, dp pmetric.NumberDataPoint) { s.CommandCount = max(intValue(dp), 0) }
	case sc.MetricProcessMemoryUsage:
		return memory(memRSS)
	case sc.MetricProcessMemoryVirtual:
		return memory(memVirtual)
	case sc.MetricProcessMemoryPeak:
		return memory(memPeak)
	case sc.MetricProcessMemoryVirtPeak:
		return memory(memVirtualPeak)
	case sc.MetricProcessMemoryRSS:
		return func(s *processSample, dp pmetric.NumberDataPoint) {
			v, ok := dp.Attributes().Get(sc.AttrRSSType)
			if !ok {
				return
			}
			switch v.Str() {
			case sc.RSSTypeAnon:
				s.Memory[memRSSAnon] += intValue(dp)
			case sc.RSSTypeFile, sc.RSSTypeShmem:
				s.Memory[memRSSShared] += intValue(dp)
			}
		}
	}
	return nil
}
