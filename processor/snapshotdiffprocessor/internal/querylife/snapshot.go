// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package querylife

import (
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// Activity is what a session resource's gpotel.session.info says about the
// session's current (or last) query.
type Activity struct {
	PID          int64 // gpotel.session.pid: the head process
	System       bool  // not a client session: it gets no session event
	Own          bool  // the collector's own connection: no event of it or its queries
	Running      bool
	Aborted      bool  // idle in an aborted transaction
	Waiting      bool  // waiting for a lock
	QueryStart   int64 // unix ns; 0 when NULL
	StateChange  int64 // unix ns; 0 when NULL
	BackendStart int64 // unix ns; 0 when NULL
	Text         string
	Who          events.SessionWho
	// Spill is the workfiles the session's commands hold now (Greenplum),
	// from the receiver's latest read; nil without one.
	Spill []snapshot.Spill
	// Blocker is the session holding the lock it waits for; 0: none known.
	Blocker int64
	// Vmem is Greenplum's vmem account of the session over every segment; 0: none.
	Vmem int64
}

// HostEndings are the endings of one endings resource.
type HostEndings struct {
	snapshot.HostEndings
	TmID int64
}

// Snapshot is what the tracker reads of the newest committed snapshot.
type Snapshot struct {
	Seq  uint64 // its sequence number: one more than the previous one's
	Time int64  // unix ns
	// Prev is the previous retained snapshot's time; 0 when this one is
	// its timeline's only one.
	Prev       int64
	Activities map[pipeline.SessionKey]Activity
	Endings    []HostEndings
	Hosts      Hosts
	Processes  Processes
}

// Hosts are the cluster's hosts by host row, as Step.Process.Host names them.
type Hosts struct {
	Names []string
	Down  []bool // the host did not answer in this snapshot
	// DownSince is when a host that is down stopped answering: the first
	// snapshot of its silence (unix ns).
	DownSince []int64
}

// Processes is the snapshot's processes as the caller's tables hold them:
// a session's or a process's row stays its own while it lives.
type Processes interface {
	// Sessions is the number of session rows.
	Sessions() int
	// SessionRow is a session's row; false: no process of it is held.
	SessionRow(key pipeline.SessionKey) (uint32, bool)
	// HeadCommandCount is the title command count of the session's process
	// pid on the coordinator in this snapshot; 0 when none.
	HeadCommandCount(key pipeline.SessionKey, pid int64) int64
	// SessionMemory is the resident memory of the session's processes in
	// this snapshot.
	SessionMemory(key pipeline.SessionKey) int64
	// Steps calls yield for every process this snapshot read, with its
	// step since its previous reading; step is reused between calls.
	Steps(yield func(step *Step))
}

// ProcessID is a process's identity: a row reused by another process
// is told apart by it.
type ProcessID struct {
	Creation int64  // unix ns
	Session  uint32 // session row
	PID      int32
	Host     uint32 // host row
}

// Step is one process as this snapshot read it.
type Step struct {
	Row          uint32 // the process's row
	Process      ProcessID
	Segment      int32 // content id; -1: the coordinator
	CommandCount int64 // its title's; 0: none
	Known        uint32
	// ReadAt is when it was read: the snapshot's time plus its host's read
	// delay (an exit record's totals were final before the scrape).
	ReadAt int64
	// Counters are what it used since its previous reading (its creation
	// when none), never negative.
	Counters pipeline.Counters
}

// Figures are one query as written after a snapshot.
type Figures struct {
	Session                  pipeline.SessionKey
	CommandCount, Start, End int64 // End is 0 while it runs
	Text                     string
	Totals                   pipeline.Counters
	Known                    uint32 // the counters some process of it reported (bit per Figure)
	Partial                  bool
	Spill                    *pipeline.QuerySpill  // nil until a read saw it hold workfiles
	Segments                 []pipeline.SegmentUse // by host row, then content id
}

// Work is what the tracker writes after a snapshot: every query to write
// figures of, and the events of the queries and sessions that finished.
// The events' skew is the caller's to compute from their segments.
type Work struct {
	Queries  []Figures
	Finished []events.FinishedQuery
	Ended    []events.EndedSession
	// IgnoredEndings counts the log records and exits of no session
	// followed, or of another backend than the session's.
	IgnoredEndings int
}
