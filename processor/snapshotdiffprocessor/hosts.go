// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"slices"

	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
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

// answers takes in the hosts' answers of the snapshot being committed:
// each one's read delay, and which hosts answered (appended to up) and
// which did not (to down).
func (t *hostTable) answers(hosts []snapshot.HostAnswer, up, down []uint32) ([]uint32, []uint32) {
	rows := make([]uint32, len(hosts))
	for i := range hosts {
		rows[i] = t.row(hosts[i].Host)
	}
	listed := make([]bool, len(t.names))
	clear(t.readDelay)
	for i, row := range rows {
		listed[row] = true
		t.readDelay[row] = hosts[i].ReadDelay
		if t.batches.Answered(row, &hosts[i]) {
			up = append(up, row)
		} else {
			down = append(down, row)
		}
	}
	// A host whose batches came but whose answer did not (the closing
	// batch was lost) is not known to have answered.
	for row := range t.names {
		if !listed[row] && t.batches.Unlisted(uint32(row)) {
			down = append(down, uint32(row))
		}
	}
	return up, down
}

// settle takes in which hosts answered fully (up) and which did not
// (down) in the snapshot seq at time.
func (t *hostTable) settle(seq uint64, time int64, up, down []uint32) {
	for h := range t.down {
		isDown := slices.Contains(down, uint32(h)) // #nosec G115 -- a row
		if isDown && !t.down[h] {
			t.downSince[h] = time
		}
		t.down[h] = isDown
	}
	for _, h := range up {
		t.answered[h] = seq
	}
}
