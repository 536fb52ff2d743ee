// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpotel/gpotel/exporter/historyexporter/internal/metadatatest"
)

// Past its bound the queue drops the oldest events: every one is counted,
// and an outage is logged once, however many drops it brings.
func TestDroppedEventsAreCountedAndLoggedOncePerOutage(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	core, logs := observer.New(zap.WarnLevel)
	set := metadatatest.NewSettings(tel)
	set.Logger = zap.New(core)
	e, err := newHistoryExporter(validConfig(), set)
	if err != nil {
		t.Fatal(err)
	}
	e.store.now = func() time.Time { return testNow }
	ctx := context.Background()
	batch := func(i int) *entry {
		return encodeEvents(workload(i*queriesPerSession, queriesPerSession, testNow), e.store.tables, testOldest, testNewest)
	}
	size := int64(len(batch(0).payload)) + entryOverhead
	// Room for two batches.
	if e.queue, _, err = openQueue(ctx, newMemoryClient(), 2*size+size/2); err != nil {
		t.Fatal(err)
	}
	perBatch := batch(0).events()
	consume := func(i int) {
		t.Helper()
		if err := e.consumeLogs(ctx, workload(i*queriesPerSession, queriesPerSession, testNow)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		consume(i)
	}
	if n := logs.FilterMessage("History events dropped").Len(); n != 1 {
		t.Errorf("%d warnings for one outage's drops, want 1", n)
	}
	// The database takes a batch: the outage is over, and the next one is
	// logged again.
	e.finish(ctx, true)
	for i := 5; i < 7; i++ {
		consume(i)
	}
	if n := logs.FilterMessage("History events dropped").Len(); n != 2 {
		t.Errorf("%d warnings for two outages' drops, want 2", n)
	}
	metadatatest.AssertEqualHistoryEventsDropped(t, tel, []metricdata.DataPoint[int64]{
		{Value: 5 * perBatch, Attributes: attribute.NewSet(attribute.String("reason", reasonQueueFull))},
	}, metricdatatest.IgnoreTimestamp())
}
