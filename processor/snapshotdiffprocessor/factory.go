// Package snapshotdiffprocessor turns the gpsession receiver's cumulative
// per-process snapshots into windowed per-session figures.
package snapshotdiffprocessor

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
)

var componentType = component.MustNewType("snapshotdiff")

// NewFactory returns the factory of the snapshotdiff processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(componentType, createDefaultConfig,
		processor.WithMetrics(createMetrics, component.StabilityLevelDevelopment))
}

func createMetrics(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	p := newSnapshotDiff(cfg.(*Config), set.Logger)
	return processorhelper.NewMetrics(ctx, set, cfg, next, p.processMetrics,
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}))
}
