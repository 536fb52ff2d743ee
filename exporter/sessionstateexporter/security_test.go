// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configauth"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/extension/extensionauth"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/statustest"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// testAuthority is a CA that issues certificates into a test's directory.
type testAuthority struct {
	t      *testing.T
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	dir    string
	serial int64
	// file is the CA certificate, for client_ca_file.
	file  string
	roots *x509.CertPool
}

func newTestAuthority(t *testing.T) *testAuthority {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gpotel test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testAuthority{t: t, cert: cert, key: key, dir: t.TempDir(), serial: 1, roots: x509.NewCertPool()}
	ca.roots.AddCert(cert)
	ca.file = filepath.Join(ca.dir, "ca.crt")
	if err := os.WriteFile(ca.file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return ca
}

// issue writes a certificate named cn, for 127.0.0.1 when it is the
// server's, and returns its cert and key files.
func (ca *testAuthority) issue(cn string, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	t := ca.t
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.serial++
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%d-%s", ca.serial, cn)
	certFile, keyFile = filepath.Join(ca.dir, name+".crt"), filepath.Join(ca.dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// testCA writes a CA and a server certificate for 127.0.0.1 and returns
// the cert/key paths and a pool that trusts the CA.
func testCA(t *testing.T) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	ca := newTestAuthority(t)
	certFile, keyFile = ca.issue("127.0.0.1", x509.ExtKeyUsageServerAuth)
	return certFile, keyFile, ca.roots
}

func TestTLS(t *testing.T) {
	certFile, keyFile, roots := testCA(t)
	cfg := testConfig()
	tlsCfg := configtls.NewDefaultServerConfig()
	tlsCfg.CertFile, tlsCfg.KeyFile = certFile, keyFile
	cfg.TLS = configoptional.Some(tlsCfg)
	srv := startServer(t, cfg, nopHost())
	srv.consume(t, buildSnapshot(t0, []testSession{fullSession()}))

	secure := yagpcc.NewGetGPInfoClient(dial(t, srv.addr,
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}))))
	resp, err := secure.GetGPSessions(ctxTimeout(t), &yagpcc.GetGPSessionsReq{})
	if err != nil {
		t.Fatalf("TLS client: %v", err)
	}
	assertProtoEqual(t, resp.SessionsState[0], wantFullState())

	plain := yagpcc.NewGetGPInfoClient(dial(t, srv.addr, grpc.WithTransportCredentials(insecure.NewCredentials())))
	_, err = plain.GetGPSessions(await.Context(t), &yagpcc.GetGPSessionsReq{})
	statustest.AssertCode(t, err, codes.Unavailable, "")

	// TLS off: a TLS client cannot talk to the plain server.
	plainSrv := startDefault(t)
	tlsToPlain := yagpcc.NewGetGPInfoClient(dial(t, plainSrv.addr,
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}))))
	_, err = tlsToPlain.GetGPSessions(await.Context(t), &yagpcc.GetGPSessionsReq{})
	statustest.AssertCode(t, err, codes.Unavailable, "")
}

// bearerAuth stands in for contrib's bearertokenauth: an extensionauth.Server
// that accepts one token.
type bearerAuth struct{ token string }

var _ extensionauth.Server = bearerAuth{}

func (bearerAuth) Start(context.Context, component.Host) error { return nil }
func (bearerAuth) Shutdown(context.Context) error              { return nil }
func (a bearerAuth) Authenticate(ctx context.Context, sources map[string][]string) (context.Context, error) {
	for _, v := range sources["authorization"] {
		if v == "Bearer "+a.token {
			return ctx, nil
		}
	}
	return ctx, errors.New("missing or wrong bearer token")
}

// extensionHost is a host that offers the given extensions.
type extensionHost map[component.ID]component.Component

func (h extensionHost) GetExtensions() map[component.ID]component.Component { return h }

func TestBearerTokenAuth(t *testing.T) {
	authID := component.MustNewID("bearertokenauth")
	cfg := testConfig()
	cfg.Auth = configoptional.Some(configauth.Config{AuthenticatorID: authID})
	srv := startServer(t, cfg, extensionHost{authID: bearerAuth{token: "s3cret"}})
	srv.consume(t, buildSnapshot(t0, []testSession{fullSession()}))

	for _, tc := range []struct {
		name, header string
		want         codes.Code
	}{
		{"no token", "", codes.Unauthenticated},
		{"wrong token", "Bearer nope", codes.Unauthenticated},
		{"right token", "Bearer s3cret", codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxTimeout(t)
			if tc.header != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", tc.header)
			}
			_, err := srv.client.GetGPSessions(ctx, &yagpcc.GetGPSessionsReq{})
			statustest.AssertCode(t, err, tc.want, "")
			// gpotel.v1 services on the same server share the authenticator.
			_, err = gpotelv1.NewClusterTopClient(srv.conn).GetClusterTop(ctx, &gpotelv1.GetClusterTopRequest{})
			statustest.AssertCode(t, err, tc.want, "")
			_, err = gpotelv1.NewFinishedWorkClient(srv.conn).ListFinishedQueries(ctx, &gpotelv1.ListFinishedWorkRequest{})
			statustest.AssertCode(t, err, tc.want, "")
			_, err = gpotelv1.NewRuleActionsClient(srv.conn).ListRuleActions(ctx, &gpotelv1.ListRuleActionsRequest{})
			statustest.AssertCode(t, err, tc.want, "")
		})
	}

	// Auth off: no token needed.
	open := startDefault(t)
	if _, err := open.client.GetGPSessions(ctxTimeout(t), &yagpcc.GetGPSessionsReq{}); err != nil {
		t.Fatalf("auth off: %v", err)
	}
}

func TestStartFailsWhenTheAuthenticatorIsMissing(t *testing.T) {
	cfg := testConfig()
	cfg.Auth = configoptional.Some(configauth.Config{AuthenticatorID: component.MustNewID("absent")})
	exp, err := NewFactory().CreateMetrics(context.Background(), exportertestSettings(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(context.Background(), nopHost()); err == nil {
		_ = exp.Shutdown(context.Background())
		t.Fatal("Start succeeded without the configured authenticator")
	}
	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown after a failed Start: %v", err)
	}
}

func TestPlaintextBeyondLoopbackWarnsAtStart(t *testing.T) {
	for endpoint, warnings := range map[string]int{"0.0.0.0:0": 1, "127.0.0.1:0": 0} {
		core, logs := observer.New(zap.WarnLevel)
		set := exportertestSettings()
		set.Logger = zap.New(core)
		cfg := testConfig()
		cfg.NetAddr.Endpoint, cfg.Insecure = endpoint, true
		exp, err := NewFactory().CreateMetrics(context.Background(), set, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := exp.Start(context.Background(), nopHost()); err != nil {
			t.Fatal(err)
		}
		if err := exp.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := logs.FilterMessageSnippet("plaintext beyond loopback").Len(); got != warnings {
			t.Errorf("%s: %d warnings, want %d: %v", endpoint, got, warnings, logs.All())
		}
	}
}
