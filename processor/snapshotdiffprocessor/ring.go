// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"time"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/sparse"
)

// memoryGauges are bytes per memory type (pipeline.MemoryTypes).
type memoryGauges [pipeline.NumMemory]int64

// unattributedSession is the session id of exited processes no scrape saw.
const unattributedSession = pipeline.NoSession

// unrecordedSession is the session id of the postmasters' unrecorded CPU
// (docs/pipeline.md, unrecorded resources): stored like an exited process,
// reported per segment in gpotel.unrecorded.cpu.time.
const unrecordedSession = -2

// processKey is a process's identity; the creation time tells pid reuse apart.
type processKey struct {
	creation int64
	session  uint32
	pid      int32
	host     uint32
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

// pendingRecord is a process of the snapshot being ingested.
type pendingRecord struct {
	session uint32
	row     uint32
	off     uint32
	size    uint32
}

var (
	errDuplicateProcess = errors.New("process listed twice in one snapshot")
	errNotNewer         = errors.New("snapshot is not newer than the newest stored one")
	errNoSnapshot       = errors.New("no snapshot is being ingested")
)

// store is the ring buffer of compact snapshots and everything the window
// diffs need. It is not safe for concurrent use; the processor serialises.
type store struct {
	windows   []int64 // ns
	maxWindow int64
	maxPoints int // 0: automatic

	hostNames    []string
	hostIndex    map[string]uint32
	hostAnswered []uint64 // seq of the last snapshot the host answered fully in
	hostDown     []bool   // the host did not answer in the newest snapshot
	// hostReadDelay is how long after the newest snapshot's time the
	// host's processes were read at the latest (ns; 0: not measured).
	hostReadDelay []int64
	// batches checks each host's process batches (sparse batches).
	batches sparse.Sequence

	sessionKeys  []pipeline.SessionKey
	sessionIndex map[pipeline.SessionKey]uint32
	sessionRefs  []int32
	sessionFree  []uint32

	// Process table, one row per process identity still referenced.
	procKeys  []processKey
	procLast  []pipeline.Counters // values at the last sighting
	procKnown []uint32            // counters ever reported for the process
	procSeen  []uint64            // seq of the last sighting; 0 marks a free row
	procGone  []bool              // the last sighting was its exit record
	procSeg   []int32             // content id, for the unattributed exits' figures
	procFirst []uint64            // seq of the first sighting
	procCcnt  []int64             // title command count at the last sighting; 0: none
	procMem   []memoryGauges      // memory at the last sighting, for a process carried unchanged
	// procSample is each process's last sighting whole, kept only for the
	// dense per-process output (emit_process_metrics).
	procSample  []pipeline.ProcessSample
	keepSamples bool
	procFree    []uint32
	procIndex   map[processKey]uint32

	// acc[w] holds, per row, the sum of its steps in (old snapshot, newest].
	acc    [][]int64
	oldSeq []uint64

	ring    []*storedSnapshot
	nextSeq uint64

	// The snapshot being ingested.
	ingesting  bool
	pendTime   int64
	pendDown   []uint32
	pendUp     []uint32
	records    []pendingRecord
	prevOrder  []uint32 // rows in the arrival order of the previous snapshot
	scratch    []byte
	memIndex   map[uint64]int32
	memBySH    []sessionHostMemory
	sortCounts []uint32
	// carried are the rows the last commit carried unchanged: listed by
	// neither a sparse batch nor the departures.
	carried []uint32
}

type sessionHostMemory struct {
	session uint32
	host    uint32
	memory  memoryGauges
}

func newStore(windows []time.Duration, maxPoints int) *store {
	s := &store{
		maxPoints:    maxPoints,
		hostIndex:    map[string]uint32{},
		sessionIndex: map[pipeline.SessionKey]uint32{},
		procIndex:    map[processKey]uint32{},
		memIndex:     map[uint64]int32{},
		nextSeq:      1,
	}
	for _, w := range windows {
		s.windows = append(s.windows, int64(w))
		s.maxWindow = max(s.maxWindow, int64(w))
	}
	s.acc = make([][]int64, len(windows))
	s.oldSeq = make([]uint64, len(windows))
	return s
}

// newestTime is the time of the newest stored snapshot, 0 when empty.
func (s *store) newestTime() int64 {
	if len(s.ring) == 0 {
		return 0
	}
	return s.ring[len(s.ring)-1].time
}

// begin starts ingesting a snapshot taken at t (unix ns).
func (s *store) begin(t int64) error {
	if len(s.ring) > 0 && t <= s.newestTime() {
		return errNotNewer
	}
	s.ingesting = true
	s.pendTime = t
	s.records = s.records[:0]
	s.scratch = s.scratch[:0]
	clear(s.memIndex)
	s.memBySH = s.memBySH[:0]
	s.batches.Begin()
	s.carried = s.carried[:0]
	return nil
}

// acceptBatch checks a process batch's header against its host's
// sequence (sparse.Sequence.Accept).
func (s *store) acceptBatch(h pipeline.BatchHeader) error {
	if !s.ingesting {
		return errNoSnapshot
	}
	return s.batches.Accept(s.hostRow(h.Host), h)
}

// depart marks a process the closing batch lists as departed: it is not
// carried. One the store does not hold is nothing to forget.
func (s *store) depart(host string, tmID int64, d pipeline.Departure) {
	h, ok := s.hostIndex[host]
	if !ok {
		return
	}
	sess, ok := s.sessionIndex[pipeline.SessionKey{TmID: tmID, ID: d.Session}]
	if !ok {
		return
	}
	if row, ok := s.procIndex[processKey{creation: d.Creation, session: sess, pid: int32(d.PID), host: h}]; ok { // #nosec G115 -- a pid
		s.batches.Depart(row)
	}
}

// carryUnchanged adds to the snapshot being committed, as unchanged, every
// process of a sparse host that the previous snapshot saw and that neither
// a batch nor the departures listed.
func (s *store) carryUnchanged() {
	prev := s.nextSeq - 1
	if prev == 0 {
		return
	}
	for row, seen := range s.procSeen {
		if seen != prev || s.procGone[row] || !s.batches.Carries(s.procKeys[row].host, uint32(row)) {
			continue
		}
		s.carryRow(uint32(row))
	}
}

// carryRow records a process unchanged: no step, its last memory.
func (s *store) carryRow(row uint32) {
	key := s.procKeys[row]
	s.procSeen[row] = s.nextSeq
	off := len(s.scratch)
	s.scratch = append(s.scratch, 0) // a record with an empty mask
	s.records = append(s.records, pendingRecord{session: key.session, row: row, off: uint32(off), size: 1})
	s.addMemory(key.session, key.host, &s.procMem[row])
	s.carried = append(s.carried, row)
}

// addMemory adds a process's memory to its session's on its host.
func (s *store) addMemory(sess, host uint32, mem *memoryGauges) {
	shKey := uint64(sess)<<32 | uint64(host)
	i, ok := s.memIndex[shKey]
	if !ok {
		i = int32(len(s.memBySH))
		s.memIndex[shKey] = i
		s.memBySH = append(s.memBySH, sessionHostMemory{session: sess, host: host})
	}
	for k, v := range mem {
		s.memBySH[i].memory[k] += v
	}
}

// restartTimeline forgets the window history and keeps every process's
// last values: the next snapshot starts a new timeline, whatever its time.
func (s *store) restartTimeline() {
	clear(s.ring)
	s.ring = s.ring[:0]
	for w := range s.acc {
		clear(s.acc[w])
		s.oldSeq[w] = s.nextSeq - 1
	}
}

func (s *store) hostRow(name string) uint32 {
	if row, ok := s.hostIndex[name]; ok {
		return row
	}
	row := uint32(len(s.hostNames))
	s.hostNames = append(s.hostNames, name)
	s.hostIndex[name] = row
	s.hostAnswered = append(s.hostAnswered, 0)
	s.hostDown = append(s.hostDown, false)
	s.hostReadDelay = append(s.hostReadDelay, 0)
	s.batches.AddHost()
	return row
}

func (s *store) sessionRow(key pipeline.SessionKey) uint32 {
	if row, ok := s.sessionIndex[key]; ok {
		return row
	}
	var row uint32
	if n := len(s.sessionFree); n > 0 {
		row = s.sessionFree[n-1]
		s.sessionFree = s.sessionFree[:n-1]
		s.sessionKeys[row] = key
	} else {
		row = uint32(len(s.sessionKeys))
		s.sessionKeys = append(s.sessionKeys, key)
		s.sessionRefs = append(s.sessionRefs, 0)
	}
	s.sessionIndex[key] = row
	return row
}

func (s *store) releaseSession(row uint32) {
	s.sessionRefs[row]--
	if s.sessionRefs[row] > 0 {
		return
	}
	delete(s.sessionIndex, s.sessionKeys[row])
	s.sessionKeys[row] = pipeline.SessionKey{}
	s.sessionFree = append(s.sessionFree, row)
}

func (s *store) allocRow(key processKey) uint32 {
	var row uint32
	if n := len(s.procFree); n > 0 {
		row = s.procFree[n-1]
		s.procFree = s.procFree[:n-1]
		s.procKeys[row] = key
	} else {
		row = uint32(len(s.procKeys))
		s.procKeys = append(s.procKeys, key)
		s.procLast = append(s.procLast, pipeline.Counters{})
		s.procKnown = append(s.procKnown, 0)
		s.procSeen = append(s.procSeen, 0)
		s.procGone = append(s.procGone, false)
		s.procSeg = append(s.procSeg, 0)
		s.procFirst = append(s.procFirst, 0)
		s.procCcnt = append(s.procCcnt, 0)
		s.procMem = append(s.procMem, memoryGauges{})
		if s.keepSamples {
			s.procSample = append(s.procSample, pipeline.ProcessSample{})
		}
		for w := range s.acc {
			s.acc[w] = append(s.acc[w], make([]int64, pipeline.NumCounters)...)
		}
	}
	s.procIndex[key] = row
	s.sessionRefs[key.session]++
	return row
}

func (s *store) freeRow(row uint32) {
	key := s.procKeys[row]
	delete(s.procIndex, key)
	s.releaseSession(key.session)
	s.procKeys[row] = processKey{}
	s.procLast[row] = pipeline.Counters{}
	s.procKnown[row] = 0
	s.procSeen[row] = 0
	s.procGone[row] = false
	s.procSeg[row] = 0
	s.procFirst[row] = 0
	s.procCcnt[row] = 0
	s.procMem[row] = memoryGauges{}
	if s.keepSamples {
		s.procSample[row] = pipeline.ProcessSample{}
	}
	for w := range s.acc {
		clear(s.acc[w][int(row)*pipeline.NumCounters : int(row+1)*pipeline.NumCounters])
	}
	s.procFree = append(s.procFree, row)
}

// add records one process of the snapshot being ingested.
func (s *store) add(p *pipeline.ProcessSample) error {
	if !s.ingesting {
		return errNoSnapshot
	}
	seq := s.nextSeq
	host := s.hostRow(p.Host)
	session := p.Session // unattributedSession when an exited resource has none
	if p.Kind == pipeline.KindUnrecorded {
		session = unrecordedSession
	}
	exited := p.Kind != pipeline.KindProcess
	sess := s.sessionRow(pipeline.SessionKey{TmID: p.TmID, ID: session})
	key := processKey{creation: p.Creation, session: sess, pid: p.PID, host: host}
	// Scrapes list processes in much the same order each time: try the
	// row at this position last time before the map.
	var row uint32
	known := false
	if i := len(s.records); i < len(s.prevOrder) {
		if r := s.prevOrder[i]; s.procSeen[r] != 0 && s.procKeys[r] == key {
			row, known = r, true
		}
	}
	if !known {
		row, known = s.procIndex[key]
	}
	if !known {
		row = s.allocRow(key)
		s.procFirst[row] = seq
	} else if s.procSeen[row] == seq {
		return errDuplicateProcess
	}

	// A counter first reported after the process's first sighting starts
	// as a baseline: what it counted before is outside what we saw.
	var steps pipeline.Counters
	var mask uint32
	last := &s.procLast[row]
	for m := p.CounterMask(); m != 0; m &= m - 1 {
		c := bits.TrailingZeros32(m)
		bit := uint32(1) << c
		v := p.Values[c]
		if !known || s.procKnown[row]&bit != 0 {
			steps[c] = v - last[c]
		}
		last[c] = v
		s.procKnown[row] |= bit
		if steps[c] != 0 {
			mask |= bit
		}
	}
	s.procSeen[row] = seq
	s.procGone[row] = exited
	s.procSeg[row] = p.Segment
	if !exited { // an exit record has no title: keep the last one seen
		s.procCcnt[row] = p.CommandCount()
	}

	off := len(s.scratch)
	s.scratch = binary.AppendUvarint(s.scratch, uint64(mask))
	for m := mask; m != 0; m &= m - 1 {
		s.scratch = binary.AppendVarint(s.scratch, steps[bits.TrailingZeros32(m)])
	}
	s.records = append(s.records, pendingRecord{session: sess, row: row, off: uint32(off), size: uint32(len(s.scratch) - off)})

	if mask != 0 {
		base := int(row) * pipeline.NumCounters
		for w := range s.acc {
			a := s.acc[w][base : base+pipeline.NumCounters]
			for m := mask; m != 0; m &= m - 1 {
				c := bits.TrailingZeros32(m)
				a[c] += steps[c]
			}
		}
	}

	if exited {
		return nil
	}
	s.procMem[row] = p.Memory()
	s.addMemory(sess, host, &s.procMem[row])
	if s.keepSamples {
		s.procSample[row] = *p
	}
	return nil
}

// commit closes the snapshot being ingested with its hosts' answers, moves
// every window's old snapshot and trims the ring; computeFigures then reads
// the result.
func (s *store) commit(hosts []pipeline.HostAnswer) error {
	if !s.ingesting {
		return errNoSnapshot
	}
	s.ingesting = false
	s.pendDown = s.pendDown[:0]
	s.pendUp = s.pendUp[:0]
	rows := make([]uint32, len(hosts))
	for i := range hosts {
		rows[i] = s.hostRow(hosts[i].Host)
	}
	listed := make([]bool, len(s.hostNames))
	clear(s.hostReadDelay)
	for i, row := range rows {
		listed[row] = true
		s.hostReadDelay[row] = hosts[i].ReadDelay
		if s.batches.Answered(row, &hosts[i]) {
			s.pendUp = append(s.pendUp, row)
		} else {
			s.pendDown = append(s.pendDown, row)
		}
	}
	// A host whose batches came but whose answer did not (the closing
	// batch was lost) is not known to have answered.
	for row := range s.hostNames {
		if !listed[row] && s.batches.Unlisted(uint32(row)) {
			s.pendDown = append(s.pendDown, uint32(row))
		}
	}
	s.carryUnchanged()
	sn := s.packSnapshot()
	s.prevOrder = s.prevOrder[:0]
	for _, r := range s.records {
		s.prevOrder = append(s.prevOrder, r.row)
	}
	s.nextSeq++
	s.ring = append(s.ring, sn)

	clear(s.hostDown)
	for _, h := range sn.hostsDown {
		s.hostDown[h] = true
	}
	for _, h := range s.pendUp {
		s.hostAnswered[h] = sn.seq
	}

	drop := s.trimCount()
	times := make([]int64, len(s.ring)-drop)
	for i, r := range s.ring[drop:] {
		times[i] = r.time
	}
	for w, window := range s.windows {
		s.moveOld(w, s.ring[drop+nearestOld(times, window)].seq)
	}
	if drop > 0 {
		clear(s.ring[:drop])
		s.ring = append(s.ring[:0], s.ring[drop:]...)
	}
	oldest := s.ring[0].seq
	for row, seen := range s.procSeen {
		if seen != 0 && seen < oldest {
			s.freeRow(uint32(row))
		}
	}
	return nil
}

// packSnapshot lays the pending records out grouped by session (a counting
// sort: the session count is bounded by the process count).
func (s *store) packSnapshot() *storedSnapshot {
	nSessions := len(s.sessionKeys)
	if cap(s.sortCounts) < nSessions+1 {
		s.sortCounts = make([]uint32, nSessions+1)
	}
	pos := s.sortCounts[:nSessions+1]
	clear(pos)
	for _, r := range s.records {
		pos[r.session+1]++
	}
	sn := &storedSnapshot{seq: s.nextSeq, time: s.pendTime}
	for sess := 0; sess < nSessions; sess++ {
		if pos[sess+1] > 0 {
			sn.bySession = append(sn.bySession, sessionSpan{session: uint32(sess), first: pos[sess]})
		}
		pos[sess+1] += pos[sess]
	}
	sn.bySession = append([]sessionSpan(nil), sn.bySession...)
	sn.rows = make([]uint32, len(s.records))
	order := make([]int32, len(s.records))
	for i, r := range s.records {
		at := pos[r.session]
		pos[r.session]++
		sn.rows[at] = r.row
		order[at] = int32(i)
	}
	sn.steps = make([]byte, 0, len(s.scratch))
	for _, i := range order {
		r := s.records[i]
		sn.steps = append(sn.steps, s.scratch[r.off:r.off+r.size]...)
	}
	sn.hostsDown = append([]uint32(nil), s.pendDown...)
	return sn
}

// trimCount is how many of the oldest snapshots the ring no longer needs.
func (s *store) trimCount() int {
	n := len(s.ring)
	if s.maxPoints > 0 {
		return max(0, n-s.maxPoints)
	}
	if n <= minStoredPoints {
		return 0
	}
	// Future old snapshots are never older than the newest one that is at
	// least the longest window old.
	limit := s.ring[n-1].time - s.maxWindow
	for i := n - 2; i >= 0; i-- {
		if s.ring[i].time <= limit {
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
func (s *store) moveOld(w int, newOld uint64) {
	prev := s.oldSeq[w]
	base := s.ring[0].seq
	for seq := prev + 1; seq <= newOld; seq++ {
		s.applySteps(s.ring[seq-base], s.acc[w], -1)
	}
	for seq := newOld + 1; seq <= prev; seq++ {
		s.applySteps(s.ring[seq-base], s.acc[w], +1)
	}
	s.oldSeq[w] = newOld
}

func (s *store) applySteps(sn *storedSnapshot, acc []int64, sign int64) {
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

func (s *store) snapshotBySeq(seq uint64) *storedSnapshot {
	return s.ring[seq-s.ring[0].seq]
}
