// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpotel/gpotel/internal/clientname"
)

// DefaultAllowedClients is the identity docs/rollout.md issues the
// collector's client certificate under: with client certificates required
// and allowed_clients unset, only it may ask.
var DefaultAllowedClients = []string{"gpotel-collector"}

// MetricCallsDenied counts calls refused because of who made them.
const MetricCallsDenied = "gpotel.agent.calls.denied"

// clientGuard admits a call only from a client whose verified certificate
// names an allowed identity (clientname.Allowed).
type clientGuard struct {
	allowed clientname.Allowed
	denied  metric.Int64Counter
}

func newClientGuard(names []string, denied metric.Int64Counter) *clientGuard {
	return &clientGuard{allowed: clientname.NewAllowed(names), denied: denied}
}

var (
	deniedNoCertificate = metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrReason, "no_certificate")))
	deniedNotAllowed    = metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrReason, "not_allowed")))
)

// check returns PermissionDenied unless the peer is an allowed client.
func (g *clientGuard) check(ctx context.Context, method string) error {
	leaf := clientname.Verified(ctx)
	if leaf == nil {
		g.denied.Add(ctx, 1, deniedNoCertificate)
		return status.Errorf(codes.PermissionDenied, "%s: no verified client certificate", method)
	}
	if _, ok := g.allowed.Match(leaf); ok {
		return nil
	}
	g.denied.Add(ctx, 1, deniedNotAllowed)
	return status.Errorf(codes.PermissionDenied, "%s: client certificate %q is not in allowed_clients", method, leaf.Subject.CommonName)
}

func (g *clientGuard) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := g.check(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (g *clientGuard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := g.check(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}
