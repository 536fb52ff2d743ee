// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// queue is a bounded first-in first-out list of entries, each the
// finished-work events of one ConsumeLogs call (their rows), kept in a
// storage client so that they outlive a database outage and a collector
// restart. Past maxBytes the oldest entries make room for the new one.
//
// Storage layout: "meta" holds the sequence numbers of the oldest entry
// and of the next one (8 bytes each, little endian); "e<seq>" holds an
// entry as given, "n<seq>" its event count and size (8 bytes each), so
// that opening reads only those. Each change is one storage batch, so a
// crash leaves either the old or the new state.
//
// One writer takes entries from the front, writes them, and reports the
// outcome. An entry dropped to make room while the writer has it is lost
// only if that write fails.
//
// Why not exporterhelper's persistent sending queue (the same storage
// extension): when full it refuses the new data (ErrQueueIsFull, the
// newest history lost) or, with block_on_overflow, holds the pipeline
// back; the history must keep the newest and drop the oldest, counted.
// And its retry gives up after max_elapsed_time, dropping the batch; here
// a batch waits for the database as long as the bound allows.
type queue struct {
	client     storage.Client
	maxBytes   int64
	maxEntries uint64

	mu      sync.Mutex
	next    uint64      // sequence number of the next entry
	entries []entryInfo // oldest first
	bytes   int64
	events  int64
	// taken is how many entries at the front the writer holds.
	taken int
	// lostIfFailed counts the events of taken entries dropped to make
	// room: the writer's outcome decides whether they were lost.
	lostIfFailed int64
	// ready holds a token while there is something the writer has not taken.
	ready chan struct{}
	// damage is what opening found damaged and dropped.
	damage damage
}

type entryInfo struct {
	seq    uint64
	events int64
	bytes  int64
}

const (
	// maxEntries bounds the entries the queue holds, and so what opening
	// reads whatever its meta says; past it the oldest make room.
	maxEntries = 1 << 20
	// maxEntryBytes bounds an entry's recorded size (a damaged index).
	maxEntryBytes = 1 << 40
	metaKey       = "meta"
	// entryOverhead is what an entry costs beside its bytes: its "n" key.
	entryOverhead = 16
)

func entryKey(seq uint64) string { return "e" + strconv.FormatUint(seq, 10) }
func indexKey(seq uint64) string { return "n" + strconv.FormatUint(seq, 10) }

func indexValue(e entryInfo) []byte {
	v := binary.LittleEndian.AppendUint64(make([]byte, 0, entryOverhead), uint64(e.events))
	return binary.LittleEndian.AppendUint64(v, uint64(e.bytes))
}

// deleteOps forget an entry.
func deleteOps(ops []*storage.Operation, seq uint64) []*storage.Operation {
	return append(ops, storage.DeleteOperation(entryKey(seq)), storage.DeleteOperation(indexKey(seq)))
}

// openQueue reads what an earlier run left in client. Entries beyond
// maxBytes (a smaller bound than before) are dropped; their events are
// returned for counting. What does not read back as the queue wrote it
// (damaged storage) is dropped and recorded in q.damage; opening reads
// at most maxEntries entries whatever the meta says.
func openQueue(ctx context.Context, client storage.Client, maxBytes int64) (q *queue, dropped int64, err error) {
	return openQueueOf(ctx, client, maxBytes, maxEntries)
}

