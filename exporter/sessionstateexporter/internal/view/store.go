// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package view

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/metadata"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/paging"
	"github.com/gpotel/gpotel/internal/clockstep"
	"github.com/gpotel/gpotel/internal/pipeline"
)

// View is one immutable generation of the store: every reader works on the
// view it loaded, so a request never sees half of a snapshot.
type View struct {
	// Time is the newest snapshot's time.
	Time time.Time
	// Sessions are ordered by key.
	Sessions []*Session
	ByKey    map[pipeline.SessionKey]*Session
	// Queries are the newest snapshot's query resources by key.
	Queries map[QueryID]*QueryRecord

	// Received is when the exporter stored the view (monotonic clock), Lag
	// how old the snapshot already was then; Interval is the time since the
	// view before it was stored: the collection interval as seen here.
	Received time.Time
	Lag      time.Duration
	Interval time.Duration

	// derived holds what services build from the view, once each.
	derived sync.Map
}

// Age is how old the view's snapshot is at now: measured from when it was
// stored on the monotonic clock, so a wall-clock step does not make a
// frozen view look new.
func (v *View) Age(now time.Time) time.Duration {
	return v.Lag + now.Sub(v.Received)
}

// Live reports whether the newest snapshot holds the session, as opposed to
// one kept for the grace period.
func (v *View) Live(s *Session) bool {
	return s.Seen.Equal(v.Time)
}

// Derived is what a service keeps beside the view under key (GetGPSessions'
// sort orders): made by build on first use, dropped with the view.
func (v *View) Derived(key any, build func() any) any {
	if d, ok := v.derived.Load(key); ok {
		return d
	}
	d, _ := v.derived.LoadOrStore(key, build())
	return d
}

// Prepare readies next, about to replace prev, before any reader sees it.
type Prepare func(prev, next *View)

// Config is how the store keeps sessions.
type Config struct {
	// Hostname, when set, is the hostname every session reports; else the
	// snapshot's host.name, else FallbackHost.
	Hostname, FallbackHost string
	// Grace keeps a session that left the newest snapshot this long.
	Grace       time.Duration
	MaxSessions int
	// LastWindow is the window that fills last_metrics, for the log.
	LastWindow time.Duration
}

// Store keeps the latest state of every session.
type Store struct {
	logger      *zap.Logger
	grace       time.Duration
	maxSessions int
	lastWindow  time.Duration

	// ingest serializes writers; readers only load current.
	ingest   sync.Mutex
	reader   outputReader
	boundHit bool
	current  atomic.Pointer[View]
	prepare  Prepare

	windowMissingLogged atomic.Bool

	// telemetry counts what became of each batch; nil counts nothing.
	telemetry *metadata.TelemetryBuilder
}

// count adds n to one of the exporter's own counters.
func (st *Store) count(counter func(*metadata.TelemetryBuilder) metric.Int64Counter, n int) {
	if st.telemetry != nil && n > 0 {
		counter(st.telemetry).Add(context.Background(), int64(n))
	}
}

// NewStore keeps sessions as cfg says; telemetry (nil: none) counts what
// became of each batch, prepare (nil: none) readies each view.
func NewStore(cfg Config, logger *zap.Logger, telemetry *metadata.TelemetryBuilder, prepare Prepare) *Store {
	st := &Store{
		logger:      logger,
		grace:       cfg.Grace,
		maxSessions: cfg.MaxSessions,
		lastWindow:  cfg.LastWindow,
		reader:      outputReader{hostOverride: cfg.Hostname, fallbackHost: cfg.FallbackHost},
		telemetry:   telemetry,
		prepare:     prepare,
	}
	st.current.Store(&View{ByKey: map[pipeline.SessionKey]*Session{}})
	return st
}

// Load is the newest view.
func (st *Store) Load() *View {
	return st.current.Load()
}

// Backends is a live session's backends for GetSessionMemoryContexts.
func (st *Store) Backends(key pipeline.SessionKey) ([]pipeline.BackendRef, time.Time, bool) {
	v := st.Load()
	s := v.ByKey[key]
	if s == nil || !v.Live(s) {
		return nil, v.Time, false
	}
	return s.Backends, v.Time, true
}

