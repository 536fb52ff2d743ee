// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"encoding/binary"
	"math/bits"
	"time"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// windowTable is what the window figures need: the retained snapshots,
// oldest first, and per window the steps of every process row since that
// window's old snapshot.
type windowTable struct {
	spans     []int64 // ns
	longest   int64
	maxPoints int // 0: automatic
	// acc[w] holds, per process row, the sum of its steps in (old
	// snapshot of window w, newest].
	acc      [][]int64
	oldSeq   []uint64
	retained []*storedSnapshot
}

func newWindowTable(windows []time.Duration, maxPoints int) windowTable {
	t := windowTable{maxPoints: maxPoints, acc: make([][]int64, len(windows)), oldSeq: make([]uint64, len(windows))}
	for _, w := range windows {
		t.spans = append(t.spans, int64(w))
		t.longest = max(t.longest, int64(w))
	}
	return t
}

// newestTime is the time of the newest retained snapshot, 0 when none.
func (t *windowTable) newestTime() int64 {
	if len(t.retained) == 0 {
		return 0
	}
	return t.retained[len(t.retained)-1].time
}

// restart forgets every retained snapshot: the one after newestSeq starts
// a new timeline.
func (t *windowTable) restart(newestSeq uint64) {
	clear(t.retained)
	t.retained = t.retained[:0]
	for w := range t.acc {
		clear(t.acc[w])
		t.oldSeq[w] = newestSeq
	}
}

// addRow makes room for a new process row.
func (t *windowTable) addRow() {
	for w := range t.acc {
		t.acc[w] = append(t.acc[w], make([]int64, pipeline.NumCounters)...)
	}
}

// clearRow forgets a freed process row's steps.
func (t *windowTable) clearRow(row uint32) {
	for w := range t.acc {
		clear(t.acc[w][int(row)*pipeline.NumCounters : int(row+1)*pipeline.NumCounters])
	}
}

// addSteps adds the steps of row in mask to every window.
func (t *windowTable) addSteps(row, mask uint32, steps *pipeline.Counters) {
	base := int(row) * pipeline.NumCounters
	for w := range t.acc {
		a := t.acc[w][base : base+pipeline.NumCounters]
		for m := mask; m != 0; m &= m - 1 {
			c := bits.TrailingZeros32(m)
			a[c] += steps[c]
		}
	}
}

// push retains sn as the newest snapshot, moves every window's old
// snapshot, drops the snapshots no window needs any more, and returns the
// oldest retained snapshot's seq.
func (t *windowTable) push(sn *storedSnapshot) uint64 {
	t.retained = append(t.retained, sn)
	drop := t.trimCount()
	times := make([]int64, len(t.retained)-drop)
	for i, r := range t.retained[drop:] {
		times[i] = r.time
	}
	for w, window := range t.spans {
		t.moveOld(w, t.retained[drop+nearestOld(times, window)].seq)
	}
	if drop > 0 {
		clear(t.retained[:drop])
		t.retained = append(t.retained[:0], t.retained[drop:]...)
	}
	return t.retained[0].seq
}

// storedSnapshot is one retained scrape: per process only its counter steps since
// its previous sighting, grouped by session.
type storedSnapshot struct {
	seq  uint64
	time int64
	// rows are process-table rows, grouped by session in bySession order.
	rows []uint32
	// bySession indexes rows: session s owns rows[first:next first].
	bySession []sessionSpan
	// steps holds one record per row: a uvarint mask of non-zero steps, then
	// each of those steps as a zigzag varint.
	steps     []byte
	hostsDown []uint32
}

type sessionSpan struct {
	session uint32
	first   uint32
}

// sessionRows returns the rows of one session in this snapshot without
// scanning the snapshot.
func (sn *storedSnapshot) sessionRows(session uint32) []uint32 {
	lo, hi := 0, len(sn.bySession)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if sn.bySession[mid].session < session {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == len(sn.bySession) || sn.bySession[lo].session != session {
		return nil
	}
	end := uint32(len(sn.rows))
	if lo+1 < len(sn.bySession) {
		end = sn.bySession[lo+1].first
	}
	return sn.rows[sn.bySession[lo].first:end]
}

// trimCount is how many of the oldest snapshots the ring no longer needs.
func (t *windowTable) trimCount() int {
	n := len(t.retained)
	if t.maxPoints > 0 {
		return max(0, n-t.maxPoints)
	}
	if n <= minStoredPoints {
		return 0
	}
	// Future old snapshots are never older than the newest one that is at
	// least the longest window old.
	limit := t.retained[n-1].time - t.longest
	for i := n - 2; i >= 0; i-- {
		if t.retained[i].time <= limit {
			return max(0, n-max(n-i, minStoredPoints))
		}
	}
	return 0
}

// nearestOld picks, among times (oldest first, newest last), the snapshot
// whose age relative to the newest is nearest to window: it walks back from
// the newest and stops as soon as the distance grows (a tie goes to the
// older). The newest itself is chosen only when it is alone.
func nearestOld(times []int64, window int64) int {
	newest := len(times) - 1
	if newest <= 0 {
		return 0
	}
	best := newest - 1
	bestDist := absDiff(times[newest]-times[best], window)
	for i := best - 1; i >= 0; i-- {
		d := absDiff(times[newest]-times[i], window)
		if d > bestDist {
			break
		}
		best, bestDist = i, d
	}
	return best
}

func absDiff(a, b int64) int64 {
	if a > b {
		return a - b
	}
	return b - a
}

// moveOld keeps acc[w] equal to the steps in (old, newest] as old moves.
func (t *windowTable) moveOld(w int, newOld uint64) {
	prev := t.oldSeq[w]
	base := t.retained[0].seq
	for seq := prev + 1; seq <= newOld; seq++ {
		applySteps(t.retained[seq-base], t.acc[w], -1)
	}
	for seq := newOld + 1; seq <= prev; seq++ {
		applySteps(t.retained[seq-base], t.acc[w], +1)
	}
	t.oldSeq[w] = newOld
}

// applySteps adds sign times each step of sn to acc.
func applySteps(sn *storedSnapshot, acc []int64, sign int64) {
	buf := sn.steps
	var st pipeline.Counters
	for _, row := range sn.rows {
		var mask uint32
		if buf, mask = nextStep(buf, &st); mask == 0 {
			continue
		}
		a := acc[int(row)*pipeline.NumCounters : int(row+1)*pipeline.NumCounters]
		for m := mask; m != 0; m &= m - 1 {
			c := bits.TrailingZeros32(m)
			a[c] += sign * st[c]
		}
	}
}

// nextStep decodes the next row's step record of a snapshot (the layout add
// writes: a uvarint mask of the counters that moved, then a varint per set
// bit) into st, zero where the mask is clear, and returns the rest of buf
// and the mask.
func nextStep(buf []byte, st *pipeline.Counters) ([]byte, uint32) {
	m64, n := binary.Uvarint(buf)
	buf = buf[n:]
	mask := uint32(m64) // #nosec G115 -- written from a uint32
	*st = pipeline.Counters{}
	for m := mask; m != 0; m &= m - 1 {
		v, n := binary.Varint(buf)
		buf = buf[n:]
		st[bits.TrailingZeros32(m)] = v
	}
	return buf, mask
}

// clampSteps sets the negative steps of st (a counter that went down) to 0.
func clampSteps(st *pipeline.Counters) {
	for c, v := range st {
		st[c] = max(v, 0)
	}
}

// bySeq is the retained snapshot numbered seq.
func (t *windowTable) bySeq(seq uint64) *storedSnapshot {
	return t.retained[seq-t.retained[0].seq]
}
