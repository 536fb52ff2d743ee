// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package finishedworkconnector

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/gpotel/gpotel/connector/finishedworkconnector/internal/metadata"
)

// NewFactory returns the factory of the finishedwork connector.
func NewFactory() connector.Factory {
	return connector.NewFactory(metadata.Type, createDefaultConfig,
		connector.WithMetricsToLogs(createMetricsToLogs, metadata.MetricsToLogsStability))
}

func createMetricsToLogs(_ context.Context, set connector.Settings, _ component.Config, next consumer.Logs) (connector.Metrics, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &finishedWork{next: next, telemetry: tb}, nil
}
