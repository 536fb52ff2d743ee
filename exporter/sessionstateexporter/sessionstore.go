// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/metadata"
	"github.com/gpotel/gpotel/internal/clockstep"
	"github.com/gpotel/gpotel/internal/pipeline"
)

// view is one immutable generation of the store: every reader works on the
// view it loaded, so a request never sees half of a snapshot.
type view struct {
	// time is the newest snapshot's time.
	time time.Time
	// sessions are ordered by key.
	sessions []*session
	byKey    map[pipeline.SessionKey]*session
	orders   orderCache
	// queries are the newest snapshot's query resources by key.
	queries map[queryID]*queryRecord

	// received is when the exporter stored the view (monotonic clock), lag
	// how old the snapshot already was then; interval is the time since the
	// view before it was stored: the collection interval as seen here.
	received time.Time
	lag      time.Duration
	interval time.Duration
}

// age is how old the view's snapshot is at now: measured from when it was
// stored on the monotonic clock, so a wall-clock step does not make a
// frozen view look new.
func (v *view) age(now time.Time) time.Duration {
	return v.lag + now.Sub(v.received)
}

// live reports whether the newest snapshot holds the session, as opposed to
// one kept for the grace period.
func (v *view) live(s *session) bool {
	return s.seen.Equal(v.time)
}

// sessionStore keeps the latest state of every session.
type sessionStore struct {
	logger      *zap.Logger
	grace       time.Duration
	maxSessions int
	lastWindow  time.Duration

	// ingest serializes writers; readers only load current.
	ingest   sync.Mutex
	reader   outputReader
	boundHit bool
	current  atomic.Pointer[view]

	windowMissingLogged atomic.Bool

	// telemetry counts what became of each batch; nil counts nothing.
	telemetry *metadata.TelemetryBuilder
}

// count adds n to one of the exporter's own counters.
func (st *sessionStore) count(counter func(*metadata.TelemetryBuilder) metric.Int64Counter, n int) {
	if st.telemetry != nil && n > 0 {
		counter(st.telemetry).Add(context.Background(), int64(n))
	}
}

func newSessionStore(cfg *Config, logger *zap.Logger, fallbackHost string) *sessionStore {
	st := &sessionStore{
		logger:      logger,
		grace:       cfg.SessionGracePeriod,
		maxSessions: cfg.MaxSessions,
		lastWindow:  cfg.LastMetricsWindow,
		reader:      outputReader{hostOverride: cfg.Hostname, fallbackHost: fallbackHost},
	}
	st.current.Store(&view{byKey: map[pipeline.SessionKey]*session{}})
	return st
}

func (st *sessionStore) load() *view {
	return st.current.Load()
}

// Backends is a live session's backends for GetSessionMemoryContexts.
func (st *sessionStore) Backends(key pipeline.SessionKey) ([]pipeline.BackendRef, time.Time, bool) {
	v := st.load()
	s := v.byKey[key]
	if s == nil || !v.live(s) {
		return nil, v.time, false
	}
	return s.backends, v.time, true
}

// consume replaces the store's content with one snapshot.
func (st *sessionStore) consume(b *batch) {
	st.ingest.Lock()
	defer st.ingest.Unlock()

	snap := st.reader.read(b)
	if snap.invalid > 0 {
		st.logger.Warn("session resources without gpotel.session.id or gpotel.tm_id were skipped",
			zap.Int("skipped", snap.invalid))
		st.count(func(tb *metadata.TelemetryBuilder) metric.Int64Counter { return tb.SessionstateSessionsInvalid }, snap.invalid)
	}
	if len(snap.sessions) == 0 && !snap.hasSnapshot {
		// Not a snapshot (nothing of ours in it): keep what we have.
		return
	}
	old := st.load()
	// A replayed or late snapshot (the processor forwards those without
	// figures) must not replace the newer one; a much older one means the
	// wall clock went back, and what was served belongs to another timeline.
	base := old
	if !old.time.IsZero() && !snap.time.After(old.time) {
		if !clockstep.SteppedBack(old.time, snap.time) {
			st.logger.Warn("snapshot not newer than the one already served was ignored",
				zap.Time("snapshot_time", snap.time), zap.Time("served_time", old.time))
			st.count(func(tb *metadata.TelemetryBuilder) metric.Int64Counter { return tb.SessionstateSnapshotsIgnored }, 1)
			return
		}
		st.logger.Warn("snapshot much older than the one served: the wall clock went back; serving it, without the sessions kept for the grace period",
			zap.Time("snapshot_time", snap.time), zap.Time("served_time", old.time))
		base = &view{}
	}
	if snap.lastWindowMissing > 0 && st.windowMissingLogged.CompareAndSwap(false, true) {
		st.logger.Warn("sessions lack the last_metrics_window figures: last_metrics is left empty for them; "+
			"configure the same window in the snapshotdiff processor",
			zap.Duration("last_metrics_window", st.lastWindow), zap.Int("sessions", snap.lastWindowMissing))
	}
	next := st.nextView(base, snap)
	next.received = time.Now()
	next.lag = max(0, next.received.Sub(snap.time))
	if !old.received.IsZero() {
		next.interval = next.received.Sub(old.received)
	}
	next.prebuildOrders(old)
	st.current.Store(next)
	st.count(func(tb *metadata.TelemetryBuilder) metric.Int64Counter { return tb.SessionstateSnapshots }, 1)
}

// nextView builds the generation after old: the snapshot's sessions, then the
// ones still inside the grace period, newest first, up to maxSessions.
func (st *sessionStore) nextView(old *view, snap processorOutput) *view {
	byKey := make(map[pipeline.SessionKey]*session, len(snap.sessions))
	kept := make([]*session, 0, min(len(snap.sessions), st.maxSessions))
	offered := 0
	for _, s := range snap.sessions {
		if prev, dup := byKey[s.key]; dup {
			// Two rows for one key: the later one wins.
			kept[slices.Index(kept, prev)] = s
			byKey[s.key] = s
			continue
		}
		offered++
		if len(kept) >= st.maxSessions {
			continue
		}
		byKey[s.key] = s
		kept = append(kept, s)
	}
	var graced []*session
	for _, s := range old.sessions {
		if _, present := byKey[s.key]; present {
			continue
		}
		if snap.time.Sub(s.seen) <= st.grace {
			graced = append(graced, s)
		}
	}
	offered += len(graced)
	slices.SortStableFunc(graced, func(a, b *session) int { return b.seen.Compare(a.seen) })
	for _, s := range graced {
		if len(kept) >= st.maxSessions {
			break
		}
		byKey[s.key] = s
		kept = append(kept, s)
	}
	st.logBound(offered, len(kept))
	st.count(func(tb *metadata.TelemetryBuilder) metric.Int64Counter { return tb.SessionstateSessionsDropped }, offered-len(kept))
	slices.SortFunc(kept, func(a, b *session) int { return a.key.Compare(b.key) })
	return &view{time: snap.time, sessions: kept, byKey: byKey, queries: snap.queryByID}
}

// logBound says once when max_sessions starts dropping sessions and once when
// it stops.
func (st *sessionStore) logBound(offered, kept int) {
	hit := offered > kept
	switch {
	case hit && !st.boundHit:
		st.logger.Warn("max_sessions reached: sessions beyond the bound are not served until it is raised or sessions end",
			zap.Int("max_sessions", st.maxSessions), zap.Int("sessions", offered), zap.Int("dropped", offered-kept))
	case !hit && st.boundHit:
		st.logger.Info("session count back under max_sessions", zap.Int("max_sessions", st.maxSessions), zap.Int("sessions", kept))
	}
	st.boundHit = hit
}
