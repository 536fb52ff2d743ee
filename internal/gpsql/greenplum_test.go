// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsql

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
		{"AccessShareLock", "SomeNewLock", true},
	} {
		if got := LockModesConflict(tc.wanted, tc.held); got != tc.conflict {
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
