// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionaction

import (
	"sync"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
)

// LedgerSize bounds the actions the ledger remembers: the oldest goes
// first. A query's ending is built a snapshot or a few after the action,
// so this is thousands of cancels per collection interval to spare.
const LedgerSize = 4096

// QueryKey names a query as the snapshots and its finished-work event do:
// its session, its command count (0: the server numbers none) and its
// start (unix ns).
type QueryKey struct {
	Session pipeline.SessionKey
	Ccnt    int64
	Start   int64
}

// ended is the last action the server did on a query.
type ended struct {
	action Action
	rule   string // "": a person's, through the ActionService
}

// ledger remembers, per query, the last cancel or terminate the server
// did on it, within LedgerSize queries: what the query's ending is joined
// with to say which rule ended it.
type ledger struct {
	mu    sync.Mutex
	by    map[QueryKey]ended
	ring  []QueryKey // insertion order; next is the oldest once full
	next  int
	limit int
}

func newLedger(limit int) *ledger {
	return &ledger{by: map[QueryKey]ended{}, limit: limit}
}

// endings is the process's ledger: every Actor writes it, the snapshotdiff
// processor reads it when it builds a finished query's event. One process
// holds one collector, whose components share it as they share the server.
var endings = newLedger(LedgerSize)

func (l *ledger) record(k QueryKey, e ended) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, known := l.by[k]; !known {
		if len(l.ring) < l.limit {
			l.ring = append(l.ring, k)
		} else {
			delete(l.by, l.ring[l.next])
			l.ring[l.next] = k
			l.next = (l.next + 1) % l.limit
		}
	}
	l.by[k] = e
}

// endedBy is the rule whose action ended the query as it ended: its last
// action was that rule's cancel and the query was cancelled at a user's
// request (as pg_cancel_backend's cancel says), or its terminate and the
// query was terminated. "" for any other ending, whatever acted on it.
func (l *ledger) endedBy(k QueryKey, status, cancelReason string) string {
	l.mu.Lock()
	e, ok := l.by[k]
	l.mu.Unlock()
	switch {
	case !ok || e.rule == "":
	case e.action == CancelQuery && status == events.QueryCancelled && cancelReason == events.CancelUserRequest:
		return e.rule
	case e.action == TerminateSession && status == events.QueryTerminated:
		return e.rule
	}
	return ""
}

// EndedByRule is the rule that ended the query k, which ended with status
// (and cancelReason, of a cancelled one); "" when none did: it ended by
// itself, a person's action ended it, or the rule's action was not done.
func EndedByRule(k QueryKey, status, cancelReason string) string {
	return endings.endedBy(k, status, cancelReason)
}

// recordEnding notes an action the server did on t's running query.
func recordEnding(t Target, req Request) {
	if (req.Action != CancelQuery && req.Action != TerminateSession) || !t.Running {
		return
	}
	var start int64
	if !t.QueryStart.IsZero() {
		start = t.QueryStart.UnixNano()
	}
	endings.record(QueryKey{Session: t.Key, Ccnt: t.QueryCcnt, Start: start}, ended{action: req.Action, rule: req.Rule})
}
