// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"slices"
	"testing"
)

func TestLockModesConflictAsPostgreSQLsTable(t *testing.T) {
	for _, tc := range []struct {
		wanted, held string
		conflict     bool
	}{
		{"AccessShareLock", "AccessExclusiveLock", true},
		{"AccessShareLock", "AccessShareLock", false},
		{"AccessShareLock", "ExclusiveLock", false},
		{"RowExclusiveLock", "ShareLock", true},
		{"RowExclusiveLock", "RowExclusiveLock", false},
		{"ShareLock", "ShareLock", false},
		{"ShareLock", "ExclusiveLock", true}, // a transaction id wait: ShareLock behind the owner's ExclusiveLock
		{"ShareUpdateExclusiveLock", "ShareUpdateExclusiveLock", true},
		{"AccessExclusiveLock", "AccessShareLock", true},
		{"SomeNewLock", "AccessShareLock", true}, // the server made it wait
	} {
		if got := lockModesConflict(tc.wanted, tc.held); got != tc.conflict {
			t.Errorf("wanted %s, held %s: conflict %v, want %v", tc.wanted, tc.held, got, tc.conflict)
		}
	}
	// The table is symmetric, as PostgreSQL's is.
	for wanted, held := range lockConflicts {
		for _, h := range held {
			if !slices.Contains(lockConflicts[h], wanted) {
				t.Errorf("%s conflicts with %s but not the other way round", wanted, h)
			}
		}
	}
}

// Each waiting session gets one blocker, whatever the row order: its wait
// on the coordinator, then the strongest conflicting mode, then the lowest
// session; holders in modes that do not conflict block nobody.
func TestEachWaitingSessionNamesOneBlocker(t *testing.T) {
	pair := func(waiter, seg int64, wanted string, holder int64, held string) lockPair {
		return lockPair{lockWait: lockWait{Session: waiter, Segment: seg, WantedMode: wanted, Object: "public.t", Blocker: holder, BlockerMode: held}, lockType: "relation"}
	}
	pairs := []lockPair{
		pair(20, 0, "AccessShareLock", 10, "AccessExclusiveLock"),
		pair(20, -1, "AccessShareLock", 11, "AccessExclusiveLock"),
		pair(20, -1, "AccessShareLock", 12, "AccessShareLock"), // no conflict
		pair(30, 1, "AccessExclusiveLock", 12, "AccessShareLock"),
		pair(30, 1, "AccessExclusiveLock", 11, "AccessExclusiveLock"),
		pair(40, 0, "AccessShareLock", 12, "RowExclusiveLock"), // no conflict: no blocker
	}
	want := []lockWait{
		{Session: 20, Segment: -1, WantedMode: "AccessShareLock", Object: "public.t", Blocker: 11, BlockerMode: "AccessExclusiveLock"},
		{Session: 30, Segment: 1, WantedMode: "AccessExclusiveLock", Object: "public.t", Blocker: 11, BlockerMode: "AccessExclusiveLock"},
	}
	for i := range 3 {
		slices.Reverse(pairs)
		if i == 2 {
			pairs[0], pairs[3] = pairs[3], pairs[0]
		}
		if got := blockers(pairs); !slices.Equal(got, want) {
			t.Fatalf("blockers = %+v\nwant %+v", got, want)
		}
	}
}

func TestLockObjectNamesTheRelationOrTheTransaction(t *testing.T) {
	rel, xid := "public.t", "742"
	if got := lockObject("relation", &rel, nil); got != "public.t" {
		t.Errorf("relation lock: %q", got)
	}
	if got := lockObject("transactionid", nil, &xid); got != "transaction 742" {
		t.Errorf("transaction lock: %q", got)
	}
	if got := lockObject("advisory", nil, nil); got != "advisory" {
		t.Errorf("advisory lock: %q", got)
	}
}
