// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// memoryGauges are bytes per memory type (pipeline.MemoryTypes).
type memoryGauges [pipeline.NumMemory]int64

// processKey is a process's identity; the creation time tells pid reuse apart.
type processKey struct {
	creation int64
	session  uint32 // sessionTable row
	pid      int32
	host     uint32 // hostTable row
}

// processTable is one row per process identity some retained snapshot
// still refers to, a column per fact.
type processTable struct {
	keys  []processKey
	last  []pipeline.Counters // values at the last sighting
	known []uint32            // counters ever reported for the process
	seen  []uint64            // seq of the last sighting; 0 marks a free row
	gone  []bool              // the last sighting was its exit record
	seg   []int32             // content id, for the unattributed exits' figures
	first []uint64            // seq of the first sighting
	ccnt  []int64             // title command count at the last sighting; 0: none
	// gauges at the last sighting: a process carried unchanged keeps its
	// memory, and a sparse sample its unlisted gauges.
	gauges []snapshot.Gauges
	// sample is each process's last sighting whole, kept only for the
	// dense per-process output (emit_process_metrics).
	sample      []snapshot.ProcessSample
	keepSamples bool
	free        freeRows
	index       map[processKey]uint32
}

func newProcessTable() processTable {
	return processTable{index: map[processKey]uint32{}}
}

// add gives key a row, a freed one if there is one; grown tells that the
// table grew by one row.
func (t *processTable) add(key processKey) (row uint32, grown bool) {
	row, grown = place(&t.free, &t.keys, key)
	if grown {
		t.last = append(t.last, pipeline.Counters{})
		t.known = append(t.known, 0)
		t.seen = append(t.seen, 0)
		t.gone = append(t.gone, false)
		t.seg = append(t.seg, 0)
		t.first = append(t.first, 0)
		t.ccnt = append(t.ccnt, 0)
		t.gauges = append(t.gauges, snapshot.Gauges{})
		if t.keepSamples {
			t.sample = append(t.sample, snapshot.ProcessSample{})
		}
	}
	t.index[key] = row
	return row, grown
}

// remove frees a row.
func (t *processTable) remove(row uint32) {
	delete(t.index, t.keys[row])
	t.keys[row] = processKey{}
	t.last[row] = pipeline.Counters{}
	t.known[row] = 0
	t.seen[row] = 0
	t.gone[row] = false
	t.seg[row] = 0
	t.first[row] = 0
	t.ccnt[row] = 0
	t.gauges[row] = snapshot.Gauges{}
	if t.keepSamples {
		t.sample[row] = snapshot.ProcessSample{}
	}
	t.free.put(row)
}
