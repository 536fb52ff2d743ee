// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sparse

import (
	"fmt"

	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// Sequence is the processor's end of the process batches, kept from
// snapshot to snapshot: per host, the number its next batch must have,
// and the run of batches of the snapshot being collected. Hosts are the
// caller's rows, numbered from 0 by AddHost; processes are the caller's
// rows too. It is not safe for concurrent use.
type Sequence struct {
	// expect is the sequence number each host's next batch must have
	// unless it starts a full run; 0: a full batch is due.
	expect []uint64
	runs   []run           // this snapshot's batches per host
	gone   map[uint32]bool // process rows the closing batch lists as departed
	// Unaccounted counts the hosts the last Answered calls found up but
	// whose batches the sequence does not account for.
	Unaccounted int
}

// run is one host's process batches of the snapshot being collected.
type run struct {
	count  int64
	last   uint64 // sequence number of the last batch accepted
	full   bool
	broken bool // a batch was refused
	carry  bool // set by Answered: the run was sparse and complete
}

// AddHost makes room for the next host row: a full batch of it is due.
func (q *Sequence) AddHost() {
	q.expect = append(q.expect, 0)
	q.runs = append(q.runs, run{})
}

// Begin starts collecting a snapshot.
func (q *Sequence) Begin() {
	clear(q.runs)
	clear(q.gone)
	q.Unaccounted = 0
}

// ErrFullBatchDue refuses a batch the sequence does not account for: the
// receiver learns of it from ConsumeMetrics' error and sends the host in
// full next time.
type ErrFullBatchDue struct {
	Host     string
	Seq      uint64
	Expected uint64 // 0: a full batch was due
	Full     bool
}

func (e ErrFullBatchDue) Error() string {
	if e.Expected == 0 {
		return fmt.Sprintf("process batch %d of host %s refused: a full batch of the host is due (docs/pipeline.md, sparse batches)", e.Seq, e.Host)
	}
	return fmt.Sprintf("process batch %d of host %s refused: batch %d was due (lost or reordered; docs/pipeline.md, sparse batches)", e.Seq, e.Host, e.Expected)
}

// Accept checks a process batch's header against its host's sequence: a
// full batch may start the host's run of a snapshot; every other batch
// must be the next number, of the kind the run started with. A refused
// batch breaks the run, and the host needs a full batch.
func (q *Sequence) Accept(host uint32, h snapshot.BatchHeader) error {
	r := &q.runs[host]
	expect := q.expect[host]
	ok := !r.broken && ((h.Full && r.count == 0) || (expect != 0 && h.Seq == expect && (r.count == 0 || r.full == h.Full)))
	if !ok {
		q.Break(host)
		return ErrFullBatchDue{Host: h.Host, Seq: h.Seq, Expected: expect, Full: h.Full}
	}
	r.count++
	r.last, r.full = h.Seq, h.Full
	q.expect[host] = h.Seq + 1
	return nil
}

// Break marks the host's run of this snapshot broken although its batches
// were accepted (one held what the caller could not take): the host did
// not answer, and a full batch of it is due.
func (q *Sequence) Break(host uint32) {
	q.runs[host].broken = true
	q.expect[host] = 0
}

// Depart marks a process the closing batch lists as departed: it is not
// carried.
func (q *Sequence) Depart(process uint32) {
	if q.gone == nil {
		q.gone = map[uint32]bool{}
	}
	q.gone[process] = true
}

// Answered settles a host's answer in the closing batch: a host at 0, or
// whose batches the sequence does not account for (one lost, refused or
// out of order), did not answer and needs a full batch; a complete sparse
// run carries its unlisted processes.
func (q *Sequence) Answered(host uint32, a *snapshot.HostAnswer) bool {
	r := &q.runs[host]
	switch {
	case !a.Up:
	case a.Batches == 0 && r.count == 0 && !r.broken:
		return true // not sequenced: the batches list every process
	case !r.broken && r.count == a.Batches && r.last == a.Sequence:
		r.carry = !r.full
		return true
	default:
		q.Unaccounted++
	}
	q.expect[host] = 0
	return false
}

// Unlisted settles a host the closing batch does not list: if its
// batches came (the closing batch that listed it was lost), it is not
// known to have answered, needs a full batch, and Unlisted reports it.
func (q *Sequence) Unlisted(host uint32) bool {
	if r := &q.runs[host]; r.count > 0 || r.broken {
		q.expect[host] = 0
		return true
	}
	return false
}

// Carries tells whether a process of host that no batch of this snapshot
// listed is carried unchanged: its host's run was sparse and complete,
// and the process did not depart.
func (q *Sequence) Carries(host, process uint32) bool {
	return q.runs[host].carry && !q.gone[process]
}
