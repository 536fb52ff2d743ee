// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	promexporter "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/gpotel/gpotel/internal/grpcrecover"
	"github.com/gpotel/gpotel/internal/kernelunits"
	"github.com/gpotel/gpotel/internal/listenaddr"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/segmentagent/memctx"
)

// ServiceName is the agent's service.name in its own telemetry.
const ServiceName = "gpotel-agent"

// Agent serves one Service over gRPC, with the gRPC health and reflection
// services and, when configured, a Prometheus endpoint for its own metrics.
// Tests of other packages start real agents with ListenAddress "127.0.0.1:0".
type Agent struct {
	cfg     Config
	logger  *zap.Logger
	service *Service
	memctx  *memctx.Service
	ends    *memctx.EndsService

	meterProvider *sdkmetric.MeterProvider
	registry      *prometheus.Registry
	// clients is nil unless client certificates are verified.
	clients *clientGuard

	grpcServer  *grpc.Server
	health      *health.Server
	listener    net.Listener
	metricsHTTP *http.Server
	metricsLis  net.Listener
	serveDone   chan struct{}
	stopOnce    sync.Once
}

// New builds an agent from a validated configuration; nothing listens until Start.
func New(cfg Config, logger *zap.Logger) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	a := &Agent{cfg: cfg, logger: logger}
	var mp metric.MeterProvider
	if cfg.Telemetry.PrometheusAddress != "" {
		a.registry = prometheus.NewRegistry()
		exporter, err := promexporter.New(promexporter.WithRegisterer(a.registry))
		if err != nil {
			return nil, fmt.Errorf("prometheus exporter: %w", err)
		}
		res, err := resource.New(context.Background(), resource.WithHost(),
			resource.WithAttributes(semconv.ServiceName(ServiceName)))
		if err != nil {
			return nil, fmt.Errorf("telemetry resource: %w", err)
		}
		a.meterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter), sdkmetric.WithResource(res))
		mp = a.meterProvider
	}
	svc, err := NewService(cfg.ServiceConfig, logger, mp)
	if err != nil {
		return nil, err
	}
	if cfg.VerifiesClients() {
		if mp == nil {
			mp = noop.NewMeterProvider()
		}
		denied, err := mp.Meter(meterName).Int64Counter(MetricCallsDenied, metric.WithUnit("{call}"),
			metric.WithDescription("Calls refused for who made them, by reason: no_certificate, not_allowed (a name outside allowed_clients)."))
		if err != nil {
			return nil, fmt.Errorf("telemetry: %w", err)
		}
		a.clients = newClientGuard(cfg.clientIdentities(), denied)
	}
	a.service = svc
	if a.memctx, err = memctx.NewService(cfg.MemoryContexts, svc.cfg.ProcRoot, svc.host.Hostname, svc.AllowUID, logger); err != nil {
		return nil, err
	}
	kernel, err := kernelunits.HostFromProto(svc.host)
	if err != nil {
		logger.Warn("statement ends: the host's clock constants are unknown, so a log record's session start is not checked against its process", zap.Error(err))
	}
	if a.ends, err = memctx.NewEndsService(cfg.MemoryContexts, svc.cfg.ProcRoot, kernel, logger); err != nil {
		return nil, err
	}
	return a, nil
}

// Service returns the agent's service, for in-process calls.
func (a *Agent) Service() *Service { return a.service }

