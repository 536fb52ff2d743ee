// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"sync"
	"time"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// exitBuffer keeps the final records of exited database processes, oldest
// first, each with a sequence number. Reading never removes a record: only
// size (oldest first) and age do, so a retried read returns the same records.
type exitBuffer struct {
	mu      sync.Mutex
	epoch   uint64
	ring    []*gpotelv1.ExitRecord
	head    int    // index of the oldest record
	n       int    // records held
	next    uint64 // sequence of the next record added; the first is 1
	maxAge  time.Duration
	dropped uint64 // records that left before their age: buffer full
	expired uint64 // records older than maxAge
	// overruns are the times the kernel dropped exit notifications before
	// they reached the buffer (ENOBUFS): how many records is unknown.
	overruns uint64
}

func newExitBuffer(size int, maxAge time.Duration, epoch uint64) *exitBuffer {
	return &exitBuffer{epoch: epoch, ring: make([]*gpotelv1.ExitRecord, size), next: 1, maxAge: maxAge}
}

// add appends r (its Sequence is set here) after dropping the records too old
// at r's exit time; a full buffer drops its oldest. It returns how many left
// for each reason.
func (b *exitBuffer) add(r *gpotelv1.ExitRecord) (full, expired int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	expired = b.expire(time.Unix(0, r.GetExitTimeUnixNano()))
	if b.n == len(b.ring) {
		full = 1
		b.ring[b.head] = nil
		b.head = (b.head + 1) % len(b.ring)
		b.n--
		b.dropped++
	}
	r.Sequence = b.next
	b.next++
	b.ring[(b.head+b.n)%len(b.ring)] = r
	b.n++
	return full, expired
}

// expire drops the records received before now - maxAge and counts them.
func (b *exitBuffer) expire(now time.Time) int {
	cutoff := now.Add(-b.maxAge).UnixNano()
	n := 0
	for b.n > 0 && b.ring[b.head].GetExitTimeUnixNano() < cutoff {
		b.ring[b.head] = nil
		b.head = (b.head + 1) % len(b.ring)
		b.n--
		b.expired++
		n++
	}
	return n
}

// exitPage is one answer of since.
type exitPage struct {
	records    []*gpotelv1.ExitRecord
	nextCursor uint64
	missed     uint64
	more       bool
	expired    int // records this call found too old and dropped
	overruns   uint64
}

// since returns up to limit records from cursor on. A cursor of another epoch
// starts at the oldest record held; one older than that reports the gap as
// missed; one beyond the newest returns nothing.
func (b *exitBuffer) since(epoch, cursor uint64, limit int, now time.Time) exitPage {
	b.mu.Lock()
	defer b.mu.Unlock()
	var p exitPage
	p.expired = b.expire(now)
	oldest := b.next - uint64(b.n) // #nosec G115 -- n is a non-negative length
	switch {
	case epoch != b.epoch:
		cursor = oldest
	case cursor < oldest:
		p.missed = oldest - cursor
		cursor = oldest
	case cursor > b.next:
		cursor = b.next
	}
	count := b.next - cursor
	if count > uint64(limit) { // #nosec G115 -- limit is positive
		count, p.more = uint64(limit), true // #nosec G115
	}
	p.records = make([]*gpotelv1.ExitRecord, 0, count)
	start := b.head + int(cursor-oldest) // #nosec G115 -- bounded by n
	for i := range int(count) {          // #nosec G115 -- bounded by n
		p.records = append(p.records, b.ring[(start+i)%len(b.ring)])
	}
	p.nextCursor = cursor + count
	p.overruns = b.overruns
	return p
}

// overrun counts one time the kernel dropped exit notifications.
func (b *exitBuffer) overrun() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.overruns++
}

// losses returns the records dropped for size and for age so far.
func (b *exitBuffer) losses() (dropped, expired uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped, b.expired
}
