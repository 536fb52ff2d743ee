// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshot

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// testEntry is process 100 of session 7.
func testEntry() ProcessEntry {
	p := Process{PID: 100, CreationTime: time.Unix(1_700_000_000, 0), HasStat: true}
	p.Set(pipeline.CPUUser, 1.5, 0)
	return ProcessEntry{Session: 7, Process: p}
}

// processBatch is one process of session 7 on host, at t.
func processBatch(host string, t pcommon.Timestamp) pmetric.Metrics {
	md := pmetric.NewMetrics()
	NewProcessEncoder(Scope{}, Switches{}).Append(md.ResourceMetrics(),
		&ProcessBatch{Time: t, TmID: 1, Host: host, Kind: pipeline.KindProcess, Entries: []ProcessEntry{testEntry()}}, nil)
	return md
}

// ReadBatch tells a process batch, a closing batch, a merged one and a batch
// that is not ours.
func TestReadBatchTellsTheKindsOfBatch(t *testing.T) {
	ts := pcommon.NewTimestampFromTime(time.Unix(1_700_000_500, 0))
	closing := NewClosingEncoder(Scope{}, time.Unix(0, 0), Switches{}).Encode(&Closing{Time: ts.AsTime(), TmID: 1, Coordinator: "mdw"})
	merged := pmetric.NewMetrics()
	closing.ResourceMetrics().CopyTo(merged.ResourceMetrics())
	closing.ResourceMetrics().At(0).CopyTo(merged.ResourceMetrics().AppendEmpty())
	foreign := pmetric.NewMetrics()
	foreign.ResourceMetrics().AppendEmpty().Resource().Attributes().PutStr("service.name", "other")
	for name, c := range map[string]struct {
		md   pmetric.Metrics
		want BatchKind
	}{
		"process": {processBatch("sdw1", ts), BatchProcesses},
		"closing": {closing, BatchClosing},
		"merged":  {merged, BatchMerged},
		"foreign": {foreign, BatchForeign},
	} {
		if got := ReadBatch(c.md).Kind; got != c.want {
			t.Errorf("%s batch framed as %d, want %d", name, got, c.want)
		}
	}
}

// Every point of a batch carries its snapshot's time: the decoder leaves
// out a point of another time, and says so.
func TestThePointOfAnotherSnapshotIsLeftOut(t *testing.T) {
	ts := pcommon.NewTimestampFromTime(time.Unix(1_700_000_500, 0))
	md := processBatch("sdw1", ts)
	later := processBatch("sdw1", ts+1)
	later.ResourceMetrics().At(0).CopyTo(md.ResourceMetrics().AppendEmpty())
	b := ReadBatch(md)
	var d ProcessDecoder
	d.Decode(md.ResourceMetrics(), b.Kinds, b.Time)
	if len(d.Samples) != 1 || d.Skipped == 0 || d.Err == nil {
		t.Errorf("%d samples, %d skipped (%v); want the first snapshot's process alone", len(d.Samples), d.Skipped, d.Err)
	}
}
