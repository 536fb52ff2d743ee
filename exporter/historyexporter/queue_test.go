// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// payload is a payload of the given size whose text names it.
func payload(name string, size int) []byte {
	b := []byte(name)
	for len(b) < size {
		b = append(b, '.')
	}
	return b
}

func mustOpen(t *testing.T, client *memoryClient, maxBytes int64) *queue {
	t.Helper()
	q, dropped, err := openQueue(context.Background(), client, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	if dropped != 0 {
		t.Fatalf("opening dropped %d events", dropped)
	}
	return q
}

func mustPush(t *testing.T, q *queue, name string, events int64, size int) int64 {
	t.Helper()
	dropped, err := q.push(context.Background(), events, payload(name, size))
	if err != nil {
		t.Fatal(err)
	}
	return dropped
}

// names are the entries take hands out, by the text they start with.
func names(t *testing.T, q *queue) []string {
	t.Helper()
	_, payloads, err := q.take(context.Background(), 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range payloads {
		n := 0
		for n < len(p) && p[n] != '.' {
			n++
		}
		out = append(out, string(p[:n]))
	}
	return out
}

func TestQueueDropsTheOldestPastItsBound(t *testing.T) {
	q := mustOpen(t, newMemoryClient(), 3*(entryOverhead+100))
	for i, name := range []string{"a", "b", "c"} {
		if d := mustPush(t, q, name, int64(i+1), 100); d != 0 {
			t.Fatalf("push %s within the bound dropped %d", name, d)
		}
	}
	if d := mustPush(t, q, "d", 4, 100); d != 1 {
		t.Errorf("push past the bound dropped %d events, want a's 1", d)
	}
	if d := mustPush(t, q, "e", 5, 150); d != 2+3 {
		t.Errorf("a larger entry dropped %d events, want b's and c's 5", d)
	}
	if events, bytes := q.size(); events != 9 || bytes != 2*entryOverhead+250 {
		t.Errorf("queue holds %d events in %d bytes, want d and e: 9 in %d", events, bytes, 2*entryOverhead+250)
	}
	if got := names(t, q); !slices.Equal(got, []string{"d", "e"}) {
		t.Errorf("queue holds %v, want the newest [d e]", got)
	}
}

func TestQueueDropsAnEntryLargerThanItsBound(t *testing.T) {
	q := mustOpen(t, newMemoryClient(), 200)
	mustPush(t, q, "a", 1, 10)
	if d := mustPush(t, q, "huge", 7, 300); d != 7 {
		t.Errorf("an entry larger than the bound: %d dropped, want its own 7", d)
	}
	if got := names(t, q); !slices.Equal(got, []string{"a"}) {
		t.Errorf("queue holds %v, want [a] untouched", got)
	}
}

func TestQueueOutlivesARestart(t *testing.T) {
	client := newMemoryClient()
	q := mustOpen(t, client, 1<<20)
	for _, name := range []string{"a", "b", "c"} {
		mustPush(t, q, name, 1, 10)
	}
	// a is written; b and c are not.
	if _, _, err := q.take(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := q.done(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	again := mustOpen(t, client, 1<<20)
	if events, _ := again.size(); events != 2 {
		t.Errorf("after a restart the queue holds %d events, want 2", events)
	}
	mustPush(t, again, "d", 1, 10)
	if got := names(t, again); !slices.Equal(got, []string{"b", "c", "d"}) {
		t.Errorf("after a restart the queue holds %v, want [b c d] in order", got)
	}
}

// The meta written with the first entry of an empty queue holds it.
func TestQueueOfOneEntryOutlivesARestart(t *testing.T) {
	client := newMemoryClient()
	mustPush(t, mustOpen(t, client, 1<<20), "a", 1, 10)
	if got := names(t, mustOpen(t, client, 1<<20)); !slices.Equal(got, []string{"a"}) {
		t.Errorf("after a restart the queue holds %v, want [a]", got)
	}
}

func TestQueueOpenedWithASmallerBoundDropsTheOldest(t *testing.T) {
	client := newMemoryClient()
	q := mustOpen(t, client, 1<<20)
	for i := range 10 {
		mustPush(t, q, fmt.Sprint(i), 1, 100)
	}
	smaller, dropped, err := openQueue(context.Background(), client, 3*(entryOverhead+100))
	if err != nil {
		t.Fatal(err)
	}
	if dropped != 7 {
		t.Errorf("reopening with room for 3 dropped %d events, want 7", dropped)
	}
	if got := names(t, smaller); !slices.Equal(got, []string{"7", "8", "9"}) {
		t.Errorf("queue holds %v, want [7 8 9]", got)
	}
}

func TestQueueTakeHonoursMaxEvents(t *testing.T) {
	q := mustOpen(t, newMemoryClient(), 1<<20)
	for i, events := range []int64{3, 4, 5} {
		mustPush(t, q, fmt.Sprint(i), events, 10)
	}
	infos, _, err := q.take(context.Background(), 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 {
		t.Errorf("take(7) took %d entries, want 2 (3+4 events)", len(infos))
	}
	if _, err := q.done(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	// An entry larger than max_events still goes, alone.
	infos, _, _ = q.take(context.Background(), 1)
	if len(infos) != 1 || infos[0].events != 3 {
		t.Errorf("take(1) took %v, want the first entry alone", infos)
	}
}

// An entry the writer holds may be dropped to make room: it is lost only
// if the write fails; if it succeeds its events were written, not dropped.
func TestQueueEntryDroppedWhileWrittenIsLostOnlyIfTheWriteFails(t *testing.T) {
	for _, written := range []bool{true, false} {
		t.Run(fmt.Sprintf("written=%v", written), func(t *testing.T) {
			q := mustOpen(t, newMemoryClient(), 2*(entryOverhead+100))
			mustPush(t, q, "a", 3, 100)
			mustPush(t, q, "b", 4, 100)
			if infos, _, err := q.take(context.Background(), 3); err != nil || len(infos) != 1 {
				t.Fatalf("take: %v, %v", infos, err)
			}
			if d := mustPush(t, q, "c", 5, 100); d != 0 {
				t.Errorf("dropping the entry being written counted %d at once, want 0 until the write ends", d)
			}
			lost, err := q.done(context.Background(), written)
			if err != nil {
				t.Fatal(err)
			}
			want := int64(0)
			if !written {
				want = 3
			}
			if lost != want {
				t.Errorf("lost %d, want %d", lost, want)
			}
			if got := names(t, q); !slices.Equal(got, []string{"b", "c"}) {
				t.Errorf("queue holds %v, want [b c]", got)
			}
		})
	}
}

func TestQueueFailedWriteKeepsTheEntriesInFront(t *testing.T) {
	q := mustOpen(t, newMemoryClient(), 1<<20)
	mustPush(t, q, "a", 1, 10)
	mustPush(t, q, "b", 1, 10)
	<-q.ready // the writer wakes
	if _, _, err := q.take(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := q.done(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-q.ready:
	default:
		t.Error("a failed write left no token for the writer's next attempt")
	}
	if got := names(t, q); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("queue holds %v, want [a b]", got)
	}
}
