// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

func componentTelemetry() component.TelemetrySettings { return componenttest.NewNopTelemetrySettings() }

// scrapeJoined runs one scrape and returns the whole snapshot as one batch:
// the closing batch the scrape returns, then the process batches it handed
// to its consumer (a *consumertest.MetricsSink in tests).
func scrapeJoined(ctx context.Context, s *sessionScraper) (pmetric.Metrics, error) {
	sink := s.next.(*consumertest.MetricsSink)
	sink.Reset()
	md, err := s.scrape(ctx)
	for _, b := range sink.AllMetrics() {
		b.ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
	}
	sink.Reset()
	return md, err
}
