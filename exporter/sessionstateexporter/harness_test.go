// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/metadata"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/view"
	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// testServer is an exporter started through its factory on a loopback port.
type testServer struct {
	exp    exporter.Metrics
	addr   string
	logs   *observer.ObservedLogs
	client yagpcc.GetGPInfoClient
	conn   *grpc.ClientConn
}

// testConfig listens on a free loopback port and keeps the defaults otherwise.
func testConfig() *Config {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = "127.0.0.1:0"
	cfg.ClusterID = "test-cluster"
	return cfg
}

// startServer starts the exporter on host and, without TLS, dials it.
func startServer(t testing.TB, cfg *Config, host component.Host) *testServer {
	t.Helper()
	return startServerLogging(t, cfg, host, func(c zapcore.Core) zapcore.Core { return c })
}

// startServerLogging is startServer with the exporter's log going through wrap.
func startServerLogging(t testing.TB, cfg *Config, host component.Host, wrap func(zapcore.Core) zapcore.Core) *testServer {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	set := exportertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(wrap(core))
	exp, err := NewFactory().CreateMetrics(context.Background(), set, cfg)
	if err != nil {
		t.Fatalf("CreateMetrics: %v", err)
	}
	if err := exp.Start(context.Background(), host); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithDeadline(context.Background(), await.Deadline(t))
		defer cancel()
		if err := exp.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	ts := &testServer{exp: exp, logs: logs, addr: listenAddress(t, logs)}
	if !cfg.TLS.HasValue() {
		ts.conn = dial(t, ts.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		ts.client = yagpcc.NewGetGPInfoClient(ts.conn)
	}
	return ts
}

func startDefault(t testing.TB) *testServer {
	return startServer(t, testConfig(), componenttest.NewNopHost())
}

// listenAddress reads the bound address from the exporter's start-up log line.
func listenAddress(t testing.TB, logs *observer.ObservedLogs) string {
	t.Helper()
	entries := logs.FilterMessage("GetGPInfo gRPC service listening").All()
	if len(entries) != 1 {
		t.Fatalf("want one listening log line, got %d", len(entries))
	}
	return entries[0].ContextMap()["address"].(string)
}

func dial(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func (ts *testServer) consume(t testing.TB, md pmetric.Metrics) {
	t.Helper()
	if err := ts.exp.ConsumeMetrics(context.Background(), md); err != nil {
		t.Fatalf("ConsumeMetrics: %v", err)
	}
}

func ctxTimeout(t testing.TB) context.Context { return await.Context(t) }

func nopHost() component.Host { return componenttest.NewNopHost() }

func exportertestSettings() exporter.Settings { return exportertest.NewNopSettings(metadata.Type) }

// decoded is md as the exporter's consumeMetrics decodes it under
// testConfig, finished work included.
func decoded(md pmetric.Metrics) *view.Batch {
	cfg := testConfig()
	d := view.NewDecoder(cfg.ClusterID, cfg.LastMetricsWindow, true)
	return d.Decode(md)
}
