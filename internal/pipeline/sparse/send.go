// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sparse

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"sync"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// Sender is the receiver's end of the process batches, kept from scrape
// to scrape: per host, its batch sequence and what it last sent of each
// process. A host gets a full batch when it has no memory: the first
// scrape, the first after a restart, and after any scrape it did not
// answer in (an agent failure, or a batch the next consumer refused).
type Sender struct {
	enc   *snapshot.ProcessEncoder
	next  consumer.Metrics
	seed  maphash.Seed
	dense bool // every batch full: every process every snapshot
	// figureLevel: a changed process carries only its changed figures;
	// false when the encoder cannot mark such an entry (process.info off).
	figureLevel bool

	mu    sync.Mutex
	hosts map[string]*sentHost
	tick  uint64
}

// NewSender sends through enc to next; dense sends every host in full
// every snapshot.
func NewSender(enc *snapshot.ProcessEncoder, next consumer.Metrics, dense bool) *Sender {
	return &Sender{enc: enc, next: next, seed: maphash.MakeSeed(), dense: dense, figureLevel: enc.MarksSparse(), hosts: map[string]*sentHost{}}
}

// Outgoing sends one snapshot's process batches (docs/pipeline.md,
// rule 1) and stamps its closing batch. Safe for concurrent use by the
// hosts' emission workers, one worker per host.
type Outgoing struct {
	Time time.Time
	TmID int64
	s    *Sender
	tick uint64
}

// Snapshot starts sending the snapshot taken at t.
func (s *Sender) Snapshot(t time.Time, tmID int64) *Outgoing {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick++
	return &Outgoing{Time: t, TmID: tmID, s: s, tick: s.tick}
}

// Timestamp is the time every point of the snapshot carries.
func (o *Outgoing) Timestamp() pcommon.Timestamp { return pcommon.NewTimestampFromTime(o.Time) }

// host returns the host's memory, starting its snapshot on first use.
func (o *Outgoing) host(name string) *sentHost {
	o.s.mu.Lock()
	defer o.s.mu.Unlock()
	hs := o.s.hosts[name]
	if hs == nil {
		hs = &sentHost{}
		o.s.hosts[name] = hs
	}
	if hs.tick != o.tick {
		hs.tick, hs.batches, hs.refused, hs.departed = o.tick, 0, false, nil
		hs.asked, hs.carry, hs.held, hs.accounted = 0, false, 0, 0
		hs.full = hs.index == nil || o.s.dense
		if hs.index == nil {
			hs.forget()
		}
	}
	return hs
}

// Sent is what Send did with one answer.
type Sent struct {
	Written   int // processes written into resources the filters let through
	Unchanged int // processes left out: nothing changed since last sent
}

// Send hands one agent answer of host on as one process batch: its batch
// resource, then the entries whose figures changed since the host last
// sent them (all of them when a full batch is due). It always sends,
// even without a changed process, so that every host that answers sends
// at least one batch per snapshot. An error means the batch did not
// reach the pipeline: the host closes as not answered and is sent in
// full next time. Send reorders entries; order is scratch space the
// caller may reuse.
func (o *Outgoing) Send(ctx context.Context, host string, entries []snapshot.ProcessEntry, order []int32) (Sent, []int32, error) {
	hs := o.host(host)
	var sent Sent
	changed := entries[:0]
	for i := range entries {
		e := entries[i]
		if !hs.remember(o.s.seed, o.tick, o.s.figureLevel, &e) {
			sent.Unchanged++
			continue
		}
		changed = append(changed, e)
	}
	hs.seq++
	hs.batches++
	md := pmetric.NewMetrics()
	rms := md.ResourceMetrics()
	ts := o.Timestamp()
	snapshot.AppendBatchHeader(rms, o.s.enc.Scope(), ts, snapshot.BatchHeader{Host: host, TmID: o.TmID, Seq: hs.seq, Full: hs.full})
	sent.Written, order = o.s.enc.Append(rms, &snapshot.ProcessBatch{Time: ts, TmID: o.TmID, Host: host, Kind: pipeline.KindProcess, Entries: changed}, order)
	err := o.s.next.ConsumeMetrics(ctx, md)
	if err != nil {
		hs.refused = true
	}
	return sent, order, err
}

