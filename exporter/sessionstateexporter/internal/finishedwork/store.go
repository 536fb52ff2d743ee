// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package finishedwork

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
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/view"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// Store keeps the processor's finished_query and ended_session
// events (docs/pipeline.md, finished work) for finished_queries::retention
// after each ended, measured in snapshot time, within a count and a byte
// budget: when either is reached the oldest arrival goes first, counted.
type Store struct {
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
	queries      map[view.QueryID]*eventRow
	sessions     map[sessionEventID]*eventRow
	boundHit     bool
}

// Owner is whose the finished work is, as answers report it.
type Owner struct {
	ClusterID string
	// Hostname, when set, is the hostname answers report; else the
	// snapshot's host.name, else FallbackHost.
	Hostname, FallbackHost string
}

// NewStore keeps finished work as cfg says; telemetry (nil: none) counts
// what is left out or dropped.
func NewStore(cfg Config, owner Owner, logger *zap.Logger, telemetry *metadata.TelemetryBuilder) *Store {
	return &Store{
		retention: cfg.Retention, maxEvents: cfg.MaxEvents, maxBytes: cfg.MaxBytes,
		clusterID: owner.ClusterID, hostOverride: owner.Hostname, fallbackHost: owner.FallbackHost, logger: logger, telemetry: telemetry,
		queries: map[view.QueryID]*eventRow{}, sessions: map[sessionEventID]*eventRow{},
	}
}

// The values of the bound attribute of sessionstate_finished_dropped.
const (
	boundEvents = "max_events"
	boundBytes  = "max_bytes"
)

// Consume keeps the events of one batch; now is the newest snapshot's
// time, as the session store serves it.
func (w *Store) Consume(b *view.Batch, now time.Time) {
	if w.retention <= 0 {
		return
	}
	rows := w.read(b.Events)
	host := unique.Make(cmp.Or(w.hostOverride, b.Coordinator(), w.fallbackHost))
	w.mu.Lock()
	defer w.mu.Unlock()
	if !now.IsZero() {
		w.now = now.UnixNano()
		if w.since == 0 {
			w.since = w.now
		}
	}
	for _, r := range rows {
		r.coordinator = host
		w.insert(r)
	}
	w.expire()
	w.bound()
}

// expired tells a row whose retention has passed.
func (w *Store) expired(r *eventRow) bool {
	return r.end() < w.now-int64(w.retention)
}

func (w *Store) insert(r *eventRow) {
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
func (w *Store) popOldest() *eventRow {
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
func (w *Store) compact() {
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
func (w *Store) expire() {
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
func (w *Store) bound() {
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
func (w *Store) dropped(bound string, r *eventRow) {
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
func (w *Store) completeSince() int64 {
	if w.since == 0 {
		return 0
	}
	return max(w.since, w.now-int64(w.retention), w.droppedEnd)
}

// query finds a finished query by its key: held (and within its
// retention), or expired (held, its retention passed), or neither.
func (w *Store) query(id view.QueryID) (r *eventRow, expired bool) {
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

// Has tells whether id's event is kept and not yet past the retention.
func (w *Store) Has(id view.QueryID) bool {
	r, expired := w.query(id)
	return r != nil && !expired
}

// GetGPQuery answers GetGPQuery for a query the newest snapshot no longer
// has, from the finished queries kept.
func (w *Store) GetGPQuery(id view.QueryID, k *yagpcc.QueryKey, collect time.Time) (*yagpcc.GetGPQueryResponse, error) {
	r, expired := w.query(id)
	switch {
	case r != nil && !expired:
		return &yagpcc.GetGPQueryResponse{QueriesData: r.queryRecord(w.clusterID).TotalQueryData(nil, collect)}, nil
	case r != nil:
		return nil, status.Errorf(codes.NotFound, "query %s ended at %s, more than finished_queries::retention (%s) ago: gpotel no longer answers for it",
			view.KeyString(k), time.Unix(0, r.end()).UTC().Format(time.RFC3339Nano), w.retention)
	}
	return nil, status.Error(codes.NotFound, w.notFoundMessage(k))
}

func (w *Store) notFoundMessage(k *yagpcc.QueryKey) string {
	kept := "finished_queries::retention is 0: finished queries are not kept"
	if w != nil && w.retention > 0 {
		kept = fmt.Sprintf("finished queries for finished_queries::retention (%s) after they ended, unless max_events or max_bytes dropped them sooner", w.retention)
	}
	return fmt.Sprintf("no query %s: gpotel answers for running queries, those that ended within the processor's longest window, and %s",
		view.KeyString(k), kept)
}

// read keeps each event as a row; one left out is counted, the first of a
// batch logged with why.
func (w *Store) read(events []view.Event) []*eventRow {
	rows := make([]*eventRow, 0, len(events))
	bad := 0
	for _, e := range events {
		l := queryLayout
		if e.Kind == pipeline.KindEndedSession {
			l = sessionLayout
		}
		r, err := l.read(e.Attrs)
		if err != nil {
			if bad == 0 {
				w.logger.Warn("finished work event left out", zap.String("kind", l.kind.String()), zap.Error(err))
			}
			bad++
			continue
		}
		rows = append(rows, r)
	}
	if bad > 0 && w.telemetry != nil {
		w.telemetry.SessionstateSessionsInvalid.Add(context.Background(), int64(bad))
	}
	return rows
}
