// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpotel/gpotel/exporter/historyexporter/internal/metadatatest"
)

// readCounter is a memoryClient that counts reads and fails past limit,
// so that an unbounded read fails the test instead of hanging it.
type readCounter struct {
	*memoryClient
	reads, limit int
}

func (c *readCounter) Get(ctx context.Context, key string) ([]byte, error) {
	c.reads++
	if c.reads > c.limit {
		return nil, errors.New("read past the test's limit")
	}
	return c.memoryClient.Get(ctx, key)
}

func metaValue(head, next uint64) []byte {
	return binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, head), next)
}

// A damaged meta (a huge next, a head past next, a cut value) is read
// within a bound: opening reads at most maxEntries entries, keeps those
// it finds, and says what was damaged.
func TestADamagedQueueMetaIsReadWithinABound(t *testing.T) {
	for _, tc := range []struct {
		name  string
		meta  []byte
		names []string
	}{
		{"a huge next", metaValue(0, 1<<62), []string{"a", "b", "c"}},
		{"the largest next", metaValue(0, ^uint64(0)), []string{"a", "b", "c"}},
		{"a head past next", metaValue(1<<62, 3), nil},
		{"a cut meta", []byte{1, 2, 3}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMemoryClient()
			q := mustOpen(t, mem, 1<<20)
			for _, name := range []string{"a", "b", "c"} {
				mustPush(t, q, name, 1, 10)
			}
			mem.kv[metaKey] = tc.meta
			client := &readCounter{memoryClient: mem, limit: 1 + maxEntries}
			q, dropped, err := openQueue(context.Background(), client, 1<<20)
			if err != nil {
				t.Fatalf("opening read %d keys: %v", client.reads, err)
			}
			client.limit = 1 << 40
			if dropped != 0 || q.damage.why == "" {
				t.Errorf("opening dropped %d and says %q of the damage; want 0 and a reason", dropped, q.damage.why)
			}
			if got := names(t, q); !slices.Equal(got, tc.names) {
				t.Errorf("the queue holds %v, want %v", got, tc.names)
			}
			if _, err := q.done(context.Background(), true); err != nil {
				t.Fatal(err)
			}
			// What opening wrote back is whole again.
			mustPush(t, q, "d", 1, 10)
			again := mustOpen(t, mem, 1<<20)
			if again.damage.why != "" {
				t.Errorf("opened again: %s", again.damage.why)
			}
			if got := names(t, again); !slices.Equal(got, []string{"d"}) {
				t.Errorf("opened again, the queue holds %v, want [d]", got)
			}
		})
	}
}

// A queued entry whose index, payload or rows do not read back as they
// were queued is dropped, its events counted as damaged and logged once;
// it never blocks the queue (the database is not even asked).
func TestDamagedQueueIsDroppedAndCounted(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	core, logs := observer.New(zap.WarnLevel)
	set := metadatatest.NewSettings(tel)
	set.Logger = zap.New(core)
	e, err := newHistoryExporter(validConfig(), set)
	if err != nil {
		t.Fatal(err)
	}
	e.store.now = func() time.Time { return testNow }
	ctx := context.Background()
	mem := newMemoryClient()
	q := mustOpen(t, mem, 1<<20)
	good := encodeEvents(workload(0, queriesPerSession, testNow), e.store.tables, testOldest, testNewest)
	for range 5 {
		if _, err := q.push(ctx, good.events(), good.payload); err != nil {
			t.Fatal(err)
		}
	}
	garbage := slices.Clone(good.payload)
	garbage[0] = 0xff
	mem.kv[indexKey(0)] = []byte("not an index")                            // read at open: its count is lost, one event
	mem.kv[indexKey(1)] = indexValue(entryInfo{events: -5, bytes: 1 << 62}) // absurd: one event
	mem.kv[entryKey(2)] = garbage                                           // read at the write: 6 events
	mem.kv[entryKey(3)] = good.payload[:len(good.payload)/2]                // cut: 6 events
	delete(mem.kv, entryKey(4))                                             // gone: 6 events
	if err := e.openQueue(ctx, mem); err != nil {
		t.Fatal(err)
	}
	if err := e.writeQueued(ctx); err != nil {
		t.Fatalf("the damaged entries were not dropped: %v", err)
	}
	if events, bytes := e.queue.size(); events != 0 || bytes != 0 {
		t.Errorf("%d events in %d bytes still queued", events, bytes)
	}
	const want = 1 + 1 + 3*(queriesPerSession+1)
	if got := counted(t, tel, "otelcol_history_events_dropped", "reason", reasonDamaged); got != want {
		t.Errorf("%d damaged events counted, want %d", got, want)
	}
	if n := logs.FilterField(zap.String("reason", reasonDamaged)).Len(); n != 1 {
		t.Errorf("damage logged %d times, want once", n)
	}
}

// A queued entry that names a column twice is damaged: COPY would refuse
// it for ever.
func TestAQueuedEntryWithARepeatedColumnIsDamaged(t *testing.T) {
	tables := historyTables(defaultSchema)
	en := encodeEvents(oneQuery(sampleQuery(0, testNow)), tables, testOldest, testNewest)
	en.tables[0].columns[1] = en.tables[0].columns[0]
	if _, err := unmarshalEntry(remarshal(en)); err == nil {
		t.Error("an entry with a repeated column read back")
	}
}

