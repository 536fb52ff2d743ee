// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"math"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadatatest"
)

// overrunAgent is one host's agent whose answers carry no records, only
// its epoch and its count of kernel overruns.
type overrunAgent struct {
	localReader // never called
	epoch       uint64
	overruns    uint64
}

func (a *overrunAgent) GetExitRecords(context.Context, *gpotelv1.GetExitRecordsRequest) (*gpotelv1.GetExitRecordsResponse, error) {
	return &gpotelv1.GetExitRecordsResponse{Epoch: a.epoch, KernelOverruns: a.overruns}, nil
}

// TestOverrunsOfAHostAreWarnedWhenTheyGrow: the exit records a host's kernel
// dropped are warned of, once per scrape naming the hosts, and counted,
// exactly when the agent's count grew; a count that went down within an
// epoch is a reset, a new epoch starts over, and a hostile count adds a
// bounded number.
func TestOverrunsOfAHostAreWarnedWhenTheyGrow(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	set := metadatatest.NewSettings(tt)
	set.Logger = zap.New(core)
	cfg := validConfig()
	s, err := newSessionScraper(cfg, set, &memorySource{}, new(consumertest.MetricsSink))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	agents := map[string]*overrunAgent{"sdw1": {epoch: 5}, "sdw2": {epoch: 9}}
	total := int64(0)
	for i, step := range []struct {
		name   string
		set    func()
		warned map[string]any // nil: no warning
	}{
		{"none yet", func() {}, nil},
		{"sdw1's kernel dropped records 3 times", func() { agents["sdw1"].overruns = 3 }, map[string]any{"sdw1": uint64(3)}},
		{"the count stays", func() {}, nil},
		{"both grew", func() { agents["sdw1"].overruns, agents["sdw2"].overruns = 5, 2 }, map[string]any{"sdw1": uint64(2), "sdw2": uint64(2)}},
		{"sdw1's count went down within its epoch: a reset", func() { agents["sdw1"].overruns = 1 }, map[string]any{"sdw1": uint64(1)}},
		{"sdw2 restarted: its new epoch starts over", func() { agents["sdw2"].epoch, agents["sdw2"].overruns = 10, 4 }, map[string]any{"sdw2": uint64(4)}},
		{"a hostile count", func() { agents["sdw1"].overruns = math.MaxUint64 }, map[string]any{"sdw1": uint64(maxOverrunsPerScrape)}},
		{"the hostile count stays", func() {}, nil},
	} {
		step.set()
		var exits []hostExits
		for _, host := range []string{"sdw1", "sdw2"} {
			dir := &agentDirectory{local: agents[host], localHosts: map[string]bool{host: true}}
			exits = append(exits, fetchHostExits(ctx, cfg, dir, host, exitCursor{}))
		}
		s.noteOverruns(ctx, exits)
		warnings := logs.TakeAll()
		if step.warned == nil {
			if len(warnings) != 0 {
				t.Errorf("step %d (%s): warned %v, want nothing", i, step.name, warnings)
			}
		} else if len(warnings) != 1 {
			t.Errorf("step %d (%s): %d warnings, want one", i, step.name, len(warnings))
		} else if got := warnings[0].ContextMap()["overruns_by_host"]; !equalAnyMaps(got, step.warned) {
			t.Errorf("step %d (%s): warned of %v, want %v", i, step.name, got, step.warned)
		}
		for _, n := range step.warned {
			total += int64(n.(uint64)) // #nosec G115 -- bounded counts
		}
		if total > 0 {
			metadatatest.AssertEqualGpsessionExitRecordOverruns(t, tt, []metricdata.DataPoint[int64]{{Value: total}}, metricdatatest.IgnoreTimestamp())
		}
	}
}

func equalAnyMaps(got any, want map[string]any) bool {
	m, ok := got.(map[string]any)
	if !ok || len(m) != len(want) {
		return false
	}
	for k, v := range want {
		if m[k] != v {
			return false
		}
	}
	return true
}