// Start listens and serves in the background; it returns once the listeners are open.
func (a *Agent) Start(ctx context.Context) error {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(a.cfg.MaxRecvMsgSizeMiB << 20),
		grpc.MaxSendMsgSize(a.cfg.MaxSendMsgSizeMiB << 20),
		// The collector asks one host one batch at a time; a client that opens
		// streams and never reads their answers holds at most this many per connection.
		grpc.MaxConcurrentStreams(maxConcurrentStreams),
	}
	opts = append(opts, grpcrecover.ServerOptions(a.logger)...)
	if a.cfg.TLS != nil {
		tlsCfg, err := a.cfg.TLS.LoadTLSConfig(ctx)
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	if a.clients != nil {
		opts = append(opts, grpc.ChainUnaryInterceptor(a.clients.unary), grpc.ChainStreamInterceptor(a.clients.stream))
	}
	lis, err := (&net.ListenConfig{}).Listen(ctx, "tcp", a.cfg.ListenAddress)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", a.cfg.ListenAddress, err)
	}
	if a.cfg.Telemetry.PrometheusAddress != "" {
		if a.metricsLis, err = (&net.ListenConfig{}).Listen(ctx, "tcp", a.cfg.Telemetry.PrometheusAddress); err != nil {
			_ = lis.Close()
			return fmt.Errorf("telemetry listen on %s: %w", a.cfg.Telemetry.PrometheusAddress, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{}))
		a.metricsHTTP = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := a.metricsHTTP.Serve(a.metricsLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				a.logger.Error("telemetry endpoint stopped", zap.Error(err))
			}
		}()
	}
	if err := a.service.TaskStats().Start(); err != nil {
		_ = lis.Close()
		return err
	}
	if listenaddr.PlaintextBeyondLoopback(a.cfg.ListenAddress, a.cfg.TLS != nil) {
		a.logger.Warn("serving plaintext gRPC beyond loopback (insecure: true): any host that reaches this port may ask for process figures",
			zap.String("listen_address", a.cfg.ListenAddress))
	} else if !a.cfg.VerifiesClients() && !listenaddr.Loopback(a.cfg.ListenAddress) {
		a.logger.Warn("serving TLS beyond loopback without client certificates (insecure: true): any host that reaches this port may ask for process figures",
			zap.String("listen_address", a.cfg.ListenAddress))
	}
	a.listener = lis
	a.grpcServer = grpc.NewServer(opts...)
	yagpcc.RegisterGetQueryInfoServer(a.grpcServer, a.service)
	gpotelv1.RegisterTaskStatsServer(a.grpcServer, a.service.TaskStats())
	a.health = health.NewServer()
	a.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	a.health.SetServingStatus(yagpcc.GetQueryInfo_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	a.health.SetServingStatus(gpotelv1.TaskStats_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	gpotelv1.RegisterMemoryContextsServer(a.grpcServer, a.memctx)
	a.health.SetServingStatus(gpotelv1.MemoryContexts_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	gpotelv1.RegisterStatementEndsServer(a.grpcServer, a.ends)
	a.health.SetServingStatus(gpotelv1.StatementEnds_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(a.grpcServer, a.health)
	reflection.Register(a.grpcServer)

	a.serveDone = make(chan struct{})
	go func() {
		defer close(a.serveDone)
		if err := a.grpcServer.Serve(lis); err != nil {
			a.logger.Error("gRPC server stopped", zap.Error(err))
		}
	}()
	fields := []zap.Field{zap.Stringer("address", lis.Addr()), zap.Bool("tls", a.cfg.TLS != nil), zap.Bool("mtls", a.cfg.VerifiesClients())}
	if a.clients != nil {
		fields = append(fields, zap.Strings("allowed_clients", a.cfg.clientIdentities()))
	}
	a.logger.Info("gpotel agent listening", fields...)
	return nil
}

// Addr is the gRPC listen address, once started.
func (a *Agent) Addr() net.Addr {
	if a.listener == nil {
		return nil
	}
	return a.listener.Addr()
}

// MetricsAddr is the Prometheus endpoint's address, when there is one.
func (a *Agent) MetricsAddr() net.Addr {
	if a.metricsLis == nil {
		return nil
	}
	return a.metricsLis.Addr()
}

// Shutdown reports NOT_SERVING, lets calls in flight finish until ctx ends,
// then stops everything.
func (a *Agent) Shutdown(ctx context.Context) error {
	var errs []error
	a.stopOnce.Do(func() {
		if a.grpcServer != nil {
			a.health.Shutdown()
			stopped := make(chan struct{})
			go func() {
				a.grpcServer.GracefulStop()
				close(stopped)
			}()
			select {
			case <-stopped:
			case <-ctx.Done():
				a.grpcServer.Stop()
				<-stopped
			}
			<-a.serveDone
		}
		a.service.TaskStats().Stop()
		if a.metricsHTTP != nil {
			if err := a.metricsHTTP.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("telemetry endpoint: %w", err))
			}
		}
		if a.meterProvider != nil {
			if err := a.meterProvider.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("meter provider: %w", err))
			}
		}
	})
	return errors.Join(errs...)
}
