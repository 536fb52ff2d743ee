// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"slices"

	"github.com/gpotel/gpotel/internal/pipeline/sparse"
)

// hostTable is one row per host ever seen, in the order first seen; a
// row is never freed (a cluster's hosts are few).
type hostTable struct {
	names    []string
	index    map[string]uint32
	answered []uint64 // seq of the last snapshot the host answered fully in
	down     []bool   // the host did not answer in the newest snapshot
	// downSince is when a host that is down now stopped answering: the
	// first snapshot of its silence (unix ns).
	downSince []int64
	// readDelay is how long after the newest snapshot's time the host's
	// processes were read at the latest (ns; 0: not measured).
	readDelay []int64
	// batches checks each host's process batches (sparse batches).
	batches sparse.Sequence
}

func newHostTable() hostTable {
	return hostTable{index: map[string]uint32{}}
}

// row is the host's row, added on first sight.
func (t *hostTable) row(name string) uint32 {
	if row, ok := t.index[name]; ok {
		return row
	}
	row := uint32(len(t.names))
	t.names = append(t.names, name)
	t.index[name] = row
	t.answered = append(t.answered, 0)
	t.down = append(t.down, false)
	t.downSince = append(t.downSince, 0)
	t.readDelay = append(t.readDelay, 0)
	t.batches.AddHost()
	return row
}

// setDown takes in which hosts did not answer in the snapshot at time.
func (t *hostTable) setDown(down []uint32, time int64) {
	for h := range t.down {
		isDown := slices.Contains(down, uint32(h)) // #nosec G115 -- a row
		if isDown && !t.down[h] {
			t.downSince[h] = time
		}
		t.down[h] = isDown
	}
}
