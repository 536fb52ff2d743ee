// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
	"unique"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/metadata"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// finishedWork keeps the processor's finished_query and ended_session
// events (docs/pipeline.md, finished work) for finished_queries::retention
// after each ended, measured in snapshot time, within a count and a byte
// budget: when either is reached the oldest arrival goes first, counted.
type finishedWork struct {
	retention           time.Duration
	maxEvents, maxBytes int
	clusterID           string
	// hostOverride, else the snapshot's host.name, else fallbackHost, is
	// the hostname answers report.
	hostOverride, fallbackHost string
	logger                     *zap.Logger
	telemetry                  *metadata.TelemetryBuilder

	mu sync.RWMutex
	// now is the newest snapshot's time and since the first's (unix ns):
	// nothing that ended before since is known.
	now, since int64
	// droppedEnd is the latest end of an event a bound dropped.
	droppedEnd int64
	// queue holds the rows in arrival order from head; nil: replaced.
	queue        []*eventRow
	head         int
	count, bytes int
	queries      map[queryID]*eventRow
	sessions     map[sessionEventID]*eventRow
	boundHit     bool
}

func newFinishedWork(cfg *Config, logger *zap.Logger, fallbackHost string) *finishedWork {
	return &finishedWork{
		retention: cfg.FinishedQueries.Retention, maxEvents: cfg.FinishedQueries.MaxEvents, maxBytes: cfg.FinishedQueries.MaxBytes,
		clusterID: cfg.ClusterID, hostOverride: cfg.Hostname, fallbackHost: fallbackHost, logger: logger,
		queries: map[queryID]*eventRow{}, sessions: map[sessionEventID]*eventRow{},
	}
}

// The values of the bound attribute of sessionstate_finished_dropped.
const (
	boundEvents = "max_events"
	boundBytes  = "max_bytes"
)

// consume keeps the events of one batch; now is the newest snapshot's
// time, as the session store serves it.
func (w *finishedWork) consume(b *batch, now time.Time) {
	if w.retention <= 0 {
		return
	}
	if bad := b.firstBadEvent; bad != nil {
		w.logger.Warn("finished work event left out", zap.String("kind", bad.kind.String()), zap.Error(bad.err))
	}
	if b.badEvents > 0 && w.telemetry != nil {
		w.telemetry.SessionstateSessionsInvalid.Add(context.Background(), int64(b.badEvents))
	}
	var coordinator string
	for _, h := range b.snapshots {
		coordinator = h.Coordinator
	}
	host := unique.Make(cmp.Or(w.hostOverride, coordinator, w.fallbackHost))
	w.mu.Lock()
	defer w.mu.Unlock()
	if !now.IsZero() {
		w.now = now.UnixNano()
		if w.since == 0 {
			w.since = w.now
		}
	}
	for _, r := range b.events {
		r.coordinator = host
		w.insert(r)
	}
	w.expire()
	w.bound()
}

// expired tells a row whose retention has passed.
func (w *finishedWork) expired(r *eventRow) bool {
	return r.end() < w.now-int64(w.retention)
}

func (w *finishedWork) insert(r *eventRow) {
	if w.expired(r) {
		return
	}
	if size := r.bytes(); size > w.maxBytes {
		w.dropped(boundBytes, r)
		return
	}
	var old *eventRow
	if r.layout == queryLayout {
		id := r.queryID()
		old = w.queries[id]
		w.queries[id] = r
	} else {
		id := r.sessionEventID()
		old = w.sessions[id]
		w.sessions[id] = r
	}
	if old != nil {
		// The processor writes an event once; one written again replaces it.
		if i := slices.Index(w.queue[w.head:], old); i >= 0 {
			w.queue[w.head+i] = nil
		}
		w.count--
		w.bytes -= old.bytes()
	}
	w.queue = append(w.queue, r)
	w.count++
	w.bytes += r.bytes()
}

// popOldest removes the oldest arrival; nil when the queue is empty.
func (w *finishedWork) popOldest() *eventRow {
	for w.head < len(w.queue) {
		r := w.queue[w.head]
		w.queue[w.head] = nil
		w.head++
		if r == nil {
			continue
		}
		if r.layout == queryLayout {
			if id := r.queryID(); w.queries[id] == r {
				delete(w.queries, id)
			}
		} else if id := r.sessionEventID(); w.sessions[id] == r {
			delete(w.sessions, id)
		}
		w.count--
		w.bytes -= r.bytes()
		w.compact()
		return r
	}
	return nil
}

