// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"errors"
	"fmt"
	"time"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// unattributedSession is the session id of exited processes no scrape saw.
const unattributedSession = snapshot.NoSession

// unrecordedSession is the session id of the postmasters' unrecorded CPU
// (docs/pipeline.md, unrecorded resources): stored like an exited process,
// reported per segment in gpotel.unrecorded.cpu.time.
const unrecordedSession = -2

var (
	errDuplicateProcess = errors.New("process listed twice in one snapshot")
	errNotNewer         = errors.New("snapshot is not newer than the newest stored one")
	errNoSnapshot       = errors.New("no snapshot is being ingested")
)

// errSparseUnknown refuses a sparse entry of a process the store does not
// hold: what it leaves out is nowhere to carry from. Its host's run
// breaks, so that the host is sent in full next time.
type errSparseUnknown struct {
	host string
	pid  int32
}

func (e errSparseUnknown) Error() string {
	return fmt.Sprintf("host %s: process %d sent with only its changed figures, but the processor holds no earlier sighting of it; a full batch of the "+
		"host is due (docs/pipeline.md, sparse batches)", e.host, e.pid)
}

// store is every table the window figures need: hosts, sessions,
// processes, the retained snapshots with the windows' steps, and the
// snapshot being ingested. It is not safe for concurrent use; the
// processor serialises.
type store struct {
	hosts    hostTable
	sessions sessionTable
	procs    processTable
	windows  windowTable
	nextSeq  uint64

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

// pendingRecord is a process of the snapshot being ingested.
type pendingRecord struct {
	session uint32
	row     uint32
	off     uint32
	size    uint32
}

// sessionHostMemory is one session's memory on one host in the newest
// snapshot.
type sessionHostMemory struct {
	session uint32
	host    uint32
	memory  memoryGauges
}

func newStore(windows []time.Duration, maxPoints int) *store {
	return &store{
		hosts:    newHostTable(),
		sessions: newSessionTable(),
		procs:    newProcessTable(),
		windows:  newWindowTable(windows, maxPoints),
		memIndex: map[uint64]int32{},
		nextSeq:  1,
	}
}

// begin starts ingesting a snapshot taken at t (unix ns).
func (s *store) begin(t int64) error {
	if len(s.windows.retained) > 0 && t <= s.windows.newestTime() {
		return errNotNewer
	}
	s.ingesting = true
	s.pendTime = t
	s.records = s.records[:0]
	s.scratch = s.scratch[:0]
	clear(s.memIndex)
	s.memBySH = s.memBySH[:0]
	s.hosts.batches.Begin()
	s.carried = s.carried[:0]
	return nil
}

// acceptBatch checks a process batch's header against its host's
// sequence (sparse.Sequence.Accept).
func (s *store) acceptBatch(h snapshot.BatchHeader) error {
	if !s.ingesting {
		return errNoSnapshot
	}
	return s.hosts.batches.Accept(s.hosts.row(h.Host), h)
}

// depart marks a process the closing batch lists as departed: it is not
// carried. One the store does not hold is nothing to forget.
func (s *store) depart(host string, tmID int64, d snapshot.Departure) {
	h, ok := s.hosts.index[host]
	if !ok {
		return
	}
	sess, ok := s.sessions.index[pipeline.SessionKey{TmID: tmID, ID: d.Session}]
	if !ok {
		return
	}
	if row, ok := s.procs.index[processKey{creation: d.Creation, session: sess, pid: int32(d.PID), host: h}]; ok { // #nosec G115 -- a pid
		s.hosts.batches.Depart(row)
	}
}

// restartTimeline forgets the window history and keeps every process's
// last values: the next snapshot starts a new timeline, whatever its time.
func (s *store) restartTimeline() {
	s.windows.restart(s.nextSeq - 1)
}

// addProcess gives a process first seen in the snapshot seq a row, its
// session's reference and room in the windows.
func (s *store) addProcess(key processKey, seq uint64) uint32 {
	row, grown := s.procs.add(key, seq)
	if grown {
		s.windows.addRow()
	}
	s.sessions.hold(key.session)
	return row
}

// removeProcess frees a process row and its session's reference.
func (s *store) removeProcess(row uint32) {
	s.sessions.release(s.procs.keys[row].session)
	s.procs.remove(row)
	s.windows.clearRow(row)
}
