// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"context"
	"crypto/x509"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// DefaultAllowedClients is the identity docs/rollout.md issues the
// collector's client certificate under: with client certificates required
// and allowed_clients unset, only it may ask.
var DefaultAllowedClients = []string{"gpotel-collector"}

// MetricCallsDenied counts calls refused because of who made them.
const MetricCallsDenied = "gpotel.agent.calls.denied"

// clientGuard admits a call only from a client whose verified certificate
// names an allowed identity: its subject common name, or one of its DNS,
// URI or IP subject alternative names. A certificate that merely chains to
// the client CA (every gpotel-top certificate does) is not enough.
type clientGuard struct {
	allowed map[string]struct{}
	denied  metric.Int64Counter
}

func newClientGuard(names []string, denied metric.Int64Counter) *clientGuard {
	g := &clientGuard{allowed: make(map[string]struct{}, len(names)), denied: denied}
	for _, n := range names {
		g.allowed[strings.ToLower(strings.TrimSpace(n))] = struct{}{}
	}
	return g
}

var (
	deniedNoCertificate = metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrReason, "no_certificate")))
	deniedNotAllowed    = metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrReason, "not_allowed")))
)

// check returns PermissionDenied unless the peer is an allowed client.
func (g *clientGuard) check(ctx context.Context, method string) error {
	p, ok := peer.FromContext(ctx)
	var leaf *x509.Certificate
	if ok {
		if info, isTLS := p.AuthInfo.(credentials.TLSInfo); isTLS && len(info.State.VerifiedChains) > 0 && len(info.State.VerifiedChains[0]) > 0 {
			leaf = info.State.VerifiedChains[0][0]
		}
	}
	if leaf == nil {
		g.denied.Add(ctx, 1, deniedNoCertificate)
		return status.Errorf(codes.PermissionDenied, "%s: no verified client certificate", method)
	}
	for _, name := range certificateIdentities(leaf) {
		if _, ok := g.allowed[strings.ToLower(name)]; ok {
			return nil
		}
	}
	g.denied.Add(ctx, 1, deniedNotAllowed)
	return status.Errorf(codes.PermissionDenied, "%s: client certificate %q is not in allowed_clients", method, leaf.Subject.CommonName)
}

// certificateIdentities are the names a client certificate presents.
func certificateIdentities(c *x509.Certificate) []string {
	names := make([]string, 0, 1+len(c.DNSNames)+len(c.URIs)+len(c.IPAddresses))
	if c.Subject.CommonName != "" {
		names = append(names, c.Subject.CommonName)
	}
	names = append(names, c.DNSNames...)
	for _, u := range c.URIs {
		names = append(names, u.String())
	}
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	return names
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