// openQueueOf is openQueue with a bound of its own on the entries.
func openQueueOf(ctx context.Context, client storage.Client, maxBytes int64, maxEntries uint64) (q *queue, dropped int64, err error) {
	q = &queue{client: client, maxBytes: maxBytes, maxEntries: maxEntries, ready: make(chan struct{}, 1)}
	meta, err := client.Get(ctx, metaKey)
	if err != nil {
		return nil, 0, fmt.Errorf("queue storage: read %s: %w", metaKey, err)
	}
	var head uint64
	switch {
	case len(meta) == 16:
		head, q.next = binary.LittleEndian.Uint64(meta), binary.LittleEndian.Uint64(meta[8:])
	case meta != nil:
		q.damage.note(0, "%s is %d bytes, not 16: the entries it located are lost", metaKey, len(meta))
	}
	switch {
	case q.next < head:
		q.damage.note(0, "%s: the oldest entry %d is past the next %d", metaKey, head, q.next)
		q.next = head
	case q.next-head > maxEntries:
		q.damage.note(0, "%s: %d entries from %d, more than the queue ever holds (%d); the first %d are read", metaKey, q.next-head, head, maxEntries, maxEntries)
		q.next = head + maxEntries
	}
	var ops []*storage.Operation
	for seq := head; seq < q.next; seq++ {
		v, err := client.Get(ctx, indexKey(seq))
		if err != nil {
			return nil, 0, fmt.Errorf("queue storage: read %s: %w", indexKey(seq), err)
		}
		info, ok := readIndex(seq, v)
		if !ok {
			// Its count is lost with it: one event, at least, was.
			q.damage.note(1, "%s is not an entry's index (%d bytes)", indexKey(seq), len(v))
			ops = deleteOps(ops, seq)
			continue
		}
		q.append(info)
	}
	for q.bytes > maxBytes {
		ops = deleteOps(ops, q.entries[0].seq)
		dropped += q.entries[0].events
		q.removeFront(1)
	}
	if len(q.entries) > 0 {
		// Past the last entry found: a damaged next reads no further.
		q.next = q.entries[len(q.entries)-1].seq + 1
	}
	if len(ops) > 0 || q.damage.why != "" {
		if err := client.Batch(ctx, append(ops, q.metaOp())...); err != nil {
			return nil, 0, fmt.Errorf("queue storage: %w", err)
		}
	}
	q.signalIfAny()
	return q, dropped, nil
}

// readIndex reads an entry's index: its events (at least one, at most
// one per byte) and its size (within maxEntryBytes).
func readIndex(seq uint64, v []byte) (entryInfo, bool) {
	if len(v) != entryOverhead {
		return entryInfo{}, false
	}
	info := entryInfo{seq: seq, events: int64(binary.LittleEndian.Uint64(v)), bytes: int64(binary.LittleEndian.Uint64(v[8:]))}
	ok := info.bytes > entryOverhead && info.bytes <= maxEntryBytes && info.events > 0 && info.events <= info.bytes
	return info, ok
}

// damage is what opening found damaged: the events dropped with it (an
// entry whose count is lost counts as one), and the first damage.
type damage struct {
	events int64
	why    string
}

func (d *damage) note(events int64, format string, args ...any) {
	d.events += events
	if d.why == "" {
		d.why = fmt.Sprintf(format, args...)
	}
}

