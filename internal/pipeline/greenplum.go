// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"cmp"
	"slices"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pmetric"
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

// Data-point attributes of the Greenplum session figures.
const (
	AttrLockMode        = "gpotel.lock.mode"
	AttrLockBlockerMode = "gpotel.lock.blocker.mode"
)

// Keys of gpotel.session.lock.wait's Metric.Metadata(): they name one wait
// (a relation name a user chose, a transaction id, the blocking session),
// so as data-point attributes every row-lock wait would start a series of
// its own in a backend such as Prometheus. In the metadata they travel
// with the point and identify nothing.
const (
	MetaLockObject           = "gpotel.lock.object"
	MetaLockBlockerSessionID = "gpotel.lock.blocker.session.id"
)

// The Greenplum session metrics of the closing batch (receiver).
const (
	MetricSessionSpillSize   = "gpotel.session.spill.size"
	MetricSessionSpillFiles  = "gpotel.session.spill.files"
	MetricSessionLockWait    = "gpotel.session.lock.wait"
	MetricSessionVmemUsage   = "gpotel.session.vmem.usage"
	MetricSessionVmemRunaway = "gpotel.session.vmem.runaway"
)

// The Greenplum session metrics' descriptions, for the closing batch.
var (
	SessionSpillSize = &ClosingMetric{Name: MetricSessionSpillSize, Unit: "By", Attrs: []string{AttrSegmentID, AttrQueryCommandCount},
		Description: "On Greenplum session resources: bytes of workfiles (spilled sorts, hashes) the session's command holds now on the segment (gp_toolkit.gp_workfile_usage_per_query), from the receiver's latest read of it."}
	SessionSpillFiles = &ClosingMetric{Name: MetricSessionSpillFiles, Unit: "{file}", Attrs: []string{AttrSegmentID, AttrQueryCommandCount},
		Description: "On Greenplum session resources: workfiles the session's command holds now on the segment."}
	SessionLockWait = &ClosingMetric{Name: MetricSessionLockWait, Unit: "1",
		Attrs:       []string{AttrSegmentID, AttrLockMode, AttrLockBlockerMode},
		Description: "On session resources, only while the session waits for a lock: 1, with the mode it wants and the mode a session holding a conflicting lock holds (pg_locks, cluster-wide on Greenplum); Metric.Metadata() names the object and that session."}
	SessionVmemUsage = &ClosingMetric{Name: MetricSessionVmemUsage, Unit: "By", Attrs: []string{AttrSegmentID},
		Description: "On Greenplum session resources, where the server keeps it (GP6: gp_internal_tools' session_state.session_level_memory_consumption): the vmem Greenplum accounts to the session on the segment."}
	SessionVmemRunaway = &ClosingMetric{Name: MetricSessionVmemRunaway, Unit: "1", Attrs: []string{AttrSegmentID},
		Description: "On Greenplum session resources beside gpotel.session.vmem.usage: 1 when the server marked the session runaway on the segment (its red-zone cleaner will cancel it), else 0."}
)

// The query's workfiles (processor), from the Greenplum session figures:
// held now, and the most held at once over its life as far as the reads saw.
const (
	MetricQuerySpillSize     = "gpotel.query.spill.size"
	MetricQuerySpillFiles    = "gpotel.query.spill.files"
	MetricQuerySpillSizeMax  = "gpotel.query.spill.size.max"
	MetricQuerySpillFilesMax = "gpotel.query.spill.files.max"
)

// QuerySpill is a query's workfiles: held now (0 once it ended) and the
// most held at once.
type QuerySpill struct {
	Bytes, Files       int64
	MaxBytes, MaxFiles int64
}

// intAttrs are the data-point attributes that are integers (the others
// of closing-batch metrics are strings), as PointAttributes declare them.
var intAttrs = func() map[string]bool {
	out := map[string]bool{}
	for _, a := range PointAttributes {
		if a.Type == "int" {
			out[a.Name] = true
		}
	}
	return out
}()

func (e *ClosingEncoder) encodeGreenplum(w *resourceWriter, g *GreenplumSession) {
	for _, s := range g.Spill {
		seg, ccnt := strconv.FormatInt(s.Segment, 10), strconv.FormatInt(s.CommandCount, 10)
		w.record(SessionSpillSize, s.Bytes, 0, seg, ccnt)
		w.record(SessionSpillFiles, s.Files, 0, seg, ccnt)
	}
	if l := g.Wait; l != nil {
		w.record(SessionLockWait, 1, 0, strconv.FormatInt(l.Segment, 10), l.Mode, l.BlockerMode)
		meta := w.metadata(SessionLockWait)
		meta.PutStr(MetaLockObject, l.Object)
		meta.PutInt(MetaLockBlockerSessionID, l.Blocker)
	}
	for _, m := range g.Memory {
		seg := strconv.FormatInt(m.Segment, 10)
		w.record(SessionVmemUsage, m.Bytes, 0, seg)
		w.record(SessionVmemRunaway, BoolInt(m.Runaway), 0, seg)
	}
}

// DecodeGreenplum reads a session resource's Greenplum figures; nil when
// it has none.
func DecodeGreenplum(rm pmetric.ResourceMetrics) *GreenplumSession {
	var g GreenplumSession
	found := false
	spill := map[[2]int64]*Spill{}
	memory := map[int64]*SegmentMemory{}
	EachPoint(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
		a := dp.Attributes()
		seg := IntOf(a, AttrSegmentID).V
		switch m.Name() {
		case MetricSessionSpillSize, MetricSessionSpillFiles:
			k := [2]int64{seg, IntOf(a, AttrQueryCommandCount).V}
			s := spill[k]
			if s == nil {
				s = &Spill{Segment: k[0], CommandCount: k[1]}
				spill[k] = s
			}
			if m.Name() == MetricSessionSpillSize {
				s.Bytes = IntValue(dp)
			} else {
				s.Files = IntValue(dp)
			}
		case MetricSessionLockWait:
			meta := m.Metadata()
			g.Wait = &LockWait{Segment: seg, Mode: Str(a, AttrLockMode), Object: Str(meta, MetaLockObject),
				Blocker: IntOf(meta, MetaLockBlockerSessionID).V, BlockerMode: Str(a, AttrLockBlockerMode)}
		case MetricSessionVmemUsage, MetricSessionVmemRunaway:
			s := memory[seg]
			if s == nil {
				s = &SegmentMemory{Segment: seg}
				memory[seg] = s
			}
			if m.Name() == MetricSessionVmemUsage {
				s.Bytes = IntValue(dp)
			} else {
				s.Runaway = IntValue(dp) != 0
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
