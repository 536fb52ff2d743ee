// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sparse

import (
	"cmp"
	"context"
	"encoding/binary"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// Sender is the receiver's end of the process batches, kept from scrape
// to scrape: per host, its batch sequence and what it last sent of each
// process. A host gets a full batch when it has no memory: the first
// scrape, the first after a restart, and after any scrape it did not
// answer in (an agent failure, or a batch the next consumer refused).
type Sender struct {
	enc   *pipeline.ProcessEncoder
	next  consumer.Metrics
	seed  maphash.Seed
	dense bool // every batch full: every process every snapshot

	mu    sync.Mutex
	hosts map[string]*sentHost
	tick  uint64
}

// NewSender sends through enc to next; dense sends every host in full
// every snapshot.
func NewSender(enc *pipeline.ProcessEncoder, next consumer.Metrics, dense bool) *Sender {
	return &Sender{enc: enc, next: next, seed: maphash.MakeSeed(), dense: dense, hosts: map[string]*sentHost{}}
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
		hs.full = hs.procs == nil || o.s.dense
		if hs.procs == nil {
			hs.procs = map[int64]sentProcess{}
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
func (o *Outgoing) Send(ctx context.Context, host string, entries []pipeline.ProcessEntry, order []int32) (Sent, []int32, error) {
	hs := o.host(host)
	var sent Sent
	changed := entries[:0]
	for i := range entries {
		e := entries[i]
		if hs.remember(o.s.seed, o.tick, &e) {
			changed = append(changed, e)
		} else {
			sent.Unchanged++
		}
	}
	hs.seq++
	hs.batches++
	md := pmetric.NewMetrics()
	rms := md.ResourceMetrics()
	ts := o.Timestamp()
	pipeline.AppendBatchHeader(rms, o.s.enc.Scope(), ts, pipeline.BatchHeader{Host: host, TmID: o.TmID, Seq: hs.seq, Full: hs.full})
	sent.Written, order = o.s.enc.Append(rms, &pipeline.ProcessBatch{Time: ts, TmID: o.TmID, Host: host, Kind: pipeline.KindProcess, Entries: changed}, order)
	err := o.s.next.ConsumeMetrics(ctx, md)
	if err != nil {
		hs.refused = true
	}
	return sent, order, err
}

// Close stamps the closing batch: a host whose batch was refused did not
// answer, whatever its agent said; each host's batch count and last
// sequence number; the departures of the hosts that answered. It then
// forgets every host that did not answer, so it is sent in full next time.
func (o *Outgoing) Close(c *pipeline.Closing) {
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
		if hs.refused {
			h.Up = false
		}
		h.Batches, h.Sequence = hs.batches, hs.seq
		if !h.Up {
			hs.procs = nil
			continue
		}
		if gone := hs.departures(o.tick); len(gone) > 0 {
			c.Departed = append(c.Departed, pipeline.HostDepartures{Host: h.Host, Processes: gone})
		}
	}
	for name := range o.s.hosts {
		if !listed[name] {
			delete(o.s.hosts, name)
		}
	}
}

// sentProcess is what the receiver last sent of one process: enough to
// tell whether anything it says changed, not the figures.
type sentProcess struct {
	session  int64
	creation int64
	hash     uint64
	tick     uint64 // the last snapshot that answered for it
}

// sentHost is the receiver's memory of one host.
type sentHost struct {
	seq   uint64                // of its last batch
	procs map[int64]sentProcess // by pid; nil: a full batch is due
	// This snapshot's.
	tick     uint64
	full     bool
	batches  int64
	refused  bool
	departed []pipeline.Departure // pids reused this snapshot: their old process left
}

// remember records that the snapshot of tick answered for e, and tells
// whether e goes into the host's batch: always in a full batch, else when
// the process is new or anything it says changed. A pid that now names
// another process (its creation time differs) departs the former one.
func (hs *sentHost) remember(seed maphash.Seed, tick uint64, e *pipeline.ProcessEntry) bool {
	h := hashProcess(seed, e)
	creation := e.Process.CreationTime.UnixNano()
	last, known := hs.procs[e.Process.PID]
	if known && last.creation != creation {
		hs.departed = append(hs.departed, pipeline.Departure{Session: last.session, PID: e.Process.PID, Creation: last.creation})
		known = false
	}
	hs.procs[e.Process.PID] = sentProcess{session: e.Session, creation: creation, hash: h, tick: tick}
	return hs.full || !known || last.hash != h || last.session != e.Session
}

// hashProcess fingerprints everything a process batch says of a process,
// so that equal fingerprints mean nothing to send (a 64-bit hash with a
// per-run random seed: a change goes unseen with odds of 2^-64).
func hashProcess(seed maphash.Seed, e *pipeline.ProcessEntry) uint64 {
	var buf [8 * (int(pipeline.NumFigures) + 4)]byte
	b := buf[:0]
	var present uint64
	for f := range pipeline.NumFigures {
		v := e.Process.Values[f]
		if v.OK {
			present |= 1 << f
		}
		b = binary.LittleEndian.AppendUint64(b, uint64(v.Int)^math.Float64bits(v.Float)) // #nosec G115 -- bits
	}
	b = binary.LittleEndian.AppendUint64(b, present)
	b = binary.LittleEndian.AppendUint64(b, uint64(e.Session)) // #nosec G115 -- bits
	b = binary.LittleEndian.AppendUint64(b, uint64(e.Segment)) // #nosec G115 -- bits
	system := uint64(0)
	if e.System {
		system = 1
	}
	b = binary.LittleEndian.AppendUint64(b, system)
	var h maphash.Hash
	h.SetSeed(seed)
	_, _ = h.Write(b)
	_, _ = h.WriteString(e.BackendType)
	return h.Sum64()
}

// departures lists, in pid order, the processes of hs the snapshot of
// tick did not answer for, and forgets them.
func (hs *sentHost) departures(tick uint64) []pipeline.Departure {
	out := hs.departed
	hs.departed = nil
	for pid, p := range hs.procs {
		if p.tick != tick {
			out = append(out, pipeline.Departure{Session: p.session, PID: pid, Creation: p.creation})
			delete(hs.procs, pid)
		}
	}
	slices.SortFunc(out, func(a, b pipeline.Departure) int {
		return cmp.Or(cmp.Compare(a.PID, b.PID), cmp.Compare(a.Creation, b.Creation))
	})
	return out
}
