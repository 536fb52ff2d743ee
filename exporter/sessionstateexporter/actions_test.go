// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configtls"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcmetadata "google.golang.org/grpc/metadata"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/viewtest"
	"github.com/gpotel/gpotel/internal/clientname"
	"github.com/gpotel/gpotel/internal/statustest"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// The exporter learns the collection interval from the snapshots it
// receives: the time between the last two, on the monotonic clock.
func TestTheViewKnowsItsAgeAndTheInterval(t *testing.T) {
	store := newStore(testConfig(), "", zap.NewNop(), nil)
	before := time.Now()
	store.Consume(decoded(buildSnapshot(before, []testSession{fullSession()})))
	first := store.Load()
	if first.Interval != 0 || first.Received.Before(before) {
		t.Errorf("first view: interval %s received %s, want 0 and after %s", first.Interval, first.Received, before)
	}
	store.Consume(decoded(buildSnapshot(before.Add(time.Second), []testSession{fullSession()})))
	second := store.Load()
	if second.Interval != second.Received.Sub(first.Received) || second.Interval <= 0 {
		t.Errorf("second view: interval %s, want %s", second.Interval, second.Received.Sub(first.Received))
	}
	// A snapshot an hour old when it came is an hour old at once.
	store.Consume(decoded(buildSnapshot(time.Now().Add(-time.Hour).Add(2*time.Second), []testSession{fullSession()})))
	if age := store.Load().Age(time.Now()); age < time.Hour-3*time.Second {
		t.Errorf("a snapshot taken an hour before it came: age %s", age)
	}
}

// Under mutual TLS, a client certificate named in allowed_clients may act;
// another the same CA signed may read, not act.
func TestActionsAdmitTheAllowedClientCertificates(t *testing.T) {
	ca := newTestAuthority(t)
	serverCert, serverKey := ca.issue("127.0.0.1", x509.ExtKeyUsageServerAuth)
	cfg := testConfig()
	tlsCfg := configtls.NewDefaultServerConfig()
	tlsCfg.CertFile, tlsCfg.KeyFile, tlsCfg.ClientCAFile = serverCert, serverKey, ca.file
	cfg.TLS = configoptional.Some(tlsCfg)
	cfg.Actions.Enabled = true
	cfg.Actions.Host, cfg.Actions.Database, cfg.Actions.User = "127.0.0.1", "postgres", testActionRole
	cfg.Actions.AllowedClients = []string{"ops"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, cfg, nopHost())
	clientAs := func(cn string) *grpc.ClientConn {
		certFile, keyFile := ca.issue(cn, x509.ExtKeyUsageClientAuth)
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		return dial(t, srv.addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			RootCAs: ca.roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})))
	}
	unknown := &yagpcc.TerminateSessionRequest{SessionKey: &yagpcc.SessionKey{SessId: 99, TmId: testTmID}}

	viewer := clientAs("viewer")
	if _, err := yagpcc.NewGetGPInfoClient(viewer).GetGPSessions(ctxTimeout(t), &yagpcc.GetGPSessionsReq{}); err != nil {
		t.Fatalf("viewer cannot read: %v", err)
	}
	_, err := yagpcc.NewActionServiceClient(viewer).TerminateSession(ctxTimeout(t), unknown)
	statustest.AssertCode(t, err, codes.PermissionDenied, "actions::allowed_clients")

	// Past the guard: there is no snapshot to act on.
	_, err = yagpcc.NewActionServiceClient(clientAs("ops")).TerminateSession(ctxTimeout(t), unknown)
	statustest.AssertCode(t, err, codes.FailedPrecondition, "no snapshot yet")
}

// Off by default: the server does not even offer ActionService.
func TestActionServiceIsNotServedByDefault(t *testing.T) {
	srv := startDefault(t)
	srv.consume(t, buildSnapshot(t0, []testSession{fullSession()}))
	_, err := yagpcc.NewActionServiceClient(srv.conn).TerminateSession(
		grpcmetadata.AppendToOutgoingContext(ctxTimeout(t), clientname.ActionTokenHeader, viewtest.ActionToken),
		&yagpcc.TerminateSessionRequest{SessionKey: &yagpcc.SessionKey{SessId: 42, TmId: testTmID}})
	statustest.AssertCode(t, err, codes.Unimplemented, "yagpcc.ActionService")
}