// Remembers tells whether the Sender keeps what it last sent of host's
// processes and sends it sparse: only then may an answer leave out the
// processes that did not change (docs/pipeline.md, the agent leaves out
// what did not change).
func (o *Outgoing) Remembers(host string) bool {
	o.s.mu.Lock()
	defer o.s.mu.Unlock()
	hs := o.s.hosts[host]
	return !o.s.dense && hs != nil && hs.index != nil
}

// Listing fingerprints, in order, the processes a host is asked about in
// one snapshot (Outgoing.Carries compares it with the host's last one).
type Listing struct {
	h   maphash.Hash
	buf [33]byte
}

// NewListing starts a host's listing.
func (o *Outgoing) NewListing() *Listing {
	l := &Listing{}
	l.h.SetSeed(o.s.seed)
	return l
}

// Add appends one process asked about.
func (l *Listing) Add(pid, session, segment int64, backendType string, system bool) {
	binary.LittleEndian.PutUint64(l.buf[0:], uint64(pid))      // #nosec G115 -- bits
	binary.LittleEndian.PutUint64(l.buf[8:], uint64(session))  // #nosec G115 -- bits
	binary.LittleEndian.PutUint64(l.buf[16:], uint64(segment)) // #nosec G115 -- bits
	binary.LittleEndian.PutUint64(l.buf[24:], uint64(len(backendType)))
	l.buf[32] = 0
	if system {
		l.buf[32] = 1
	}
	_, _ = l.h.Write(l.buf[:])
	_, _ = l.h.WriteString(backendType)
}

// Sum64 is the listing's fingerprint.
func (l *Listing) Sum64() uint64 { return l.h.Sum64() }

// Carries records what host is asked about in this snapshot (its Listing)
// and tells whether its unchanged processes are carried as a whole: when
// every answer is to leave them out (leaveOut), the Sender remembers the
// host, and the host is asked about exactly the processes of its last
// snapshot, each of them is answered (Send), gone or left out (Carry), and
// only the answered and the gone are visited. The answered, gone and left
// out must add up to the processes the Sender holds of the host, or it
// closes as not answered. Call it before the host's answers.
func (o *Outgoing) Carries(host string, listing uint64, leaveOut bool) bool {
	hs := o.host(host)
	hs.asked, hs.held = listing, len(hs.index)
	hs.carry = leaveOut && !hs.full && listing != 0 && listing == hs.listing
	return hs.carry
}

// ErrNotCarried says that Carry was called for a host whose unchanged
// processes are not carried as a whole this snapshot.
type ErrNotCarried struct{ Host string }

func (e ErrNotCarried) Error() string {
	return fmt.Sprintf("host %s: its unchanged processes are not carried as a whole in this snapshot", e.Host)
}

// Carry takes one answer of a host that Carries said yes to: how many
// processes the agent left out as unchanged, carried without being
// visited, and the asked processes that are gone (exited, or answered
// without a stat), which depart. It returns the processes carried.
func (o *Outgoing) Carry(host string, leftOut int, gone []int64) (int, error) {
	hs := o.host(host)
	if !hs.carry {
		hs.refused = true
		return 0, ErrNotCarried{Host: host}
	}
	hs.accounted += leftOut
	for _, pid := range gone {
		slot, held := hs.index[pid]
		if !held || hs.slots[slot].tick == o.tick {
			continue // not held, or one this snapshot answered: not held before it
		}
		p := &hs.slots[slot]
		hs.departed = append(hs.departed, snapshot.Departure{Session: p.session, PID: pid, Creation: p.creation})
		delete(hs.index, pid)
		hs.free = append(hs.free, slot)
		hs.accounted++
	}
	return leftOut, nil
}

// ErrNotKept says that an answer left out a process the Sender cannot
// carry: it does not know it as sent, or knows it in another session or
// with other attributes. The host is sent in full next time.
type ErrNotKept struct {
	Host string
	PID  int64
}

