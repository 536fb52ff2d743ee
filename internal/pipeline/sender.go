// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Sender is the receiver's end of the process batches, kept from scrape
// to scrape: per host, its batch sequence and what it last sent of each
// process (docs/pipeline.md, sparse batches). A host gets a full batch when it
// has no memory: the first scrape, the first after a restart, and after
// any scrape it did not answer in (an agent failure, or a batch the next
// consumer refused).
type Sender struct {
	enc   *ProcessEncoder
	scope Scope
	next  consumer.Metrics
	seed  maphash.Seed
	dense bool // every batch full: every process every snapshot

	mu    sync.Mutex
	hosts map[string]*sentHost
	tick  uint64
}

// NewSender sends through enc to next; dense sends every host in full
// every snapshot.
func NewSender(enc *ProcessEncoder, next consumer.Metrics, dense bool) *Sender {
	return &Sender{enc: enc, scope: enc.scope, next: next, seed: maphash.MakeSeed(), dense: dense, hosts: map[string]*sentHost{}}
}

// Framer sends one snapshot's process batches (rule 1). Safe for
// concurrent use by the hosts' emission workers, one worker per host.
type Framer struct {
	Time time.Time
	TmID int64
	s    *Sender
	tick uint64
}

// Snapshot starts the snapshot taken at t.
func (s *Sender) Snapshot(t time.Time, tmID int64) *Framer {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick++
	return &Framer{Time: t, TmID: tmID, s: s, tick: s.tick}
}

// Timestamp is the time every point of the snapshot carries.
func (f *Framer) Timestamp() pcommon.Timestamp { return pcommon.NewTimestampFromTime(f.Time) }

// host returns the host's memory, starting its snapshot on first use.
func (f *Framer) host(name string) *sentHost {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	hs := f.s.hosts[name]
	if hs == nil {
		hs = &sentHost{}
		f.s.hosts[name] = hs
	}
	if hs.tick != f.tick {
		hs.tick, hs.batches, hs.refused, hs.departed = f.tick, 0, false, nil
		hs.full = hs.procs == nil || f.s.dense
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
func (f *Framer) Send(ctx context.Context, host string, entries []ProcessEntry, order []int32) (Sent, []int32, error) {
	hs := f.host(host)
	var sent Sent
	changed := entries[:0]
	for i := range entries {
		e := entries[i]
		h := hashProcess(f.s.seed, &e)
		creation := e.Process.CreationTime.UnixNano()
		last, known := hs.procs[e.Process.PID]
		if known && last.creation != creation {
			hs.departed = append(hs.departed, Departure{Session: last.session, PID: e.Process.PID, Creation: last.creation})
			known = false
		}
		hs.procs[e.Process.PID] = sentProcess{session: e.Session, creation: creation, hash: h, tick: f.tick}
		if hs.full || !known || last.hash != h || last.session != e.Session {
			changed = append(changed, e)
		} else {
			sent.Unchanged++
		}
	}
	hs.seq++
	hs.batches++
	md := pmetric.NewMetrics()
	rms := md.ResourceMetrics()
	ts := f.Timestamp()
	appendBatchHeader(rms, f.s.scope, ts, BatchHeader{Host: host, TmID: f.TmID, Seq: hs.seq, Full: hs.full})
	sent.Written, order = f.s.enc.Append(rms, &ProcessBatch{Time: ts, TmID: f.TmID, Host: host, Kind: KindProcess, Entries: changed}, order)
	err := f.s.next.ConsumeMetrics(ctx, md)
	if err != nil {
		hs.refused = true
	}
	return sent, order, err
}

// Close stamps the closing batch: a host whose batch was refused did not
// answer, whatever its agent said; each host's batch count and last
// sequence number; the departures of the hosts that answered. It then
// forgets every host that did not answer, so it is sent in full next time.
func (f *Framer) Close(c *Closing) {
	c.Time = f.Time
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	listed := make(map[string]bool, len(c.Hosts))
	for i := range c.Hosts {
		h := &c.Hosts[i]
		listed[h.Host] = true
		hs := f.s.hosts[h.Host]
		if hs == nil || hs.tick != f.tick {
			delete(f.s.hosts, h.Host)
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
		if gone := hs.departures(f.tick); len(gone) > 0 {
			c.Departed = append(c.Departed, HostDepartures{Host: h.Host, Processes: gone})
		}
	}
	for name := range f.s.hosts {
		if !listed[name] {
			delete(f.s.hosts, name)
		}
	}
}