// compact gives the queue's consumed front back once it is half the queue.
func (w *finishedWork) compact() {
	if w.head < 1024 || w.head*2 < len(w.queue) {
		return
	}
	n := copy(w.queue, w.queue[w.head:])
	clear(w.queue[n:])
	w.queue, w.head = w.queue[:n], 0
}

// expire removes the rows at the front whose retention has passed. A row
// behind a younger one waits for it (arrivals come in end order, give or
// take the processor's settling), but is never answered once expired.
func (w *finishedWork) expire() {
	for w.head < len(w.queue) {
		switch r := w.queue[w.head]; {
		case r == nil:
			w.head++
		case w.expired(r):
			w.popOldest()
		default:
			w.compact()
			return
		}
	}
	w.compact()
}

// bound drops the oldest arrivals while a bound is exceeded; it says once
// when the bounds start dropping, and once when expiry has made room again.
func (w *finishedWork) bound() {
	hit := false
	for w.count > w.maxEvents {
		hit = true
		w.dropped(boundEvents, w.popOldest())
	}
	for w.bytes > w.maxBytes {
		hit = true
		w.dropped(boundBytes, w.popOldest())
	}
	switch {
	case hit && !w.boundHit:
		w.boundHit = true
		w.logger.Warn("finished_queries bound reached: the oldest finished queries and sessions are dropped before their retention passes",
			zap.Int("max_events", w.maxEvents), zap.Int("max_bytes", w.maxBytes), zap.Duration("retention", w.retention))
	case !hit && w.boundHit && w.count < w.maxEvents*9/10 && w.bytes < w.maxBytes/10*9:
		w.boundHit = false
		w.logger.Info("finished work back within the finished_queries bounds", zap.Int("events", w.count), zap.Int("bytes", w.bytes))
	}
}

// dropped counts an event a bound dropped.
func (w *finishedWork) dropped(bound string, r *eventRow) {
	if r != nil {
		w.droppedEnd = max(w.droppedEnd, r.end())
	}
	if w.telemetry != nil {
		w.telemetry.SessionstateFinishedDropped.Add(context.Background(), 1,
			metric.WithAttributeSet(attribute.NewSet(attribute.String("bound", bound))))
	}
}

// completeSince is the time from which every event that reached the
// exporter is held: none expired or was dropped that ended at or after it.
// 0 before the first snapshot.
func (w *finishedWork) completeSince() int64 {
	if w.since == 0 {
		return 0
	}
	return max(w.since, w.now-int64(w.retention), w.droppedEnd)
}

// query finds a finished query by its key: held (and within its
// retention), or expired (held, its retention passed), or neither.
func (w *finishedWork) query(id queryID) (r *eventRow, expired bool) {
	if w == nil {
		return nil, false
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	r = w.queries[id]
	if r == nil {
		return nil, false
	}
	if w.expired(r) {
		return r, true
	}
	return r, false
}

// getGPQuery answers GetGPQuery for a query the newest snapshot no longer
// has, from the finished queries kept.
// has tells whether id's event is kept and not yet past the retention.
func (w *finishedWork) has(id queryID) bool {
	r, expired := w.query(id)
	return r != nil && !expired
}

func (w *finishedWork) getGPQuery(id queryID, k *yagpcc.QueryKey, collect time.Time) (*yagpcc.GetGPQueryResponse, error) {
	r, expired := w.query(id)
	switch {
	case r != nil && !expired:
		return &yagpcc.GetGPQueryResponse{QueriesData: r.queryRecord(w.clusterID).totalQueryData(nil, collect)}, nil
	case r != nil:
		return nil, status.Errorf(codes.NotFound, "query %s ended at %s, more than finished_queries::retention (%s) ago: gpotel no longer answers for it",
			queryKeyString(k), time.Unix(0, r.end()).UTC().Format(time.RFC3339Nano), w.retention)
	}
	return nil, status.Error(codes.NotFound, w.notFoundMessage(k))
}

func (w *finishedWork) notFoundMessage(k *yagpcc.QueryKey) string {
	kept := "finished_queries::retention is 0: finished queries are not kept"
	if w != nil && w.retention > 0 {
		kept = fmt.Sprintf("finished queries for finished_queries::retention (%s) after they ended, unless max_events or max_bytes dropped them sooner", w.retention)
	}
	return fmt.Sprintf("no query %s: gpotel answers for running queries, those that ended within the processor's longest window, and %s",
		queryKeyString(k), kept)
}
