// Package grpcrecover keeps a gRPC server alive when one of its handlers
// panics: the call is answered Internal and the panic is logged with its stack.
package grpcrecover

import (
	"context"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ServerOptions installs the recovery for unary and streaming calls.
func ServerOptions(logger *zap.Logger) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
			defer recoverCall(logger, info.FullMethod, &err)
			return handler(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
			defer recoverCall(logger, info.FullMethod, &err)
			return handler(srv, ss)
		}),
	}
}

// recoverCall, deferred by an interceptor, turns its handler's panic into
// the call's error; the caller learns nothing of the server's internals.
func recoverCall(logger *zap.Logger, method string, err *error) {
	r := recover()
	if r == nil {
		return
	}
	logger.Error("gRPC handler panicked; the call was answered Internal",
		zap.String("method", method), zap.Any("panic", r), zap.Stack("stack"))
	*err = status.Errorf(codes.Internal, "%s: internal error (logged by the server)", method)
}
