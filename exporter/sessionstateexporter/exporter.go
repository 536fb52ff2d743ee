// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"errors"
	"fmt"
	"os"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/actions"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/clustertop"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/finishedwork"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/gpinfo"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/memorycontexts"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/metadata"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/pressure"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/ruleactions"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/view"
	"github.com/gpotel/gpotel/internal/agentconn"
	"github.com/gpotel/gpotel/internal/grpcrecover"
	"github.com/gpotel/gpotel/internal/listenaddr"
	"github.com/gpotel/gpotel/internal/rulefirings"
	"github.com/gpotel/gpotel/internal/sessionaction"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// sessionStateExporter owns the stores and the gRPC server in front of them.
type sessionStateExporter struct {
	cfg       *Config
	settings  exporter.Settings
	telemetry *metadata.TelemetryBuilder
	decoder   view.Decoder
	store     *view.Store
	finished  *finishedwork.Store
	pressure  pressure.Store
	tops      clustertop.Hosts

	server *grpc.Server
	health *health.Server
	done   chan struct{}
	agents *agentconn.Pool
	// actions is the action path; nil while actions are off.
	actions *sessionaction.Actor
	// firings are the workload rules' latest firings, subscribed while
	// the server runs.
	firings *ruleactions.Ring
}

func newSessionStateExporter(cfg *Config, set exporter.Settings) (*sessionStateExporter, error) {
	fallback, err := os.Hostname()
	if err != nil {
		set.Logger.Warn("os.Hostname failed; sessions without host.name report an empty hostname", zap.Error(err))
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	store := newStore(cfg, fallback, set.Logger, tb)
	finished := finishedwork.NewStore(cfg.FinishedQueries, finishedwork.Owner{ClusterID: cfg.ClusterID, Hostname: cfg.Hostname, FallbackHost: fallback},
		set.Logger, tb)
	return &sessionStateExporter{
		cfg:       cfg,
		settings:  set,
		telemetry: tb,
		decoder:   view.NewDecoder(cfg.ClusterID, cfg.LastMetricsWindow, cfg.FinishedQueries.Retention > 0),
		store:     store,
		finished:  finished,
	}, nil
}

// newStore is the session store of cfg, its views sorted up front in the
// orders GetGPSessions was last asked.
func newStore(cfg *Config, fallbackHost string, logger *zap.Logger, tb *metadata.TelemetryBuilder) *view.Store {
	return view.NewStore(view.Config{Hostname: cfg.Hostname, FallbackHost: fallbackHost, Grace: cfg.SessionGracePeriod,
		MaxSessions: cfg.MaxSessions, LastWindow: cfg.LastMetricsWindow}, logger, tb, gpinfo.PrebuildOrders)
}

// consumeMetrics decodes the batch once and hands it to every store.
func (e *sessionStateExporter) consumeMetrics(_ context.Context, md pmetric.Metrics) error {
	b := e.decoder.Decode(md)
	e.store.Consume(b)
	e.finished.Consume(b, e.store.Load().Time)
	e.pressure.Consume(b.Pressure)
	e.tops.Consume(b.Tops)
	return nil
}

func (e *sessionStateExporter) start(ctx context.Context, host component.Host) error {
	var recovery []configgrpc.ToServerOption
	for _, opt := range grpcrecover.ServerOptions(e.settings.Logger) {
		recovery = append(recovery, configgrpc.WithGrpcServerOption(opt))
	}
	server, err := e.cfg.ToServer(ctx, host.GetExtensions(), e.settings.TelemetrySettings, recovery...)
	if err != nil {
		return fmt.Errorf("sessionstate: building the gRPC server: %w", err)
	}
	listener, err := e.cfg.NetAddr.Listen(ctx)
	if err != nil {
		return fmt.Errorf("sessionstate: listening on %s: %w", e.cfg.NetAddr.Endpoint, err)
	}
	var guard *sessionaction.Guard
	if e.cfg.Actions.Enabled {
		if guard, err = sessionaction.NewGuard(e.cfg.Actions); err != nil {
			_ = listener.Close()
			return fmt.Errorf("sessionstate: %w", err)
		}
	}
	e.server = server
	e.health = health.NewServer()
	yagpcc.RegisterGetGPInfoServer(server, gpinfo.NewService(e.store, e.finished, gpinfo.Limits{
		DefaultPageSize: e.cfg.DefaultPageSize, MaxPageSize: e.cfg.MaxPageSize, MaxResponseBytes: e.cfg.MaxResponseBytes,
	}))
	// An agent's answer larger than a whole response could not be served.
	e.agents = agentconn.NewPool(e.cfg.MemoryContexts.Config, host.GetExtensions(), e.settings.TelemetrySettings, e.cfg.MaxResponseBytes)
	gpotelv1.RegisterSessionMemoryContextsServer(server, memorycontexts.NewService(e.store, e.agents, e.cfg.MemoryContexts, e.cfg.MaxResponseBytes))
	gpotelv1.RegisterPressureServiceServer(server, &pressure.Service{Store: &e.pressure})
	gpotelv1.RegisterFinishedWorkServer(server, finishedwork.NewService(e.finished, e.cfg.DefaultPageSize, e.cfg.MaxPageSize, e.cfg.MaxResponseBytes))
	gpotelv1.RegisterClusterTopServer(server, clustertop.NewService(e.store, &e.tops, &e.pressure, e.cfg.LastMetricsWindow))
	e.firings = ruleactions.NewRing(e.cfg.RuleActions.MaxFirings)
	rulefirings.Subscribe(e.firings)
	gpotelv1.RegisterRuleActionsServer(server, ruleactions.NewService(e.firings, e.cfg.DefaultPageSize, e.cfg.MaxPageSize))
	if e.cfg.Actions.Enabled {
		e.actions = sessionaction.New(e.cfg.Actions)
		yagpcc.RegisterActionServiceServer(server, actions.NewService(e.store, e.actions, guard, e.settings.Logger, e.telemetry,
			e.cfg.Actions.MaxSessionsPerCall))
		e.health.SetServingStatus(yagpcc.ActionService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
		e.settings.Logger.Info("ActionService enabled: admitted clients may cancel queries and end sessions",
			zap.String("user", e.cfg.Actions.User), zap.Bool("token", guard.HasToken()), zap.Strings("allowed_clients", e.cfg.Actions.AllowedClients))
	}
	healthpb.RegisterHealthServer(server, e.health)
	reflection.Register(server)
	e.health.SetServingStatus(yagpcc.GetGPInfo_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	e.health.SetServingStatus(gpotelv1.SessionMemoryContexts_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	e.health.SetServingStatus(gpotelv1.ClusterTop_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	e.health.SetServingStatus(gpotelv1.PressureService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	e.health.SetServingStatus(gpotelv1.FinishedWork_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	e.health.SetServingStatus(gpotelv1.RuleActions_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)

	e.settings.Logger.Info("GetGPInfo gRPC service listening", zap.String("address", listener.Addr().String()))
	if listenaddr.PlaintextBeyondLoopback(e.cfg.NetAddr.Endpoint, e.cfg.TLS.HasValue()) {
		e.settings.Logger.Warn("serving GetGPInfo in plaintext beyond loopback (insecure: true): any host that reaches this port sees sessions and query text",
			zap.String("endpoint", e.cfg.NetAddr.Endpoint))
	}
	e.done = make(chan struct{})
	go func() {
		defer close(e.done)
		if err := server.Serve(listener); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(err))
		}
	}()
	return nil
}

// shutdown lets running calls finish; when ctx ends first it cuts them off.
func (e *sessionStateExporter) shutdown(ctx context.Context) error {
	if e.telemetry != nil {
		e.telemetry.Shutdown()
	}
	if e.server == nil {
		return nil
	}
	rulefirings.Unsubscribe(e.firings)
	e.health.Shutdown()
	stopped := make(chan struct{})
	go func() {
		e.server.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		e.server.Stop()
		<-stopped
	}
	<-e.done
	if e.actions != nil {
		e.actions.Close()
	}
	return e.agents.Close()
}