// Consume replaces the store's content with one snapshot.
func (st *Store) Consume(b *Batch) {
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
	old := st.Load()
	// A replayed or late snapshot (the processor forwards those without
	// figures) must not replace the newer one; a much older one means the
	// wall clock went back, and what was served belongs to another timeline.
	base := old
	if !old.Time.IsZero() && !snap.time.After(old.Time) {
		if !clockstep.SteppedBack(old.Time, snap.time) {
			st.logger.Warn("snapshot not newer than the one already served was ignored",
				zap.Time("snapshot_time", snap.time), zap.Time("served_time", old.Time))
			st.count(func(tb *metadata.TelemetryBuilder) metric.Int64Counter { return tb.SessionstateSnapshotsIgnored }, 1)
			return
		}
		st.logger.Warn("snapshot much older than the one served: the wall clock went back; serving it, without the sessions kept for the grace period",
			zap.Time("snapshot_time", snap.time), zap.Time("served_time", old.Time))
		base = &View{}
	}
	if snap.lastWindowMissing > 0 && st.windowMissingLogged.CompareAndSwap(false, true) {
		st.logger.Warn("sessions lack the last_metrics_window figures: last_metrics is left empty for them; "+
			"configure the same window in the snapshotdiff processor",
			zap.Duration("last_metrics_window", st.lastWindow), zap.Int("sessions", snap.lastWindowMissing))
	}
	next := st.nextView(base, snap)
	next.Received = time.Now()
	next.Lag = max(0, next.Received.Sub(snap.time))
	if !old.Received.IsZero() {
		next.Interval = next.Received.Sub(old.Received)
	}
	if st.prepare != nil {
		st.prepare(old, next)
	}
	st.current.Store(next)
	st.count(func(tb *metadata.TelemetryBuilder) metric.Int64Counter { return tb.SessionstateSnapshots }, 1)
}

// nextView builds the generation after old: the snapshot's sessions, then the
// ones still inside the grace period, newest first, up to maxSessions.
func (st *Store) nextView(old *View, snap processorOutput) *View {
	byKey := make(map[pipeline.SessionKey]*Session, len(snap.sessions))
	kept := make([]*Session, 0, min(len(snap.sessions), st.maxSessions))
	offered := 0
	for _, s := range snap.sessions {
		if prev, dup := byKey[s.Key]; dup {
			// Two rows for one key: the later one wins.
			kept[slices.Index(kept, prev)] = s
			byKey[s.Key] = s
			continue
		}
		offered++
		if len(kept) >= st.maxSessions {
			continue
		}
		byKey[s.Key] = s
		kept = append(kept, s)
	}
	var graced []*Session
	for _, s := range old.Sessions {
		if _, present := byKey[s.Key]; present {
			continue
		}
		if snap.time.Sub(s.Seen) <= st.grace {
			graced = append(graced, s)
		}
	}
	offered += len(graced)
	slices.SortStableFunc(graced, func(a, b *Session) int { return b.Seen.Compare(a.Seen) })
	for _, s := range graced {
		if len(kept) >= st.maxSessions {
			break
		}
		byKey[s.Key] = s
		kept = append(kept, s)
	}
	st.logBound(offered, len(kept))
	st.count(func(tb *metadata.TelemetryBuilder) metric.Int64Counter { return tb.SessionstateSessionsDropped }, offered-len(kept))
	slices.SortFunc(kept, func(a, b *Session) int { return a.Key.Compare(b.Key) })
	return &View{Time: snap.time, Sessions: kept, ByKey: byKey, Queries: snap.queryByID}
}

// logBound says once when max_sessions starts dropping sessions and once when
// it stops.
func (st *Store) logBound(offered, kept int) {
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

// processorOutput is what one ConsumeMetrics call delivered, as the
// exporter serves it.
type processorOutput struct {
	time     time.Time
	host     string
	sessions []*Session
	// hasSnapshot: a snapshot resource was present (it may hold no session).
	hasSnapshot bool
	// invalid counts session resources without a usable identity.
	invalid int
	// lastWindowMissing counts sessions that lack the last_metrics window.
	lastWindowMissing int
	// queries are the query resources (running and recently ended queries).
	queries   []*QueryRecord
	queryByID map[QueryID]*QueryRecord
}

// outputReader turns a decoded batch into the sessions the store serves:
// their time and the hostname they report.
type outputReader struct {
	hostOverride string
	fallbackHost string
}

func (p *outputReader) read(b *Batch) processorOutput {
	out := processorOutput{sessions: b.Sessions, hasSnapshot: len(b.Snapshots) > 0, invalid: b.Invalid,
		lastWindowMissing: b.LastWindowMissing, queries: b.Queries}
	for _, h := range b.Snapshots {
		out.host = h.Coordinator
		if h.Time != 0 {
			out.time = h.Time.AsTime().UTC()
		}
	}
	if out.time.IsZero() {
		out.time = b.SessionTime
	}
	if out.time.IsZero() {
		// Points without timestamps: the arrival time is the best we know.
		out.time = time.Now().UTC()
	}
	host := p.hostOverride
	if host == "" {
		host = out.host
	}
	out.queryByID = attachQueries(out.sessions, out.queries)
	ts := timestamppb.New(out.time)
	for _, s := range out.sessions {
		s.Seen = out.time
		s.State.Time = ts
		if host != "" {
			s.State.Hostname = host
		} else if s.State.Hostname == "" {
			s.State.Hostname = p.fallbackHost
		}
		s.EncodedSize = paging.ItemLen(proto.Size(s.State))
	}
	return out
}
