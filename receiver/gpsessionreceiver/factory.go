// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadata"
)

// NewFactory creates the gpsession receiver factory.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(
		metadata.Type,
		func() component.Config { return createDefaultConfig() },
		receiver.WithMetrics(createMetrics, metadata.MetricsStability))
}

func createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, errors.New("gpsession: configuration is not a *gpsessionreceiver.Config")
	}
	s, err := newSessionScraper(c, set, newPGSource(c), next)
	if err != nil {
		return nil, err
	}
	s.newLocal = localReaderFactory(c, set)
	sc, err := scraper.NewMetrics(s.scrape, scraper.WithStart(s.start), scraper.WithShutdown(s.shutdown))
	if err != nil {
		return nil, err
	}
	return scraperhelper.NewMetricsController(&c.ControllerConfig, set, next,
		scraperhelper.AddMetricsScraper(metadata.Type, sc))
}