func (e ErrNotKept) Error() string {
	return fmt.Sprintf("host %s: the agent left out pid %d as unchanged, which the receiver did not send as it is", e.Host, e.PID)
}

// Keep takes the processes of host that its agent answered unchanged
// since the answer the Sender last sent of them (each entry's Process
// holds its pid only): the snapshot answered for them, and, as for any
// unchanged process, no batch lists them. It counts them; an error means
// one cannot be carried, and the host is sent in full next time.
func (o *Outgoing) Keep(host string, entries []snapshot.ProcessEntry) (int, error) {
	hs := o.host(host)
	for i := range entries {
		e := &entries[i]
		slot, known := hs.index[e.Process.PID]
		if !known || hs.full {
			hs.refused = true
			return i, ErrNotKept{Host: host, PID: e.Process.PID}
		}
		last := &hs.slots[slot]
		if last.session != e.Session || last.info != hashInfo(o.s.seed, e) {
			hs.refused = true
			return i, ErrNotKept{Host: host, PID: e.Process.PID}
		}
		last.tick = o.tick
	}
	return len(entries), nil
}

// Close stamps the closing batch: a host whose batch was refused did not
// answer, whatever its agent said; each host's batch count and last
// sequence number; the departures of the hosts that answered. It then
// forgets every host that did not answer, so it is sent in full next time.
func (o *Outgoing) Close(c *snapshot.Closing) {
	c.Time = o.Time
	o.s.mu.Lock()
	defer o.s.mu.Unlock()
	listed := make(map[string]bool, len(c.Hosts))
	for i := range c.Hosts {
		h := &c.Hosts[i]
		listed[h.Host] = true
		hs := o.s.hosts[h.Host]
		if hs == nil || hs.tick != o.tick {
			delete(o.s.hosts, h.Host)
			continue
		}
		if hs.refused || (hs.carry && hs.accounted != hs.held) {
			h.Up = false // refused, or some process left out that the Sender does not hold
		}
		h.Batches, h.Sequence = hs.batches, hs.seq
		if !h.Up {
			hs.index = nil
			continue
		}
		hs.listing = hs.asked
		if gone := hs.departures(o.tick); len(gone) > 0 {
			c.Departed = append(c.Departed, snapshot.HostDepartures{Host: h.Host, Processes: gone})
		}
	}
	for name := range o.s.hosts {
		if !listed[name] {
			delete(o.s.hosts, name)
		}
	}
}

// sentProcess is what the receiver last sent of one process: every
// figure's bits, to tell which changed, not to diff them.
type sentProcess struct {
	values   [pipeline.NumFigures]uint64
	present  uint64 // bit f: figure f was sent
	info     uint64 // fingerprint of its segment, backend type and system flag
	session  int64
	creation int64
	tick     uint64 // the last snapshot that answered for it
}

// KeptBytesPerProcess is what a Sender keeps per live process at the
// least: its slot and its index entry (a key and a slot number, padded to
// 16 bytes, and the map's control byte). The map's spare room and the
// slots' spare capacity come on top (BenchmarkSenderMemory measures all).
const KeptBytesPerProcess = int(unsafe.Sizeof(sentProcess{})) + 16 + 1

// sentHost is the receiver's memory of one host.
type sentHost struct {
	seq uint64 // of its last batch
	// listing fingerprints what the host was asked about at its last
	// snapshot it answered in; 0: not told.
	listing uint64
	// index finds a pid's slot; nil: a full batch is due.
	index map[int64]uint32
	slots []sentProcess
	free  []uint32
	// This snapshot's.
	tick     uint64
	full     bool
	batches  int64
	refused  bool
	departed []snapshot.Departure // processes that left although their pid is still listed
	asked    uint64               // this snapshot's listing
	// carry: the processes not answered are carried as a whole (Carries);
	// held were held at its start, accounted of them were answered, gone
	// or left out since.
	carry           bool
	held, accounted int
}

// forget empties the host's memory: every process is new to it.
func (hs *sentHost) forget() {
	hs.index = map[int64]uint32{}
	hs.slots, hs.free = hs.slots[:0], hs.free[:0]
}

