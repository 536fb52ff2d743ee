// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/scraper/scrapererror"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadatatest"
)

// countingSource wraps a memorySource, counts calls and can fail discovery.
type countingSource struct {
	*memorySource
	discovers, configs atomic.Int32
	fail               error
}

func (c *countingSource) Discover(ctx context.Context) (*ClusterState, error) {
	c.discovers.Add(1)
	if c.fail != nil {
		return nil, c.fail
	}
	return c.memorySource.Discover(ctx)
}

func (c *countingSource) SegmentConfiguration(ctx context.Context) ([]SegmentConfigRow, error) {
	c.configs.Add(1)
	return c.memorySource.SegmentConfiguration(ctx)
}

func unitScraper(t *testing.T, cfg *Config, src clusterSource, readers map[string]procReader, tt *componenttest.Telemetry) *sessionScraper {
	t.Helper()
	set := metadatatest.NewSettings(tt)
	s, err := newSessionScraper(cfg, set, src, new(consumertest.MetricsSink))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	for h, r := range readers {
		s.dir.readers[h] = r
	}
	t.Cleanup(func() { _ = s.shutdown(context.Background()) })
	return s
}

func TestSelfMetricsCountHostsAndPids(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	cfg := validConfig()
	src := &countingSource{memorySource: newMemorySource(2, []int{11, 12, 13})}
	s := unitScraper(t, cfg, src, map[string]procReader{
		"sdw1": &scriptedReader{},
		"sdw2": &scriptedReader{fail: errors.New("connection refused")},
	}, tt)
	md, err := scrapeJoined(context.Background(), s)
	var partial scrapererror.PartialScrapeError
	if !errors.As(err, &partial) || partial.Failed != 3 || !strings.Contains(err.Error(), "sdw2") {
		t.Fatalf("err %v, want a partial scrape naming sdw2 with 3 processes lost", err)
	}
	if up := hostUp(md); up["sdw1"] != 1 || up["sdw2"] != 0 {
		t.Errorf("host.up %v", up)
	}
	one := []metricdata.DataPoint[int64]{{Value: 1}}
	metadatatest.AssertEqualGpsessionHostsOk(t, tt, one, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualGpsessionHostsFailed(t, tt, one, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualGpsessionPidsAsked(t, tt, []metricdata.DataPoint[int64]{{Value: 6}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualGpsessionPidsAnswered(t, tt, []metricdata.DataPoint[int64]{{Value: 3}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualGpsessionScrapeDuration(t, tt, []metricdata.HistogramDataPoint[float64]{{}},
		metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreValue())
}

func TestDatabaseFailureBacksOffBeforeTheNextAttempt(t *testing.T) {
	cfg := validConfig()
	cfg.ReconnectBackoff = time.Hour
	cfg.ReconnectBackoffMax = time.Hour
	src := &countingSource{memorySource: newMemorySource(1, []int{11}), fail: errors.New("connection refused")}
	s := unitScraper(t, cfg, src, map[string]procReader{"sdw1": &scriptedReader{}}, componenttest.NewTelemetry())
	if _, err := scrapeJoined(context.Background(), s); err == nil {
		t.Fatal("no error with the database down")
	}
	_, err := scrapeJoined(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "next attempt in") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("second scrape: %v", err)
	}
	if n := src.discovers.Load(); n != 1 {
		t.Fatalf("database tried %d times inside the backoff", n)
	}
	s.retryAt = time.Time{} // the backoff has passed
	src.fail = nil
	if _, err := scrapeJoined(context.Background(), s); err != nil {
		t.Fatalf("after the backoff: %v", err)
	}
	if s.backoff != 0 {
		t.Error("backoff not reset after a success")
	}
}

func TestUnknownSegmentRefreshesTheTopologyOnce(t *testing.T) {
	cfg := validConfig()
	src := &countingSource{memorySource: newMemorySource(1, []int{11})}
	readers := map[string]procReader{"sdw1": &scriptedReader{}, "sdw9": &scriptedReader{}}
	s := unitScraper(t, cfg, src, readers, componenttest.NewTelemetry())
	if _, err := scrapeJoined(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if n := src.configs.Load(); n != 1 {
		t.Fatalf("%d topology reads for the first scrape", n)
	}
	if _, err := scrapeJoined(context.Background(), s); err != nil || src.configs.Load() != 1 {
		t.Fatalf("a fresh topology was read again (%d reads, err %v)", src.configs.Load(), err)
	}
	// Segment 1 appears (expansion): its backends make the receiver look again.
	src.state.Backends = append(src.state.Backends, Backend{SegmentID: 1, PID: 77, SessionID: 1000})
	src.rows = append(src.rows, SegmentConfigRow{Content: 1, Role: "p", Status: "u", Hostname: "sdw9"})
	md, err := scrapeJoined(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if src.configs.Load() != 2 {
		t.Fatalf("%d topology reads, want a refresh for the unknown segment", src.configs.Load())
	}
	if p, ok := processesIn(md)[77]; !ok || p.host != "sdw9" {
		t.Fatalf("process on the new segment: %+v %v", p, ok)
	}
}

func TestSystemProcessesCanBeDropped(t *testing.T) {
	cfg := validConfig()
	cfg.IncludeSystemProcesses = false
	src := &countingSource{memorySource: newMemorySource(1, []int{11})}
	src.state.Backends = append(src.state.Backends, Backend{SegmentID: 0, PID: 12, SessionID: 0, BackendType: "checkpointer"})
	src.state.Sessions = append(src.state.Sessions, SessionRow{PID: 5, SessionID: 5, BackendType: strp("checkpointer")})
	s := unitScraper(t, cfg, src, map[string]procReader{"sdw1": &scriptedReader{}}, componenttest.NewTelemetry())
	md, err := scrapeJoined(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := processesIn(md)[12]; ok {
		t.Error("system process emitted")
	}
	if _, ok := processesIn(md)[11]; !ok {
		t.Error("client backend dropped")
	}
	for _, rm := range resourcesOfKind(md, pipeline.KindSession) {
		if id, _ := rm.Resource().Attributes().Get(pipeline.AttrSessionID); id.Int() == 5 {
			t.Error("system session emitted")
		}
	}
}