// remarshal lays en out again as the queue keeps it, as encodeEvents
// would have with its fields as they are now.
func remarshal(en *entry) []byte {
	out := []byte{entryVersion}
	for _, et := range en.tables {
		out = appendBytes(out, et.data)
	}
	for i := range en.tables {
		out = appendTableTrailer(out, &en.tables[i])
	}
	return out
}

// Queued rows and the days, end times and count recorded beside them
// must agree: a row ending on a day without its partition, or outside the
// end times the exactly-once look-up reads, would be refused for ever or
// written twice. Such an entry is damaged, or such a row left out,
// counted.
func TestQueuedRowsThatDisagreeWithTheirDaysAreLeftOut(t *testing.T) {
	tables := historyTables(defaultSchema)
	fresh := func() *entry {
		return encodeEvents(workload(0, 2*queriesPerSession, testNow), tables, testOldest, testNewest)
	}
	for _, tc := range []struct {
		name   string
		damage func(en *entry)
		// rows left out (as damaged) when the entry reads back at all
		leftOut int64
	}{
		{"a day not the rows'", func(en *entry) { en.tables[0].days = []int64{testNow.Add(-3 * day).Truncate(day).Unix()} }, -1},
		{"a day too many", func(en *entry) { en.tables[0].days = append(en.tables[0].days, testNow.Add(day).Truncate(day).Unix()) }, -1},
		{"days out of order", func(en *entry) { en.tables[0].days = append(en.tables[0].days, en.tables[0].days[0]) }, -1},
		{"a day past the year 9999", func(en *entry) { en.tables[0].days = []int64{1 << 40} }, -1},
		{"more rows than lines", func(en *entry) { en.tables[0].rows++ }, -1},
		{"fewer rows than lines", func(en *entry) { en.tables[0].rows-- }, -1},
		{"a later first end", func(en *entry) { en.tables[0].minEnd += int64(time.Second) }, 1},
		{"an earlier last end", func(en *entry) { en.tables[0].maxEnd -= int64(time.Second) }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			en := fresh()
			tc.damage(en)
			back, err := unmarshalEntry(remarshal(en))
			if tc.leftOut < 0 {
				if err == nil {
					t.Error("the entry read back")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b := newBatch(tables)
			b.add(back)
			if b.rejected[reasonDamaged] != tc.leftOut || b.tables[0].rows != en.tables[0].rows-tc.leftOut {
				t.Errorf("rejected %v, %d rows kept; want %d damaged", b.rejected, b.tables[0].rows, tc.leftOut)
			}
		})
	}
	t.Run("a row with a column too many", func(t *testing.T) {
		en := fresh()
		line := en.tables[0].data[:slices.Index(en.tables[0].data, '\n')]
		en.tables[0].data = append(append(append([]byte(nil), line...), "\textra\n"...), en.tables[0].data[len(line)+1:]...)
		back, err := unmarshalEntry(remarshal(en))
		if err != nil {
			t.Fatal(err)
		}
		b := newBatch(tables)
		b.add(back)
		if b.rejected[reasonDamaged] != 1 || b.tables[0].rows != en.tables[0].rows-1 {
			t.Errorf("rejected %v, %d rows kept; want 1 damaged", b.rejected, b.tables[0].rows)
		}
	})
}

// Whatever the storage holds, opening the queue and taking from it reads
// within a bound and never panics, and what it holds adds up.
func FuzzOpenQueue(f *testing.F) {
	good := encodeEvents(workload(0, queriesPerSession, testNow), historyTables(defaultSchema), testOldest, testNewest).payload
	f.Add(metaValue(0, 2), indexValue(entryInfo{events: 6, bytes: int64(len(good)) + entryOverhead}), good, indexValue(entryInfo{events: 1, bytes: 20}),
		[]byte("x"))
	f.Add(metaValue(0, 1<<63), []byte{}, []byte{}, []byte{1}, []byte{})
	f.Add(metaValue(5, 1), []byte{}, []byte{}, []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, meta, index0, entry0, index1, entry1 []byte) {
		mem := newMemoryClient()
		mem.kv[metaKey] = meta
		mem.kv[indexKey(0)], mem.kv[entryKey(0)] = index0, entry0
		mem.kv[indexKey(1)], mem.kv[entryKey(1)] = index1, entry1
		const entries = 16
		client := &readCounter{memoryClient: mem, limit: 1 + entries}
		q, _, err := openQueueOf(context.Background(), client, 1<<20, entries)
		if err != nil {
			t.Fatalf("opening read %d keys: %v", client.reads, err)
		}
		client.limit = 1 << 40
		events, bytes := q.size()
		if events < 0 || bytes < 0 || bytes > 1<<20 {
			t.Fatalf("the queue holds %d events in %d bytes", events, bytes)
		}
		infos, payloads, err := q.take(context.Background(), 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		b := newBatch(historyTables(defaultSchema))
		for i, p := range payloads {
			if en, err := unmarshalEntry(p); err == nil {
				b.add(en)
			} else if infos[i].events <= 0 {
				t.Fatalf("a damaged entry of %d events", infos[i].events)
			}
		}
	})
}