// remember records that the snapshot of tick answered for e, and tells
// whether e goes into the host's batch, and how: whole in a full batch,
// for a new process, or (figureLevel false) for any change; else with
// only the figures that changed, or not at all when nothing did. A pid
// that now names another process (its creation time differs), or a
// process now counted in another session, departs the former one: the
// processor keeps processes by session.
func (hs *sentHost) remember(seed maphash.Seed, tick uint64, figureLevel bool, e *snapshot.ProcessEntry) bool {
	pid := e.Process.PID
	now := sentProcess{info: hashInfo(seed, e), session: e.Session, creation: e.Process.CreationTime.UnixNano(), tick: tick}
	for f := range pipeline.NumFigures {
		if v := e.Process.Values[f]; v.OK {
			now.present |= 1 << f
			now.values[f] = uint64(v.Int) ^ math.Float64bits(v.Float) // #nosec G115 -- bits
		}
	}
	slot, known := hs.index[pid]
	if !known {
		slot = hs.place(pid)
	}
	last := &hs.slots[slot]
	if known && last.tick != tick {
		hs.accounted++
	}
	if known && (last.creation != now.creation || last.session != now.session) {
		hs.departed = append(hs.departed, snapshot.Departure{Session: last.session, PID: pid, Creation: last.creation})
		known = false
	}
	var changed uint64
	for m := now.present; m != 0; m &= m - 1 {
		f := bits.TrailingZeros64(m)
		if last.present&(1<<f) == 0 || last.values[f] != now.values[f] {
			changed |= 1 << f
		}
	}
	gone := last.present &^ now.present // a figure no longer read: only a whole entry says so
	sameInfo := last.info == now.info
	*last = now
	switch {
	case hs.full || !known || gone != 0 || (!figureLevel && (changed != 0 || !sameInfo)):
		e.Sparse = false
		return true
	case changed == 0 && sameInfo:
		return false
	}
	e.Sparse, e.Changed = true, changed
	return true
}

// place gives pid a slot, a freed one if there is one.
func (hs *sentHost) place(pid int64) uint32 {
	var slot uint32
	if n := len(hs.free); n > 0 {
		slot, hs.free = hs.free[n-1], hs.free[:n-1]
	} else {
		hs.slots = append(hs.slots, sentProcess{})
		slot = uint32(len(hs.slots) - 1) // #nosec G115 -- an answer is bounded far below 2^32 processes
	}
	hs.slots[slot] = sentProcess{}
	hs.index[pid] = slot
	return slot
}

// hashInfo fingerprints what gpotel.process.info says of a process besides
// its pid (a 64-bit hash with a per-run random seed: a change goes unseen
// with odds of 2^-64).
func hashInfo(seed maphash.Seed, e *snapshot.ProcessEntry) uint64 {
	var buf [17]byte
	binary.LittleEndian.PutUint64(buf[0:], uint64(e.Segment)) // #nosec G115 -- bits
	binary.LittleEndian.PutUint64(buf[8:], uint64(len(e.BackendType)))
	if e.System {
		buf[16] = 1
	}
	var h maphash.Hash
	h.SetSeed(seed)
	_, _ = h.Write(buf[:])
	_, _ = h.WriteString(e.BackendType)
	return h.Sum64()
}

// departures lists, in pid order, the processes of hs the snapshot of
// tick did not answer for, and forgets them. A host whose unchanged were
// carried as a whole lost only the processes Carry and remember departed.
func (hs *sentHost) departures(tick uint64) []snapshot.Departure {
	out := hs.departed
	hs.departed = nil
	if !hs.carry {
		for pid, slot := range hs.index {
			if p := &hs.slots[slot]; p.tick != tick {
				out = append(out, snapshot.Departure{Session: p.session, PID: pid, Creation: p.creation})
				delete(hs.index, pid)
				hs.free = append(hs.free, slot)
			}
		}
	}
	slices.SortFunc(out, func(a, b snapshot.Departure) int {
		return cmp.Or(cmp.Compare(a.PID, b.PID), cmp.Compare(a.Creation, b.Creation))
	})
	return out
}
