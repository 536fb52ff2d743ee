// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package clientname tells who a gRPC client is: by its verified client
// certificate, and whether that name is on an allow-list (the agent's
// allowed_clients and the collector's actions::allowed_clients), or by the
// collector's action token.
package clientname

import (
	"context"
	"crypto/x509"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// ActionTokenHeader is the gRPC metadata key a client sends the collector's
// action token in: apart from "authorization", which the server's auth
// extension checks for every call, so that a token that reads cannot act.
const ActionTokenHeader = "gpotel-action-token" //nolint:gosec // G101: a header's name, not a credential

// Verified is the leaf of the call's verified client certificate chain;
// nil when the client presented none or the server does not verify clients.
func Verified(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, isTLS := p.AuthInfo.(credentials.TLSInfo)
	if !isTLS || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return info.State.VerifiedChains[0][0]
}

// Names are the names a client certificate presents: its subject common
// name and its DNS, URI and IP subject alternative names.
func Names(c *x509.Certificate) []string {
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

// Allowed is an allow-list of client names, compared without case.
type Allowed map[string]struct{}

// NewAllowed lists names, trimmed.
func NewAllowed(names []string) Allowed {
	a := make(Allowed, len(names))
	for _, n := range names {
		a[strings.ToLower(strings.TrimSpace(n))] = struct{}{}
	}
	return a
}

// Match is the first name of c on the list, and whether there is one. A
// certificate that merely chains to the client CA is not enough.
func (a Allowed) Match(c *x509.Certificate) (string, bool) {
	if c == nil {
		return "", false
	}
	for _, name := range Names(c) {
		if _, ok := a[strings.ToLower(name)]; ok {
			return name, true
		}
	}
	return "", false
}
