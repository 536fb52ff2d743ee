// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"encoding/binary"
	"math/bits"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// The snapshot being ingested: each process's steps since its previous
// sighting, the processes a sparse host's batches left out carried
// unchanged, each session's memory per host, and the records packed by
// session at commit.

// add records one process of the snapshot being ingested.
func (s *store) add(p *snapshot.ProcessSample) error {
	if !s.ingesting {
		return errNoSnapshot
	}
	seq := s.nextSeq
	host := s.hosts.row(p.Host)
	session := p.Session // unattributedSession when an exited resource has none
	if p.Kind == pipeline.KindUnrecorded {
		session = unrecordedSession
	}
	exited := p.Kind != pipeline.KindProcess
	sess := s.sessions.row(pipeline.SessionKey{TmID: p.TmID, ID: session})
	key := processKey{creation: p.Creation, session: sess, pid: p.PID, host: host}
	// Scrapes list processes in much the same order each time: try the
	// row at this position last time before the map.
	var row uint32
	known := false
	if i := len(s.records); i < len(s.prevOrder) {
		if r := s.prevOrder[i]; s.procs.seen[r] != 0 && s.procs.keys[r] == key {
			row, known = r, true
		}
	}
	if !known {
		row, known = s.procs.index[key]
	}
	if !known {
		row = s.addProcess(key, seq)
	} else if s.procs.seen[row] == seq {
		return errDuplicateProcess
	}
	if p.Sparse {
		if !known {
			s.hosts.batches.Break(host)
			return errSparseUnknown{host: p.Host, pid: p.PID}
		}
		s.procs.fill(row, p)
	}

	steps, mask := s.procs.step(row, p, known)
	s.procs.sighted(row, seq, p)

	off := len(s.scratch)
	s.scratch = binary.AppendUvarint(s.scratch, uint64(mask))
	for m := mask; m != 0; m &= m - 1 {
		s.scratch = binary.AppendVarint(s.scratch, steps[bits.TrailingZeros32(m)])
	}
	s.records = append(s.records, pendingRecord{session: sess, row: row, off: uint32(off), size: uint32(len(s.scratch) - off)})

	if mask != 0 {
		s.windows.addSteps(row, mask, &steps)
	}

	if exited {
		return nil
	}
	s.addMemory(sess, host, &s.procs.gauges[row])
	return nil
}

// carryUnchanged adds to the snapshot being committed, as unchanged, every
// process of a sparse host that the previous snapshot saw and that neither
// a batch nor the departures listed.
func (s *store) carryUnchanged() {
	prev := s.nextSeq - 1
	if prev == 0 {
		return
	}
	for row, seen := range s.procs.seen {
		if seen != prev || s.procs.gone[row] || !s.hosts.batches.Carries(s.procs.keys[row].host, uint32(row)) {
			continue
		}
		s.carryRow(uint32(row))
	}
}

// carryRow records a process unchanged: no step, its last memory.
func (s *store) carryRow(row uint32) {
	key := s.procs.keys[row]
	s.procs.carried(row, s.nextSeq)
	off := len(s.scratch)
	s.scratch = append(s.scratch, 0) // a record with an empty mask
	s.records = append(s.records, pendingRecord{session: key.session, row: row, off: uint32(off), size: 1})
	s.addMemory(key.session, key.host, &s.procs.gauges[row])
	s.carried = append(s.carried, row)
}

// addMemory adds a process's memory to its session's on its host.
func (s *store) addMemory(sess, host uint32, g *snapshot.Gauges) {
	mem := g.Memory()
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

// packSnapshot lays the pending records out grouped by session (a counting
// sort: the session count is bounded by the process count).
func (s *store) packSnapshot() *storedSnapshot {
	nSessions := len(s.sessions.keys)
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

// commit closes the snapshot being ingested with its hosts' answers, moves
// every window's old snapshot and trims the ring; computeFigures then reads
// the result.
func (s *store) commit(hosts []snapshot.HostAnswer) error {
	if !s.ingesting {
		return errNoSnapshot
	}
	s.ingesting = false
	s.pendUp, s.pendDown = s.hosts.answers(hosts, s.pendUp[:0], s.pendDown[:0])
	s.carryUnchanged()
	sn := s.packSnapshot()
	s.prevOrder = s.prevOrder[:0]
	for _, r := range s.records {
		s.prevOrder = append(s.prevOrder, r.row)
	}
	s.nextSeq++
	oldest := s.windows.push(sn)

	s.hosts.settle(sn.seq, sn.time, s.pendUp, sn.hostsDown)

	for row, seen := range s.procs.seen {
		if seen != 0 && seen < oldest {
			s.removeProcess(uint32(row))
		}
	}
	return nil
}
