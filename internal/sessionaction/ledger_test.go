// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionaction

import (
	"testing"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
)

func ledgerKey(i int) QueryKey {
	return QueryKey{Session: pipeline.SessionKey{TmID: 1, ID: int64(i)}, Ccnt: 1, Start: 1e18}
}

// TestTheLedgerOfEndingsIsBounded: past its bound the oldest action goes.
func TestTheLedgerOfEndingsIsBounded(t *testing.T) {
	l := newLedger(3)
	for i := range 5 {
		l.record(ledgerKey(i), ended{action: CancelQuery, rule: "spill"})
	}
	if n := len(l.by); n != 3 {
		t.Errorf("%d actions kept, want 3", n)
	}
	for i, want := range []string{"", "", "spill", "spill", "spill"} {
		if got := l.endedBy(ledgerKey(i), events.QueryCancelled, events.CancelUserRequest); got != want {
			t.Errorf("query %d: ended by %q, want %q", i, got, want)
		}
	}
}

// TestAPersonsLaterActionNamesNoRule: the last action done on a query is
// the one its ending is joined with: a person's cancel after a rule's (or
// a rule's terminate that the ending does not match) names no rule.
func TestAPersonsLaterActionNamesNoRule(t *testing.T) {
	l := newLedger(8)
	l.record(ledgerKey(1), ended{action: CancelQuery, rule: "spill"})
	l.record(ledgerKey(1), ended{action: CancelQuery})
	if got := l.endedBy(ledgerKey(1), events.QueryCancelled, events.CancelUserRequest); got != "" {
		t.Errorf("a person's cancel after the rule's: ended by %q, want none", got)
	}
	l.record(ledgerKey(2), ended{action: TerminateSession, rule: "idle-tx"})
	if got := l.endedBy(ledgerKey(2), events.QueryCancelled, events.CancelUserRequest); got != "" {
		t.Errorf("a terminate, and the query ended cancelled: ended by %q, want none", got)
	}
	if got := l.endedBy(ledgerKey(2), events.QueryTerminated, ""); got != "idle-tx" {
		t.Errorf("a terminate, and the query ended terminated: ended by %q, want idle-tx", got)
	}
}
