// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshot

import (
	"errors"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// The framing rules (docs/pipeline.md, rule 1): one scrape is one
// snapshot with one time, delivered as zero or more process batches
// closed by one batch that holds its snapshot resource. A process batch
// the next consumer refused makes its host not answered in the closing
// batch, so the loss is marked, never taken for exits.

// BatchKind is what one ConsumeMetrics call holds.
type BatchKind uint8

// The kinds of batch.
const (
	// BatchForeign holds neither processes nor a snapshot resource: not ours.
	BatchForeign BatchKind = iota
	// BatchProcesses holds processes, or a batch header, and no snapshot
	// resource: part of the snapshot of its time.
	BatchProcesses
	// BatchClosing holds one snapshot resource: it closes its snapshot.
	BatchClosing
	// BatchMerged holds more than one snapshot resource: something between
	// the receiver and its consumer merged batches.
	BatchMerged
)

// Batch is an incoming batch as ReadBatch reads it: its kind, the kind of
// each resource, and its time.
type Batch struct {
	Kind      BatchKind
	Kinds     []pipeline.ResourceKind // of each resource, in order
	Snapshot  int                     // index of the snapshot resource; -1 without one
	Snapshots int
	Processes int // resources that hold processes
	Header    int // index of the batch resource (sparse batches); -1 without one
	// Time is the snapshot time: the snapshot resource's first point's,
	// else the first point's of any resource; 0 without points or in a
	// foreign batch.
	Time pcommon.Timestamp
}

// ErrMergedBatch is why a batch with more than one snapshot gets no figures.
var ErrMergedBatch = errors.New("batch holds more than one snapshot (is a batch processor in front of snapshotdiff?)")

// ReadBatch reads what an incoming batch is: the consumer's end of the
// framing rules, as sparse.Outgoing is the sender's.
func ReadBatch(md pmetric.Metrics) Batch {
	rms := md.ResourceMetrics()
	b := Batch{Kinds: make([]pipeline.ResourceKind, rms.Len()), Snapshot: -1, Header: -1}
	for i := range rms.Len() {
		k := pipeline.KindOf(rms.At(i).Resource().Attributes())
		b.Kinds[i] = k
		switch {
		case k == pipeline.KindSnapshot:
			b.Snapshot = i
			b.Snapshots++
		case k.HoldsProcesses():
			b.Processes++
		case k == pipeline.KindBatch:
			b.Header = i
		}
	}
	switch {
	case b.Snapshots > 1:
		b.Kind = BatchMerged
	case b.Snapshots == 1:
		b.Kind = BatchClosing
	case b.Processes > 0 || b.Header >= 0:
		b.Kind = BatchProcesses
	default:
		return b
	}
	b.Time = batchTime(rms, b.Snapshot)
	return b
}

// batchTime is the time of the snapshot resource at snapshot (-1: none)
// or else of the first resource with a point.
func batchTime(rms pmetric.ResourceMetricsSlice, snapshot int) pcommon.Timestamp {
	if snapshot >= 0 {
		if t := pipeline.FirstPointTime(rms.At(snapshot)); t != 0 {
			return t
		}
	}
	for i := range rms.Len() {
		if t := pipeline.FirstPointTime(rms.At(i)); t != 0 {
			return t
		}
	}
	return 0
}
