// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package view

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// snapshotOf is a batch that closes a snapshot at at holding sessions ids.
func snapshotOf(at time.Time, ids ...int64) *Batch {
	b := &Batch{Snapshots: []snapshot.Header{{Time: pcommon.NewTimestampFromTime(at)}}}
	for _, id := range ids {
		b.Sessions = append(b.Sessions, &Session{Key: pipeline.SessionKey{TmID: 1, ID: id}, State: &yagpcc.SessionState{}})
	}
	return b
}

// A service's derived data is built once per view, and each view has its own.
func TestDerivedIsBuiltOncePerView(t *testing.T) {
	type key struct{}
	builds := 0
	build := func() any { builds++; return new(int) }
	a, b := &View{}, &View{}
	if a.Derived(key{}, build) != a.Derived(key{}, build) || builds != 1 {
		t.Fatalf("built %d times for one view, want once", builds)
	}
	if b.Derived(key{}, build) == a.Derived(key{}, build) || builds != 2 {
		t.Fatalf("two views share their derived data (%d builds)", builds)
	}
}

// Prepare sees each view, beside the one it replaces, before any reader
// loads it; a batch that is no snapshot prepares nothing.
func TestPrepareSeesEachViewBeforeItIsServed(t *testing.T) {
	var st *Store
	var seen [][2]int
	st = NewStore(Config{Grace: time.Second, MaxSessions: 10}, zap.NewNop(), nil, func(prev, next *View) {
		if st.Load() != prev {
			t.Errorf("prepared while another view than prev is served")
		}
		seen = append(seen, [2]int{len(prev.Sessions), len(next.Sessions)})
	})
	st.Consume(snapshotOf(t0, 1, 2))
	st.Consume(&Batch{})
	st.Consume(snapshotOf(t0.Add(time.Minute), 3))
	if want := [][2]int{{0, 2}, {2, 1}}; len(seen) != len(want) || seen[0] != want[0] || seen[1] != want[1] {
		t.Fatalf("prepared (prev, next sessions) %v, want %v", seen, want)
	}
}
