// Package sessionstateexporter serves yagpcc's GetGPInfo gRPC API from the
// per-session figures the snapshotdiff processor delivers.
package sessionstateexporter

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
)

const typeStr = "sessionstate"

var componentType = component.MustNewType(typeStr)

// NewFactory returns the factory of the sessionstate exporter.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(
		componentType,
		func() component.Config { return createDefaultConfig() },
		exporter.WithMetrics(createMetricsExporter, component.StabilityLevelAlpha),
	)
}

func createMetricsExporter(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	e := newSessionStateExporter(cfg.(*Config), set)
	return exporterhelper.NewMetrics(ctx, set, cfg, e.consumeMetrics,
		exporterhelper.WithStart(e.start),
		exporterhelper.WithShutdown(e.shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
	)
}
