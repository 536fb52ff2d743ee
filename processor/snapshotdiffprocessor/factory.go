// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor/internal/metadata"
)

// NewFactory returns the factory of the snapshotdiff processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(metadata.Type, createDefaultConfig,
		processor.WithMetrics(createMetrics, metadata.MetricsStability))
}

func createMetrics(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	return createMetricsOpenedAt(ctx, set, cfg, next, time.Now())
}

// createMetricsOpenedAt makes the processor of a collector that started
// at opened: what began after it was seen from its start.
func createMetricsOpenedAt(
	ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics, opened time.Time,
) (processor.Metrics, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, fmt.Errorf("snapshotdiff: configuration is a %T, not a *snapshotdiffprocessor.Config", cfg)
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	p := newSnapshotDiff(c, set.Logger, tb, opened.UnixNano())
	p.next = next
	return processorhelper.NewMetrics(ctx, set, cfg, next, p.processMetrics,
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}),
		processorhelper.WithShutdown(func(context.Context) error {
			tb.Shutdown()
			return nil
		}))
}
