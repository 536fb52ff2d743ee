// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"math/bits"

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

// keepWholeSamples keeps each process's last sighting whole (sample); it
// must be asked before the first row is added.
func (t *processTable) keepWholeSamples() { t.keepSamples = true }

// add gives key, first seen in the snapshot seq, a row, a freed one if
// there is one; grown tells that the table grew by one row.
func (t *processTable) add(key processKey, seq uint64) (row uint32, grown bool) {
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
	t.first[row] = seq
	return row, grown
}

// step takes in p's counters as row's last values and returns each one's
// step since the last sighting, and the mask of those that moved; known
// is false for a row added for p. A counter first reported after the
// process's first sighting starts as a baseline: what it counted before
// is outside what we saw.
func (t *processTable) step(row uint32, p *snapshot.ProcessSample, known bool) (steps pipeline.Counters, mask uint32) {
	last := &t.last[row]
	for m := p.CounterMask(); m != 0; m &= m - 1 {
		c := bits.TrailingZeros32(m)
		bit := uint32(1) << c
		v := p.Values[c]
		if p.Kind == pipeline.KindExited && pipeline.RoundedAtExit&bit != 0 && t.known[row]&bit != 0 {
			// The record is rounded down to 1024; the last live reading was exact.
			v = max(v, last[c])
		}
		if !known || t.known[row]&bit != 0 {
			steps[c] = v - last[c]
		}
		last[c] = v
		t.known[row] |= bit
		if steps[c] != 0 {
			mask |= bit
		}
	}
	return steps, mask
}

// sighted records p as row's sighting in the snapshot seq; an exit record
// has no title and no memory: the last ones seen stay.
func (t *processTable) sighted(row uint32, seq uint64, p *snapshot.ProcessSample) {
	exited := p.Kind != pipeline.KindProcess
	t.seen[row] = seq
	t.gone[row] = exited
	t.seg[row] = p.Segment
	if exited {
		return
	}
	t.ccnt[row] = p.CommandCount()
	t.gauges[row] = p.Gauges()
	if t.keepSamples {
		t.sample[row] = *p
	}
}

// fill gives a sparse sample the counters and gauges it left out, from
// row's last sighting.
func (t *processTable) fill(row uint32, p *snapshot.ProcessSample) {
	p.Fill(&t.last[row], t.known[row], &t.gauges[row])
}

// carried records row as seen unchanged in the snapshot seq.
func (t *processTable) carried(row uint32, seq uint64) { t.seen[row] = seq }

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
