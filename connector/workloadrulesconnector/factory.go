// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workloadrulesconnector

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/gpotel/gpotel/connector/workloadrulesconnector/internal/metadata"
)

// NewFactory returns the factory of the workloadrules connector.
func NewFactory() connector.Factory {
	return connector.NewFactory(metadata.Type, createDefaultConfig,
		connector.WithMetricsToLogs(createMetricsToLogs, metadata.MetricsToLogsStability))
}

func createMetricsToLogs(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Logs) (connector.Metrics, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, fmt.Errorf("workloadrules: configuration is a %T, not a *workloadrulesconnector.Config", cfg)
	}
	var actor Actor // Validate refuses a rule that would act without the action connection
	if c.Actions.Host != "" {
		actor = newActionPath(c.Actions, c.ActionTimeout, c.MaxViewAge)
	}
	return newWorkloadRules(c, set, next, actor)
}
