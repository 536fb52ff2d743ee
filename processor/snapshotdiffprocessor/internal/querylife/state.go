// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package querylife

import (
	"time"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// Tracker attributes every process's steps to its session's queries
// (docs/pipeline.md, query figures) and tells when each query and session
// ended, and how (docs/pipeline.md, finished work).
type Tracker struct {
	keep        int64 // ns an ended query stays: the longest window
	maxFinished int
	sessions    map[pipeline.SessionKey]*sessionQueries
	// retired are sessions whose key a new session took (a reused pid on
	// PostgreSQL) while their event was still due.
	retired []retiredSession
	rows    []rowSighting // by process row
	// first is the time of the first snapshot of this timeline.
	first int64
	// opened is when the collector started (unix ns), 0 after a clock
	// step: what began after it was seen from its start.
	opened int64
	// text is a query's text as its event carries it; nil: none (queries::text off).
	text func(string) *string
	// logReadThrough: the coordinator's log records written before it have
	// been heard (unix ns); 0: no log is read.
	logReadThrough int64
	// exitsHeard: exit records come (an exit was heard), so a session that
	// left without its head's exit waits for it.
	exitsHeard bool
	segs       []SegmentUse // room to sort a query's segments in
}

// Config is what a Tracker keeps and writes.
type Config struct {
	Keep        time.Duration // how long an ended query's figures stay: the longest window
	MaxFinished int           // the most ended queries whose figures stay
	// Text is a query's text as its event carries it; nil: none.
	Text func(string) *string
	// Opened is when the collector started (unix ns): what began after it
	// was seen from its start; 0: unknown.
	Opened int64
}

// New is a Tracker that has seen no snapshot.
func New(cfg Config) *Tracker {
	return &Tracker{keep: int64(cfg.Keep), maxFinished: cfg.MaxFinished, sessions: map[pipeline.SessionKey]*sessionQueries{}, text: cfg.Text,
		opened: cfg.Opened}
}

// Restart forgets every timeline: their times belong to a clock that was
// stepped back. Queries seen again are marked partial; what was due an
// event and had not settled gets none (its figures span two clocks).
func (t *Tracker) Restart() {
	clear(t.sessions)
	t.retired = nil
	t.logReadThrough = 0
	t.rows = t.rows[:0]
	t.first, t.opened = 0, 0
}

// watchedFrom is when gpotel began to watch this timeline: the collector's
// start, or the timeline's first snapshot when that came first (after a
// clock step). What started before is partial.
func (t *Tracker) watchedFrom() int64 {
	if t.opened != 0 && t.opened < t.first {
		return t.opened
	}
	return t.first
}

// rowSighting is what the tracker remembers of a process row.
type rowSighting struct {
	id   ProcessID // whose sighting it is: a reused row is a new process
	at   int64     // when it was last read (the snapshot time plus its host's read delay); 0: never
	ccnt int64
}
