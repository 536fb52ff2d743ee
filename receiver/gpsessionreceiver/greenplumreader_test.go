// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"

	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadata"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadatatest"
)

// scriptedFigures answers reads of the server's own figures as told.
type scriptedFigures struct {
	figures *greenplumFigures
	err     error
}

func (s *scriptedFigures) ReadGreenplumFigures(context.Context) (*greenplumFigures, error) {
	return s.figures, s.err
}

// A read is carried from snapshot to snapshot until it is older than
// max_age, then left out and counted once; a failed read leaves the
// figure absent and is counted; a read before discovery is neither.
func TestGreenplumFiguresAreCarriedThenDroppedWhenTooOld(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	tb, err := metadata.NewTelemetryBuilder(tt.NewTelemetrySettings())
	if err != nil {
		t.Fatal(err)
	}
	read := time.Now()
	src := &scriptedFigures{figures: &greenplumFigures{at: read,
		Spill: []spillRow{{Session: 7, CommandCount: 3, Segment: 0, Bytes: 1 << 20, Files: 1}},
		Waits: []lockWait{{Session: 8, Segment: -1, WantedMode: "AccessShareLock", Object: "public.t", Blocker: 7, BlockerMode: "AccessExclusiveLock"}},
		// A view the server does not offer is no failed read; a refused one is.
		MemoryErr: absentError("gp_internal_tools is not installed"),
	}}
	cfg := GreenplumFiguresConfig{Enabled: true, Interval: 10 * time.Second, StatementTimeout: time.Second, MaxAge: 30 * time.Second}
	r := newGreenplumReader(cfg, src, zap.NewNop(), tb)
	ctx := context.Background()
	r.readOnce(ctx)
	src.figures.at, src.figures.Waits, src.figures.WaitsErr = read, nil, errors.New("permission denied for view pg_locks")
	r.readOnce(ctx)
	src.figures.Waits, src.figures.WaitsErr = []lockWait{{Session: 8, Segment: -1, WantedMode: "AccessShareLock", Object: "public.t", Blocker: 7,
		BlockerMode: "AccessExclusiveLock"}}, nil
	r.readOnce(ctx)

	for _, at := range []time.Duration{0, 10 * time.Second, 30 * time.Second} {
		got := r.current(ctx, read.Add(at))
		if got[7] == nil || len(got[7].Spill) != 1 || got[8] == nil || got[8].Wait == nil || got[8].Wait.Blocker != 7 {
			t.Fatalf("at +%s: %+v, want session 7's spill and session 8's wait", at, got)
		}
		if got[7].Memory != nil {
			t.Errorf("session memory the server does not have reads %+v, want absent", got[7].Memory)
		}
	}
	for range 2 {
		if got := r.current(ctx, read.Add(31*time.Second)); got != nil {
			t.Fatalf("a read older than max_age is used: %+v", got)
		}
	}
	metadatatest.AssertEqualGpsessionGreenplumFiguresDropped(t, tt, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualGpsessionGreenplumFiguresFailed(t, tt, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())

	src.figures, src.err = nil, errNoShapeYet
	r.readOnce(ctx)
	src.err = context.DeadlineExceeded
	r.readOnce(ctx)
	metadatatest.AssertEqualGpsessionGreenplumFiguresFailed(t, tt, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
	if got := r.current(ctx, time.Now()); got != nil {
		t.Errorf("after failed reads the dropped figures came back: %+v", got)
	}
}
