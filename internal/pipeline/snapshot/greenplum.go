// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshot

import (
	"cmp"
	"slices"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// GreenplumSession is what a Greenplum server keeps itself about one
// session, from the receiver's latest read of its views (workfiles, lock
// waits, session memory): figures beside the ones the agents read from
// /proc, on the session resource of the closing batch.
type GreenplumSession struct {
	Spill  []Spill         // workfiles held now, per command and segment
	Wait   *LockWait       // nil: the session waits for no lock
	Memory []SegmentMemory // nil: the server keeps no such view
}

// Spill is the workfiles one command of the session holds on one segment.
type Spill struct {
	Segment, CommandCount int64
	Bytes, Files          int64
}

// LockWait is the lock a session waits for and the session that holds it.
type LockWait struct {
	Segment     int64  // where it waits; -1 the coordinator
	Mode        string // the mode it wants (pg_locks.mode)
	Object      string // schema.relation, "transaction <xid>", or the lock type
	Blocker     int64  // the holder's sess_id
	BlockerMode string
}

// SegmentMemory is Greenplum's vmem account of the session on one segment.
type SegmentMemory struct {
	Segment, Bytes int64
	Runaway        bool
}

// intAttrs are the data-point attributes that are integers (the others
// of closing-batch metrics are strings), as PointAttributes declare them.
var intAttrs = func() map[string]bool {
	out := map[string]bool{}
	for _, a := range pipeline.PointAttributes {
		if a.Type == "int" {
			out[a.Name] = true
		}
	}
	return out
}()

func (e *ClosingEncoder) encodeGreenplum(w *resourceWriter, g *GreenplumSession) {
	for _, s := range g.Spill {
		seg, ccnt := strconv.FormatInt(s.Segment, 10), strconv.FormatInt(s.CommandCount, 10)
		w.record(pipeline.SessionSpillSize, s.Bytes, 0, seg, ccnt)
		w.record(pipeline.SessionSpillFiles, s.Files, 0, seg, ccnt)
	}
	if l := g.Wait; l != nil {
		w.record(pipeline.SessionLockWait, 1, 0, strconv.FormatInt(l.Segment, 10), l.Mode, l.BlockerMode)
		meta := w.metadata(pipeline.SessionLockWait)
		meta.PutStr(pipeline.MetaLockObject, l.Object)
		meta.PutInt(pipeline.MetaLockBlockerSessionID, l.Blocker)
	}
	for _, m := range g.Memory {
		seg := strconv.FormatInt(m.Segment, 10)
		w.record(pipeline.SessionVmemUsage, m.Bytes, 0, seg)
		w.record(pipeline.SessionVmemRunaway, pipeline.BoolInt(m.Runaway), 0, seg)
	}
}

// DecodeGreenplum reads a session resource's Greenplum figures; nil when
// it has none.
func DecodeGreenplum(rm pmetric.ResourceMetrics) *GreenplumSession {
	var g GreenplumSession
	found := false
	spill := map[[2]int64]*Spill{}
	memory := map[int64]*SegmentMemory{}
	pipeline.EachPoint(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
		a := dp.Attributes()
		seg := pipeline.IntOf(a, pipeline.AttrSegmentID).V
		switch m.Name() {
		case pipeline.MetricSessionSpillSize, pipeline.MetricSessionSpillFiles:
			k := [2]int64{seg, pipeline.IntOf(a, pipeline.AttrQueryCommandCount).V}
			s := spill[k]
			if s == nil {
				s = &Spill{Segment: k[0], CommandCount: k[1]}
				spill[k] = s
			}
			if m.Name() == pipeline.MetricSessionSpillSize {
				s.Bytes = pipeline.IntValue(dp)
			} else {
				s.Files = pipeline.IntValue(dp)
			}
		case pipeline.MetricSessionLockWait:
			meta := m.Metadata()
			g.Wait = &LockWait{Segment: seg, Mode: pipeline.Str(a, pipeline.AttrLockMode), Object: pipeline.Str(meta, pipeline.MetaLockObject),
				Blocker: pipeline.IntOf(meta, pipeline.MetaLockBlockerSessionID).V, BlockerMode: pipeline.Str(a, pipeline.AttrLockBlockerMode)}
		case pipeline.MetricSessionVmemUsage, pipeline.MetricSessionVmemRunaway:
			s := memory[seg]
			if s == nil {
				s = &SegmentMemory{Segment: seg}
				memory[seg] = s
			}
			if m.Name() == pipeline.MetricSessionVmemUsage {
				s.Bytes = pipeline.IntValue(dp)
			} else {
				s.Runaway = pipeline.IntValue(dp) != 0
			}
		default:
			return
		}
		found = true
	})
	if !found {
		return nil
	}
	for _, s := range spill {
		g.Spill = append(g.Spill, *s)
	}
	slices.SortFunc(g.Spill, func(a, b Spill) int {
		return cmp.Or(cmp.Compare(a.Segment, b.Segment), cmp.Compare(a.CommandCount, b.CommandCount))
	})
	for _, m := range memory {
		g.Memory = append(g.Memory, *m)
	}
	slices.SortFunc(g.Memory, func(a, b SegmentMemory) int { return cmp.Compare(a.Segment, b.Segment) })
	out := g // to the heap only when the session has such figures
	return &out
}

// LockWait is the session's lock wait; nil when it waits for none.
func (g *GreenplumSession) LockWait() *LockWait {
	if g == nil {
		return nil
	}
	return g.Wait
}

// SpillTotal sums the session's workfiles over its commands and segments.
func (g *GreenplumSession) SpillTotal() (bytes, files int64) {
	if g == nil {
		return 0, 0
	}
	for _, s := range g.Spill {
		bytes += s.Bytes
		files += s.Files
	}
	return bytes, files
}

// VmemTotal sums the session's vmem over the segments; ok is false where
// the server keeps no such view. runaway tells whether any segment marked
// the session runaway.
func (g *GreenplumSession) VmemTotal() (bytes int64, runaway, ok bool) {
	if g == nil || g.Memory == nil {
		return 0, false, false
	}
	for _, m := range g.Memory {
		bytes += m.Bytes
		runaway = runaway || m.Runaway
	}
	return bytes, runaway, true
}