// push adds an entry of events encoded as payload, dropping the oldest
// entries to make room (past maxBytes or maxEntries); it returns the events
// so dropped. An entry larger than the bound is itself dropped.
func (q *queue) push(ctx context.Context, events int64, payload []byte) (dropped int64, err error) {
	size := int64(entryOverhead + len(payload))
	if size > q.maxBytes {
		return events, nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for freed := int64(0); q.bytes-freed+size > q.maxBytes || uint64(len(q.entries)-n) >= q.maxEntries; n++ {
		freed += q.entries[n].bytes
	}
	info := entryInfo{seq: q.next, events: events, bytes: size}
	ops := make([]*storage.Operation, 0, 2*n+3)
	ops = append(ops, storage.SetOperation(entryKey(info.seq), payload), storage.SetOperation(indexKey(info.seq), indexValue(info)))
	for _, e := range q.entries[:n] {
		ops = deleteOps(ops, e.seq)
	}
	q.next++
	head := info.seq
	if n < len(q.entries) {
		head = q.entries[n].seq
	}
	ops = append(ops, metaOp(head, q.next))
	if err := q.client.Batch(ctx, ops...); err != nil {
		q.next--
		return 0, fmt.Errorf("queue storage: %w", err)
	}
	for _, e := range q.entries[:n] {
		if q.taken > 0 {
			q.taken--
			q.lostIfFailed += e.events
		} else {
			dropped += e.events
		}
	}
	q.removeFront(n)
	q.append(info)
	q.signalIfAny()
	return dropped, nil
}

// take hands the writer the oldest entries, together at least one and
// up to maxEvents events, with their payloads; a payload that is missing
// or of another size than was queued (damaged storage) is nil.
func (q *queue) take(ctx context.Context, maxEvents int64) ([]entryInfo, [][]byte, error) {
	q.mu.Lock()
	if q.taken != 0 {
		q.mu.Unlock()
		return nil, nil, errors.New("queue: the writer has not reported its last batch")
	}
	var events int64
	n := 0
	for n < len(q.entries) && (n == 0 || events+q.entries[n].events <= maxEvents) {
		events += q.entries[n].events
		n++
	}
	q.taken = n
	infos := append([]entryInfo(nil), q.entries[:n]...)
	q.mu.Unlock()

	payloads := make([][]byte, 0, n)
	for _, e := range infos {
		v, err := q.client.Get(ctx, entryKey(e.seq))
		if err != nil {
			return infos, payloads, fmt.Errorf("queue storage: read %s: %w", entryKey(e.seq), err)
		}
		if int64(len(v))+entryOverhead != e.bytes {
			v = nil // missing, or not the entry queued: damaged
		}
		payloads = append(payloads, v)
	}
	return infos, payloads, nil
}

// done reports the outcome of the write of the taken entries: written
// removes them; otherwise they stay at the front for the next attempt.
// lost are the events of taken entries dropped to make room during a
// write that failed.
func (q *queue) done(ctx context.Context, written bool) (lost int64, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.taken
	q.taken = 0
	defer q.signalIfAny()
	if !written {
		lost, q.lostIfFailed = q.lostIfFailed, 0
		return lost, nil
	}
	q.lostIfFailed = 0
	ops := make([]*storage.Operation, 0, 2*n+1)
	for _, e := range q.entries[:n] {
		ops = deleteOps(ops, e.seq)
	}
	ops = append(ops, q.metaOpAfter(n))
	q.removeFront(n)
	// Written rows are never written again, so the entries leave memory
	// even if storage cannot delete them; after a restart they would be
	// offered once more, and the write leaves out what is there.
	if err := q.client.Batch(ctx, ops...); err != nil {
		return 0, fmt.Errorf("queue storage: %w", err)
	}
	return 0, nil
}

// signalIfAny leaves the writer a token when the queue holds something.
func (q *queue) signalIfAny() {
	if len(q.entries) == 0 {
		return
	}
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// size is what the queue holds.
func (q *queue) size() (events, bytes int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.events, q.bytes
}

func (q *queue) append(e entryInfo) {
	q.entries = append(q.entries, e)
	q.events += e.events
	q.bytes += e.bytes
}

func (q *queue) removeFront(n int) {
	for _, e := range q.entries[:n] {
		q.events -= e.events
		q.bytes -= e.bytes
	}
	q.entries = append(q.entries[:0], q.entries[n:]...)
}

// metaOp records the oldest entry and the next sequence number as they are.
func (q *queue) metaOp() *storage.Operation { return q.metaOpAfter(0) }

// metaOpAfter records them as they will be once the n oldest entries are gone.
func (q *queue) metaOpAfter(n int) *storage.Operation {
	head := q.next
	if n < len(q.entries) {
		head = q.entries[n].seq
	}
	return metaOp(head, q.next)
}

// metaOp records the oldest entry, head, and the next sequence number.
func metaOp(head, next uint64) *storage.Operation {
	v := make([]byte, 16)
	binary.LittleEndian.PutUint64(v, head)
	binary.LittleEndian.PutUint64(v[8:], next)
	return storage.SetOperation(metaKey, v)
}

// memoryClient is the queue's storage without a storage extension: the
// queue then rides out an outage but not a restart.
type memoryClient struct {
	mu sync.Mutex
	kv map[string][]byte
}

func newMemoryClient() *memoryClient { return &memoryClient{kv: map[string][]byte{}} }

func (m *memoryClient) Get(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.kv[key], nil
}

func (m *memoryClient) Set(_ context.Context, key string, value []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.kv[key] = exactCopy(value)
	return nil
}

func (m *memoryClient) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.kv, key)
	return nil
}

func (m *memoryClient) Batch(_ context.Context, ops ...*storage.Operation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, op := range ops {
		switch op.Type {
		case storage.Get:
			op.Value = m.kv[op.Key]
		case storage.Set:
			m.kv[op.Key] = exactCopy(op.Value)
		case storage.Delete:
			delete(m.kv, op.Key)
		}
	}
	return nil
}

func (m *memoryClient) Close(context.Context) error { return nil }

// exactCopy is v without the room its encoder left after it: the queue
// counts len, so the memory it holds must be len too.
func exactCopy(v []byte) []byte {
	out := make([]byte, len(v))
	copy(out, v)
	return out
}
