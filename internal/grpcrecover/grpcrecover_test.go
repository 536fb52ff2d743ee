package grpcrecover

import (
	"context"
	"fmt"
	"net"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/gpotel/gpotel/internal/await"
)

// panickingHealth panics in both its unary and its streaming method, unless
// asked for the service "ok".
type panickingHealth struct {
	healthpb.UnimplementedHealthServer
}

func (panickingHealth) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if req.GetService() == "ok" {
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
	}
	panic(fmt.Errorf("check handler bug for %q", req.GetService()))
}

func (panickingHealth) Watch(*healthpb.HealthCheckRequest, healthpb.Health_WatchServer) error {
	panic("watch handler bug")
}

func TestAHandlerPanicIsAnsweredInternalAndTheServerLives(t *testing.T) {
	core, logs := observer.New(zapcore.ErrorLevel)
	server := grpc.NewServer(ServerOptions(zap.New(core))...)
	healthpb.RegisterHealthServer(server, panickingHealth{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = server.Serve(lis) }()
	t.Cleanup(server.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := healthpb.NewHealthClient(conn)
	ctx := await.Context(t)

	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{Service: "bug"})
	if status.Code(err) != codes.Internal {
		t.Fatalf("unary panic: want Internal, got %v", err)
	}
	stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Internal {
		t.Fatalf("stream panic: want Internal, got %v", err)
	}
	if resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "ok"}); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("after two panics the server no longer answers: %v %v", resp, err)
	}
	for _, method := range []string{"/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch"} {
		if n := logs.FilterField(zap.String("method", method)).Len(); n != 1 {
			t.Errorf("%s: %d log lines for its panic, want 1", method, n)
		}
	}
}
