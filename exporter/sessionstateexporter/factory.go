// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/metadata"
)

// NewFactory returns the factory of the sessionstate exporter.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(
		metadata.Type,
		func() component.Config { return createDefaultConfig() },
		exporter.WithMetrics(createMetricsExporter, metadata.MetricsStability),
	)
}

func createMetricsExporter(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, fmt.Errorf("sessionstate: configuration is a %T, not a *sessionstateexporter.Config", cfg)
	}
	e, err := newSessionStateExporter(c, set)
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewMetrics(ctx, set, cfg, e.consumeMetrics,
		exporterhelper.WithStart(e.start),
		exporterhelper.WithShutdown(e.shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
	)
}
