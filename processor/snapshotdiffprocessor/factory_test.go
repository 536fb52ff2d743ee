// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor/internal/metadata"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	if f.Type().String() != "snapshotdiff" {
		t.Errorf("type = %s", f.Type())
	}
	if f.MetricsStability() != component.StabilityLevelDevelopment {
		t.Errorf("metrics stability = %v", f.MetricsStability())
	}
	cfg := f.CreateDefaultConfig()
	p, err := f.CreateMetrics(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if !p.Capabilities().MutatesData {
		t.Error("the processor appends to and removes from the batch, so it must declare MutatesData")
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop()); err == nil {
		t.Error("traces are not supported, yet CreateTraces succeeded")
	}
}

func TestConsumeIsSafeForConcurrentCallers(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	done := make(chan error)
	for g := range 4 {
		go func() {
			var err error
			for i := range 25 {
				s := snap(float64(g*1000+i), nil, []int64{1}, proc("sdw1", 0, 1, 100, -10, float64(i), 0))
				if e := p.ConsumeMetrics(context.Background(), s.Metrics()); e != nil {
					err = e
				}
			}
			done <- err
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	if n := len(sink.AllMetrics()); n != 100 {
		t.Errorf("%d batches forwarded, want 100", n)
	}
}
