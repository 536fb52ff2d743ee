// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor/internal/metadata"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor/internal/metadatatest"
)

// The processor counts what it did with each batch in its own telemetry:
// snapshots closed with figures, without (a merged batch), closed by a
// newer process batch, and process data it left out.
func TestTelemetryCountsWhatBecameOfEachSnapshot(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tt.NewTelemetrySettings()
	p, err := NewFactory().CreateMetrics(context.Background(), set, &Config{Windows: []time.Duration{time.Minute}}, new(consumertest.MetricsSink))
	if err != nil {
		t.Fatal(err)
	}
	consume := func(md pmetric.Metrics) {
		t.Helper()
		if err := p.ConsumeMetrics(context.Background(), md); err != nil {
			t.Fatal(err)
		}
	}
	for _, md := range snap(0, nil, []int64{1}, proc("sdw1", 0, 1, 100, -10, 1, 0)).Batches() {
		consume(md)
	}
	// Snapshot 60 never closes: its process batch is followed by 120's.
	consume(snap(60, nil, []int64{1}, proc("sdw1", 0, 1, 100, -10, 2, 0)).Batches()[0])
	broken := snap(120, nil, []int64{1}, proc("sdw1", 0, 1, 100, -10, 3, 0), proc("sdw1", 0, 1, 101, -10, 3, 0))
	batches := broken.Batches()
	ms := batches[0].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := range ms.Len() {
		if ms.At(i).Name() == pipeline.MetricProcessInfo {
			ms.At(i).Gauge().DataPoints().At(0).Attributes().Remove(pipeline.AttrProcessPID)
		}
	}
	for _, md := range batches {
		consume(md)
	}
	merged := snap(180, nil, []int64{1}).Metrics()
	snap(180, nil, []int64{1}).Metrics().ResourceMetrics().MoveAndAppendTo(merged.ResourceMetrics())
	consume(merged)

	one := []metricdata.DataPoint[int64]{{Value: 1}}
	metadatatest.AssertEqualSnapshotdiffSnapshots(t, tt, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualSnapshotdiffSnapshotsUnclosed(t, tt, one, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualSnapshotdiffSnapshotsWithoutFigures(t, tt, one, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualSnapshotdiffProcessDataSkipped(t, tt, one, metricdatatest.IgnoreTimestamp())
}
