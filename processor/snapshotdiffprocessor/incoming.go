// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"errors"
	"sync"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor/internal/querylife"
)

// incoming is one batch of ours decoded once, before the lock, into what
// the store takes: its kind and time (pipeline.Batch), the batch header
// of a process batch, its processes, and of a closing batch the hosts'
// answers, the departures and the sessions' activities.
type incoming struct {
	snapshot.Batch
	// err says why the batch cannot be ingested (no time, a broken batch
	// header).
	err error

	header    snapshot.BatchHeader // of a process batch, when Header >= 0
	processes *snapshot.ProcessDecoder

	hosts    []snapshot.HostAnswer
	departed []departedProcesses
	// departSkipped counts the departed points without an identity;
	// departErr is the first one's error.
	departSkipped int
	departErr     error
	activities    map[pipeline.SessionKey]querylife.Activity // nil when query figures are off
	endings       []querylife.HostEndings
	// endSkipped counts the endings points without an identity; endErr is
	// the first one's error.
	endSkipped int
	endErr     error
}

// departedProcesses are the processes of one departed resource.
type departedProcesses struct {
	snapshot.HostDepartures
	tmID int64
}

// decoder decodes our batches, before the lock, so that batches of many
// hosts decode at once.
type decoder struct {
	processes sync.Pool // *pipeline.ProcessDecoder, one per batch being decoded
	// queries: the activities and endings are read (query figures on).
	queries bool
}

func newDecoder(queries bool) *decoder {
	d := &decoder{queries: queries}
	d.processes.New = func() any { return &snapshot.ProcessDecoder{} }
	return d
}

// decode reads a process or closing batch b of md; release gives its
// decoder back.
func (d *decoder) decode(md pmetric.Metrics, b snapshot.Batch) *incoming {
	in := &incoming{Batch: b}
	rms := md.ResourceMetrics()
	if b.Kind == snapshot.BatchProcesses && b.Header >= 0 {
		in.header, in.err = snapshot.DecodeBatchHeader(rms.At(b.Header))
	}
	if in.err == nil && b.Time == 0 {
		if b.Kind == snapshot.BatchClosing {
			in.err = errors.New("snapshot has no data point to take its time from")
		} else {
			in.err = errors.New("process batch without a timestamp")
		}
	}
	if in.err != nil {
		return in
	}
	in.processes = d.processes.Get().(*snapshot.ProcessDecoder)
	in.processes.Decode(rms, b.Kinds, b.Time)
	if b.Kind != snapshot.BatchClosing {
		return in
	}
	in.hosts = snapshot.DecodeSnapshot(rms.At(b.Snapshot)).Hosts
	for i, kind := range b.Kinds {
		if kind != pipeline.KindDeparted {
			continue
		}
		dep, tmID, skipped, err := snapshot.DecodeDepartures(rms.At(i))
		in.departSkipped += skipped
		if in.departErr == nil {
			in.departErr = err
		}
		in.departed = append(in.departed, departedProcesses{HostDepartures: dep, tmID: tmID})
	}
	if d.queries {
		in.activities = readActivities(rms, b.Kinds)
		for i, kind := range b.Kinds {
			if kind != pipeline.KindEndings {
				continue
			}
			h, tmID, skipped, err := snapshot.DecodeEndings(rms.At(i))
			in.endSkipped += skipped
			if in.endErr == nil {
				in.endErr = err
			}
			in.endings = append(in.endings, querylife.HostEndings{HostEndings: h, TmID: tmID})
		}
	}
	return in
}

// release gives in's decoder back for the next batch.
func (d *decoder) release(in *incoming) {
	if in.processes != nil {
		d.processes.Put(in.processes)
		in.processes = nil
	}
}
