// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package config_test checks the shipped collector configurations against
// the components they name.
package config_test

import (
	"context"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// An exporter that says it changes the data it is handed makes the
// pipeline deep-copy every snapshot for it, because sessionstate reads
// the same one; the sending queue's batch says so. No shipped exporter's
// queue may batch: with emit_process_metrics on at 200k processes the
// copy was a sixth of the collector's CPU (docs/performance.md).
func TestShippedExportersDoNotMakeThePipelineCopy(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no shipped configuration found (%v)", err)
	}
	queues := 0
	for _, file := range files {
		cm, err := confmaptest.LoadConf(file)
		if err != nil {
			t.Fatal(err)
		}
		exporters, err := cm.Sub("exporters")
		if err != nil {
			t.Fatal(err)
		}
		for name := range exporters.ToStringMap() {
			exporter, err := exporters.Sub(name)
			if err != nil {
				t.Fatal(err)
			}
			if !exporter.IsSet("sending_queue") {
				continue
			}
			queues++
			var cfg struct {
				Queue configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`
			}
			cfg.Queue = configoptional.Some(exporterhelper.NewDefaultQueueConfig())
			if err := exporter.Unmarshal(&cfg, confmap.WithIgnoreUnused()); err != nil {
				t.Fatalf("%s: exporters::%s::sending_queue: %v", file, name, err)
			}
			exp, err := exporterhelper.NewMetrics(context.Background(), exportertest.NewNopSettings(component.MustNewType("queued")), &cfg,
				func(context.Context, pmetric.Metrics) error { return nil }, exporterhelper.WithQueue(cfg.Queue))
			if err != nil {
				t.Fatalf("%s: exporters::%s: %v", file, name, err)
			}
			if exp.Capabilities().MutatesData {
				t.Errorf("%s: exporters::%s: its sending_queue changes the data it is handed (batch), so the pipeline copies every snapshot for it", file, name)
			}
		}
	}
	if queues == 0 {
		t.Fatal("no shipped exporter has a sending_queue: nothing was checked")
	}
}
