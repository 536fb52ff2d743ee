// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/metadata"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/metadatatest"
	"github.com/gpotel/gpotel/internal/pipeline"
)

// The exporter counts what became of each batch in its own telemetry:
// snapshots served and ignored, sessions dropped over max_sessions and
// session resources without their identity.
func TestTelemetryCountsServedIgnoredDroppedAndInvalid(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	tb, err := metadata.NewTelemetryBuilder(tt.NewTelemetrySettings())
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.MaxSessions = 3
	st := newStore(cfg, "", zap.NewNop(), tb)

	st.Consume(decoded(buildSnapshot(t0, sessionsWithUserTime(idRange(1, 6), 2)))) // 5 sessions, 3 kept
	late := buildSnapshot(t0.Add(-time.Second), sessionsWithUserTime(idRange(1, 2), 2))
	st.Consume(decoded(late))
	bad := buildSnapshot(t0.Add(time.Second), sessionsWithUserTime(idRange(1, 2), 2))
	bad.ResourceMetrics().At(1).Resource().Attributes().Remove(pipeline.AttrSessionID)
	st.Consume(decoded(bad))

	at := metricdatatest.IgnoreTimestamp()
	metadatatest.AssertEqualSessionstateSnapshots(t, tt, []metricdata.DataPoint[int64]{{Value: 2}}, at)
	metadatatest.AssertEqualSessionstateSnapshotsIgnored(t, tt, []metricdata.DataPoint[int64]{{Value: 1}}, at)
	// 2 of the first snapshot's 5; the 3 kept stay for the grace period.
	metadatatest.AssertEqualSessionstateSessionsDropped(t, tt, []metricdata.DataPoint[int64]{{Value: 2}}, at)
	metadatatest.AssertEqualSessionstateSessionsInvalid(t, tt, []metricdata.DataPoint[int64]{{Value: 1}}, at)
}
