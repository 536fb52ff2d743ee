// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadata"
)

// greenplumSource is a cluster source that can read the server's own
// figures (the database source; the tests' in-memory sources cannot).
type greenplumSource interface {
	ReadGreenplumFigures(ctx context.Context) (*greenplumFigures, error)
}

// ReadGreenplumFigures reads the server's own figures on a connection of
// the pool, in the shape the last discovery learnt.
func (s *pgSource) ReadGreenplumFigures(ctx context.Context) (*greenplumFigures, error) {
	s.mu.Lock()
	d, columns := s.dialect, s.columns
	s.mu.Unlock()
	if d == "" || columns == nil {
		return nil, errNoShapeYet
	}
	pool, err := s.getPool()
	if err != nil {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, &connectError{err}
	}
	defer conn.Release()
	return readGreenplumFigures(ctx, conn.Conn(), s.shape(d, columns)), nil
}

// errNoShapeYet: no discovery has run, so the dialect and columns the
// statements depend on are unknown; the next interval tries again.
var errNoShapeYet = errors.New("no discovery yet: the server's shape is unknown")

// greenplumReader reads the server's own figures on their own interval, so
// a slow view never holds a snapshot back: each scrape takes the latest
// read, carried from snapshot to snapshot until another replaces it or it
// grows older than max_age (then it is dropped, and counted).
type greenplumReader struct {
	cfg       GreenplumFiguresConfig
	source    greenplumSource
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder

	latest  atomic.Pointer[greenplumReading]
	stop    context.CancelFunc
	done    chan struct{}
	reasons reasonLog // per figure
}

// greenplumReading is one read, per session.
type greenplumReading struct {
	at        time.Time
	bySession map[int64]*snapshot.GreenplumSession
}

func newGreenplumReader(cfg GreenplumFiguresConfig, source greenplumSource, logger *zap.Logger, tb *metadata.TelemetryBuilder) *greenplumReader {
	return &greenplumReader{cfg: cfg, source: source, logger: logger, telemetry: tb}
}

// start reads at once and then every interval, until shutdown.
func (r *greenplumReader) start() {
	ctx, stop := context.WithCancel(context.Background())
	r.stop, r.done = stop, make(chan struct{})
	go func() {
		defer close(r.done)
		tick := time.NewTicker(r.cfg.Interval)
		defer tick.Stop()
		for {
			r.readOnce(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C: // a read longer than the interval skips the ticks it overran
			}
		}
	}()
}

func (r *greenplumReader) shutdown() {
	if r.stop != nil {
		r.stop()
		<-r.done
	}
}

func (r *greenplumReader) readOnce(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StatementTimeout)
	defer cancel()
	f, err := r.source.ReadGreenplumFigures(ctx)
	if errors.Is(err, errNoShapeYet) {
		return // the collector just started: not a failure
	}
	if err != nil {
		if ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			r.telemetry.GpsessionGreenplumFiguresFailed.Add(ctx, 1)
			r.note("greenplum figures", err)
		}
		return
	}
	for _, fe := range []struct {
		name string
		err  error
	}{{"spill", f.SpillErr}, {"lock waits", f.WaitsErr}, {"session memory", f.MemoryErr}} {
		var absent absentError
		var partial partialError
		if fe.err != nil && !errors.As(fe.err, &absent) && !errors.As(fe.err, &partial) {
			r.telemetry.GpsessionGreenplumFiguresFailed.Add(ctx, 1)
		}
		r.note(fe.name, fe.err)
	}
	r.latest.Store(&greenplumReading{at: f.at, bySession: f.bySession()})
}

// note logs a figure's reason when it changes (and once when it clears);
// only the reading goroutine calls it.
func (r *greenplumReader) note(figure string, err error) {
	reason := ""
	if err != nil {
		reason = err.Error()
	}
	if !r.reasons.changed(figure, reason) {
		return
	}
	var absent absentError
	var partial partialError
	switch {
	case reason == "":
		r.logger.Info("Greenplum figure readable again", zap.String("figure", figure))
	case errors.As(err, &absent):
		r.logger.Info("Greenplum figure absent: the server offers no view for it", zap.String("figure", figure), zap.String("reason", reason))
	case errors.As(err, &partial):
		r.logger.Warn("Greenplum figure partial", zap.String("figure", figure), zap.String("reason", reason))
	default:
		r.logger.Warn("Greenplum figure not read; it is absent from snapshots until a read succeeds", zap.String("figure", figure), zap.String("reason", reason))
	}
}

// current is the latest read for a snapshot taken at now; nil when there
// is none or it is older than max_age (dropped, and counted, once).
func (r *greenplumReader) current(ctx context.Context, now time.Time) map[int64]*snapshot.GreenplumSession {
	if r == nil {
		return nil
	}
	g := r.latest.Load()
	if g == nil {
		return nil
	}
	if now.Sub(g.at) > r.cfg.MaxAge {
		if r.latest.CompareAndSwap(g, nil) {
			r.telemetry.GpsessionGreenplumFiguresDropped.Add(ctx, 1)
			r.logger.Debug("Greenplum figures too old for the snapshot; left out", zap.Time("read_at", g.at))
		}
		return nil
	}
	return g.bySession
}

// bySession turns a read's rows into each session's figures. A figure the
// server does not have stays absent (nil), never zero.
func (f *greenplumFigures) bySession() map[int64]*snapshot.GreenplumSession {
	out := map[int64]*snapshot.GreenplumSession{}
	of := func(id int64) *snapshot.GreenplumSession {
		g := out[id]
		if g == nil {
			g = &snapshot.GreenplumSession{}
			out[id] = g
		}
		return g
	}
	for _, s := range f.Spill {
		g := of(s.Session)
		g.Spill = append(g.Spill, snapshot.Spill{Segment: s.Segment, CommandCount: s.CommandCount, Bytes: s.Bytes, Files: s.Files})
	}
	for _, w := range f.Waits {
		of(w.Session).Wait = &snapshot.LockWait{Segment: w.Segment, Mode: w.WantedMode, Object: w.Object, Blocker: w.Blocker, BlockerMode: w.BlockerMode}
	}
	for _, m := range f.Memory {
		g := of(m.Session)
		g.Memory = append(g.Memory, snapshot.SegmentMemory{Segment: m.Segment, Bytes: m.VmemMB << 20, Runaway: m.Runaway})
	}
	return out
}
