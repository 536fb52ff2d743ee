// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshot

import (
	"cmp"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// NoSession is the session of an exited process no scrape saw, and of a
// postmaster's unrecorded CPU: its resource carries no gpotel.session.id
// (sess_id is never negative).
const NoSession = -1

// ProcessEntry is one process of a ProcessBatch.
type ProcessEntry struct {
	Session     int64 // NoSession: none
	Segment     int64
	BackendType string // "" when the server does not report it
	System      bool   // not a client backend
	Process     Process
	// Sparse marks an entry of a sparse batch that lists only the figures
	// in Changed: the others are as the receiver last sent them
	// (docs/pipeline.md, rule 8). Its gpotel.process.info point says so.
	Sparse  bool
	Changed uint64 // bit f: figure f is listed; read only when Sparse
}

// Lists tells whether the entry carries figure f: one the process has,
// and in a sparse entry one that changed.
func (pe *ProcessEntry) Lists(f pipeline.Figure) bool {
	return pe.Process.Values[f].OK && (!pe.Sparse || pe.Changed&(1<<f) != 0)
}

// ProcessBatch is the processes of one host that one agent answer (or one
// host's exit records) reported, at the snapshot's time.
type ProcessBatch struct {
	Time    pcommon.Timestamp
	TmID    int64
	Host    string
	Kind    pipeline.ResourceKind // KindProcess, KindExited or KindUnrecorded
	Entries []ProcessEntry
}

// Scope is the instrumentation scope the receiver's resources carry.
type Scope struct{ Name, Version string }

// ProcessEncoder writes process batches straight into pdata
// (docs/pipeline.md, process resources): one resource per session, every
// metric listing the processes in entry order, a process's attribute
// values next to each other. It writes what mdatagen's builder would
// for the same values and Switches, without its per-point copies and
// attribute comparisons. It is read-only once made: every emission worker
// shares one.
type ProcessEncoder struct {
	scope    Scope
	switches Switches
	metrics  []encodedMetric // the enabled ones, in emission order
}

type encodedMetric struct {
	*pipeline.ProcessMetric
	attrOn      bool
	aggregation string
}

// NewProcessEncoder honours the user's metric and resource attribute switches.
func NewProcessEncoder(scope Scope, sw Switches) *ProcessEncoder {
	e := &ProcessEncoder{scope: scope, switches: sw}
	for _, m := range pipeline.ProcessMetrics {
		ms := sw.metric(m.Name)
		if ms.Off {
			continue
		}
		e.metrics = append(e.metrics, encodedMetric{
			ProcessMetric: m,
			attrOn:        m.Attr == "" || sw.attributeOn(m.Name, m.Attr),
			aggregation:   ms.Aggregation,
		})
	}
	return e
}

// Scope is the instrumentation scope the encoder writes.
func (e *ProcessEncoder) Scope() Scope { return e.scope }

// MarksSparse tells whether the encoder writes gpotel.process.info, the
// point that marks a sparse entry: without it, every entry must be whole.
func (e *ProcessEncoder) MarksSparse() bool {
	for i := range e.metrics {
		if e.metrics[i].ProcessMetric == pipeline.ProcessInfo {
			return true
		}
	}
	return false
}

// Append writes the batch as one resource per session, sessions in id
// order, and returns how many processes went into resources the
// resource filters let through. order is scratch space the caller may
// reuse from batch to batch.
func (e *ProcessEncoder) Append(rms pmetric.ResourceMetricsSlice, b *ProcessBatch, order []int32) (written int, scratch []int32) {
	if len(e.metrics) == 0 || len(b.Entries) == 0 {
		return 0, order
	}
	order = order[:0]
	for i := range b.Entries {
		order = append(order, int32(i)) // #nosec G115 -- an answer is bounded far below 2^31 processes
	}
	slices.SortStableFunc(order, func(x, y int32) int { return cmp.Compare(b.Entries[x].Session, b.Entries[y].Session) })
	for from := 0; from < len(order); {
		session := b.Entries[order[from]].Session
		to := from + 1
		for to < len(order) && b.Entries[order[to]].Session == session {
			to++
		}
		if e.appendSession(rms, b, session, order[from:to]) {
			written += to - from
		}
		from = to
	}
	return written, order
}

// appendSession writes one session's resource, unless a resource filter drops it.
func (e *ProcessEncoder) appendSession(rms pmetric.ResourceMetricsSlice, b *ProcessBatch, session int64, group []int32) bool {
	attrs := pcommon.NewMap()
	attrs.EnsureCapacity(4)
	e.putResource(attrs, b, session)
	if !e.switches.keeps(attrs) {
		return false
	}
	rm := rms.AppendEmpty()
	attrs.MoveTo(rm.Resource().Attributes())
	sms := rm.ScopeMetrics()
	sms.EnsureCapacity(1)
	sm := sms.AppendEmpty()
	sm.Scope().SetName(e.scope.Name)
	sm.Scope().SetVersion(e.scope.Version)
	ms := sm.Metrics()
	ms.EnsureCapacity(len(e.metrics))
	for i := range e.metrics {
		em := &e.metrics[i]
		n := 0
		for _, j := range group {
			n += em.points(&b.Entries[j])
		}
		if n == 0 {
			continue
		}
		dps := appendMetric(ms, em.Name, em.Description, em.Unit, em.Sum)
		dps.EnsureCapacity(n)
		for _, j := range group {
			em.write(dps, b.Time, &b.Entries[j])
		}
	}
	return true
}

func (e *ProcessEncoder) putResource(attrs pcommon.Map, b *ProcessBatch, session int64) {
	if e.switches.resourceOn(pipeline.AttrResourceKind) {
		attrs.PutStr(pipeline.AttrResourceKind, b.Kind.String())
	}
	if e.switches.resourceOn(pipeline.AttrTmID) {
		attrs.PutInt(pipeline.AttrTmID, b.TmID)
	}
	if e.switches.resourceOn(pipeline.AttrHostName) {
		attrs.PutStr(pipeline.AttrHostName, b.Host)
	}
	if session != NoSession && b.Kind != pipeline.KindUnrecorded && e.switches.resourceOn(pipeline.AttrSessionID) {
		attrs.PutInt(pipeline.AttrSessionID, session)
	}
}

// points is how many points the entry contributes to the metric: one
// per figure it lists, or one for all of them when the attribute is off
// and they merge.
func (em *encodedMetric) points(pe *ProcessEntry) int {
	if em.ProcessMetric == pipeline.ProcessInfo {
		return 1
	}
	n := 0
	for _, f := range em.Figures() {
		if pe.Lists(f) {
			n++
		}
	}
	if n > 1 && !em.attrOn && em.merges() {
		return 1
	}
	return n
}

func (em *encodedMetric) merges() bool {
	switch em.aggregation {
	case AggregationSum, AggregationAvg, AggregationMin, AggregationMax:
		return true
	}
	return false
}

// write appends one process's points of the metric.
func (em *encodedMetric) write(dps pmetric.NumberDataPointSlice, ts pcommon.Timestamp, pe *ProcessEntry) {
	p := &pe.Process
	start := pcommon.NewTimestampFromTime(p.CreationTime)
	point := func() pmetric.NumberDataPoint {
		dp := dps.AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(ts)
		return dp
	}
	if em.ProcessMetric == pipeline.ProcessInfo {
		dp := point()
		dp.SetIntValue(1)
		da := dp.Attributes()
		da.EnsureCapacity(5)
		da.PutInt(pipeline.AttrProcessPID, p.PID)
		da.PutInt(pipeline.AttrSegmentID, pe.Segment)
		if pe.BackendType != "" {
			da.PutStr(pipeline.AttrBackendType, pe.BackendType)
		}
		da.PutBool(pipeline.AttrProcessSystem, pe.System)
		da.PutBool(pipeline.AttrProcessSparse, pe.Sparse)
		return
	}
	if !em.attrOn && em.merges() {
		// A merged point cannot say which of its figures changed: it is
		// written whole whenever one of them is listed.
		if em.points(pe) == 0 {
			return
		}
		if v, ok := em.merged(p); ok {
			em.set(point(), p.PID, "", v)
		}
		return
	}
	for _, f := range em.Figures() {
		if v := p.Values[f]; pe.Lists(f) {
			value := pipeline.Figures[f].Value
			if !em.attrOn {
				value = ""
			}
			em.set(point(), p.PID, value, v)
		}
	}
}

func (em *encodedMetric) set(dp pmetric.NumberDataPoint, pid int64, attrValue string, v Value) {
	if em.Double {
		dp.SetDoubleValue(v.Float)
	} else {
		dp.SetIntValue(v.Int)
	}
	da := dp.Attributes()
	if attrValue == "" {
		da.PutInt(pipeline.AttrProcessPID, pid)
		return
	}
	da.EnsureCapacity(2)
	da.PutInt(pipeline.AttrProcessPID, pid)
	da.PutStr(em.Attr, attrValue)
}

// merged folds a process's values of a metric whose attribute is off, as
// the builder folds points whose attributes became equal: sum, avg
// (integer division for ints), min or max.
func (em *encodedMetric) merged(p *Process) (Value, bool) {
	var acc Value
	n := 0
	for _, f := range em.Figures() {
		v := p.Values[f]
		if !v.OK {
			continue
		}
		n++
		if n == 1 {
			acc = v
			continue
		}
		switch em.aggregation {
		case AggregationSum, AggregationAvg:
			acc.Int += v.Int
			acc.Float += v.Float
		case AggregationMin:
			if (em.Double && v.Float < acc.Float) || (!em.Double && v.Int < acc.Int) {
				acc = v
			}
		case AggregationMax:
			if (em.Double && v.Float > acc.Float) || (!em.Double && v.Int > acc.Int) {
				acc = v
			}
		}
	}
	if n > 1 && em.aggregation == AggregationAvg {
		acc.Int /= int64(n)
		acc.Float /= float64(n)
	}
	return acc, n > 0
}
