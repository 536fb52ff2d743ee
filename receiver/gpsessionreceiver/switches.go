// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/filter"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadata"
)

// switchesOf reads the user's metrics and resource_attributes settings by
// name, through the same mapstructure keys they were configured with, so
// that a metric added to metadata.yaml needs no line here.
func switchesOf(mbc metadata.MetricsBuilderConfig) (snapshot.Switches, error) {
	conf := confmap.New()
	if err := conf.Marshal(mbc); err != nil {
		return snapshot.Switches{}, fmt.Errorf("gpsession: reading the metrics settings: %w", err)
	}
	var raw struct {
		Metrics map[string]struct {
			Enabled     bool     `mapstructure:"enabled"`
			Attributes  []string `mapstructure:"attributes"`
			Aggregation string   `mapstructure:"aggregation_strategy"`
		} `mapstructure:"metrics"`
		Resource map[string]struct {
			Enabled bool            `mapstructure:"enabled"`
			Include []filter.Config `mapstructure:"metrics_include"`
			Exclude []filter.Config `mapstructure:"metrics_exclude"`
		} `mapstructure:"resource_attributes"`
	}
	if err := conf.Unmarshal(&raw); err != nil {
		return snapshot.Switches{}, fmt.Errorf("gpsession: reading the metrics settings: %w", err)
	}
	sw := snapshot.Switches{Metrics: map[string]snapshot.MetricSwitch{}, Resource: map[string]snapshot.ResourceSwitch{}}
	for name, m := range raw.Metrics {
		ms := snapshot.MetricSwitch{Off: !m.Enabled, Aggregation: m.Aggregation}
		for _, a := range pipeline.MetricAttributes(name) {
			if !slices.Contains(m.Attributes, a) {
				ms.AttributesOff = append(ms.AttributesOff, a)
			}
		}
		sw.Metrics[name] = ms
	}
	for name, r := range raw.Resource {
		rs := snapshot.ResourceSwitch{Off: !r.Enabled}
		if len(r.Include) > 0 {
			rs.Include = filter.CreateFilter(r.Include)
		}
		if len(r.Exclude) > 0 {
			rs.Exclude = filter.CreateFilter(r.Exclude)
		}
		sw.Resource[name] = rs
	}
	return sw, nil
}
