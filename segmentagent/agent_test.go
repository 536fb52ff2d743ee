// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

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
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configtls"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

func loopbackConfig(root string) Config {
	cfg := NewDefaultConfig()
	cfg.ListenAddress = "127.0.0.1:0"
	cfg.ProcRoot = root
	cfg.AllowedUsers = []string{postgresUID}
	cfg.PostmasterPidFiles = []string{fixturePostmaster}
	cfg.Hostname = "sdw1"
	return cfg
}

func startAgent(t testing.TB, cfg Config) *Agent {
	t.Helper()
	a, err := New(cfg, nil)
	require.NoError(t, err)
	require.NoError(t, a.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithDeadline(context.Background(), await.Deadline(t))
		defer cancel()
		assert.NoError(t, a.Shutdown(ctx))
	})
	return a
}

func dial(t testing.TB, addr net.Addr, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(addr.String(), grpc.WithTransportCredentials(creds))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func TestGRPCPartialAnswer(t *testing.T) {
	a := startAgent(t, loopbackConfig(fixtureRoot))
	client := yagpcc.NewGetQueryInfoClient(dial(t, a.Addr(), nil))
	resp, err := client.GetPidProcStat(context.Background(), request(1001, 4242, 1006, 1005, 1007, 1003, 1008))
	require.NoError(t, err)
	assert.Equal(t, []int64{1001, 1005, 1003, 1008}, answeredPids(resp))
	assert.Equal(t, &yagpcc.ProcReadSummary{Requested: 7, Answered: 4, Vanished: 1, Denied: 1, Failed: 1}, resp.Summary)
	assert.Equal(t, "postgres: (x) y", resp.PidProcData[2].ProcStat.Comm)
	assert.Equal(t, []string{"io: is a directory"}, resp.PidProcData[3].Unread)
	assert.Equal(t, "sdw1", resp.Host.Hostname)
}

func TestGRPCEveryPidFailed(t *testing.T) {
	a := startAgent(t, loopbackConfig(fixtureRoot))
	client := yagpcc.NewGetQueryInfoClient(dial(t, a.Addr(), nil))
	_, err := client.GetPidProcStat(context.Background(), request(1004, 1007))
	assert.Equal(t, codes.Internal, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), "none of the 2 requested processes could be read")
}

func TestGRPCLimits(t *testing.T) {
	cfg := loopbackConfig(fixtureRoot)
	cfg.MaxPidsPerRequest = 3
	a := startAgent(t, cfg)
	client := yagpcc.NewGetQueryInfoClient(dial(t, a.Addr(), nil))

	_, err := client.GetPidProcStat(context.Background(), request(1001, 1002, 1003, 1005))
	assert.Equal(t, codes.InvalidArgument, status.Code(err))

	resp, err := client.GetPidProcStat(context.Background(), request(1001, -1))
	require.NoError(t, err, "a pid that names no process is dropped, not the call")
	assert.Equal(t, []int64{1001}, answeredPids(resp))
	assert.Equal(t, int64(1), resp.Summary.Denied)

	resp, err = client.GetPidProcStat(context.Background(), request(1001, 1001, 1001))
	require.NoError(t, err)
	assert.Equal(t, []int64{1001}, answeredPids(resp))

	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	_, err = client.GetPidProcStat(ctx, request(1001))
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))

	_, err = client.GetMetricQueries(context.Background(), &yagpcc.GetQueriesInfoReq{})
	assert.Equal(t, codes.Unimplemented, status.Code(err))
}

func TestGRPCHealthAndReflection(t *testing.T) {
	a := startAgent(t, loopbackConfig(fixtureRoot))
	conn := dial(t, a.Addr(), nil)
	for _, svc := range []string{"", "yagpcc.GetQueryInfo"} {
		resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		require.NoError(t, err)
		assert.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.Status)
	}

	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	require.NoError(t, err)
	require.NoError(t, stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: ""},
	}))
	resp, err := stream.Recv()
	require.NoError(t, err)
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	assert.Contains(t, names, "yagpcc.GetQueryInfo")
	assert.Contains(t, names, "grpc.health.v1.Health")
	require.NoError(t, stream.CloseSend())
}

func TestPrometheusEndpointServesAgentMetrics(t *testing.T) {
	cfg := loopbackConfig(fixtureRoot)
	cfg.Telemetry.PrometheusAddress = "127.0.0.1:0"
	a := startAgent(t, cfg)
	client := yagpcc.NewGetQueryInfoClient(dial(t, a.Addr(), nil))
	_, err := client.GetPidProcStat(context.Background(), request(1001, 4242))
	require.NoError(t, err)

	resp, err := http.Get("http://" + a.MetricsAddr().String() + "/metrics")
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	text := string(body)
	assert.Contains(t, text, `gpotel_agent_requests_total{`)
	assert.Contains(t, text, `outcome="vanished"`)
	assert.Contains(t, text, `gpotel_agent_request_duration_seconds_bucket{`)
	assert.Contains(t, text, `service_name="gpotel-agent"`)
}

func TestShutdownReportsNotServingAndStops(t *testing.T) {
	a, err := New(loopbackConfig(fixtureRoot), nil)
	require.NoError(t, err)
	require.NoError(t, a.Start(context.Background()))
	addr := a.Addr()
	require.NoError(t, a.Shutdown(context.Background()))
	_, err = net.DialTimeout("tcp", addr.String(), time.Second)
	assert.Error(t, err, "still listening after Shutdown")
	assert.NoError(t, a.Shutdown(context.Background()), "a second Shutdown is harmless")
}

// testPKI is a CA with a server certificate for 127.0.0.1, the collector's
// client certificate and gpotel-top's, under the names docs/rollout.md issues.
type testPKI struct {
	dir                                                  string
	caFile, serverCert, serverKey, clientCert, clientKey string
	otherCert, otherKey                                  string
	caPool                                               *x509.CertPool
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gpotel test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	p.caPool = x509.NewCertPool()
	p.caPool.AddCert(caCert)
	p.caFile = p.writePEM(t, "ca.pem", "CERTIFICATE", caDER)

	issue := func(name string, serial int64, usage x509.ExtKeyUsage, ips []net.IP) (string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		require.NoError(t, err)
		keyDER, err := x509.MarshalECPrivateKey(key)
		require.NoError(t, err)
		return p.writePEM(t, name+".pem", "CERTIFICATE", der), p.writePEM(t, name+"-key.pem", "EC PRIVATE KEY", keyDER)
	}
	p.serverCert, p.serverKey = issue("server", 2, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	p.clientCert, p.clientKey = issue("gpotel-collector", 3, x509.ExtKeyUsageClientAuth, nil)
	p.otherCert, p.otherKey = issue("gpotel-top", 4, x509.ExtKeyUsageClientAuth, nil)
	return p
}

func (p *testPKI) writePEM(t *testing.T, name, kind string, der []byte) string {
	path := filepath.Join(p.dir, name)
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600))
	return path
}

func (p *testPKI) serverTLS(clientCA bool) *configtls.ServerConfig {
	tlsCfg := configtls.NewDefaultServerConfig()
	tlsCfg.CertFile, tlsCfg.KeyFile = p.serverCert, p.serverKey
	if clientCA {
		tlsCfg.ClientCAFile = p.caFile
	}
	return &tlsCfg
}

func (p *testPKI) clientCreds(t *testing.T, withCert bool) credentials.TransportCredentials {
	if withCert {
		return p.credsOf(t, p.clientCert, p.clientKey)
	}
	return credentials.NewTLS(&tls.Config{RootCAs: p.caPool, MinVersion: tls.VersionTLS12})
}

// credsOf presents the certificate in certFile, signed by the test CA.
func (p *testPKI) credsOf(t *testing.T, certFile, keyFile string) credentials.TransportCredentials {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	require.NoError(t, err)
	return credentials.NewTLS(&tls.Config{RootCAs: p.caPool, MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}})
}

func TestGRPCOverTLS(t *testing.T) {
	pki := newTestPKI(t)
	cfg := loopbackConfig(fixtureRoot)
	cfg.TLS = pki.serverTLS(false)
	a := startAgent(t, cfg)

	resp, err := yagpcc.NewGetQueryInfoClient(dial(t, a.Addr(), pki.clientCreds(t, false))).
		GetPidProcStat(context.Background(), request(1001))
	require.NoError(t, err)
	assert.Equal(t, []int64{1001}, answeredPids(resp))

	_, err = yagpcc.NewGetQueryInfoClient(dial(t, a.Addr(), nil)).GetPidProcStat(context.Background(), request(1001))
	assert.Equal(t, codes.Unavailable, status.Code(err), "a plaintext client cannot talk to a TLS agent")
}

func TestGRPCOverMutualTLS(t *testing.T) {
	pki := newTestPKI(t)
	cfg := loopbackConfig(fixtureRoot)
	cfg.TLS = pki.serverTLS(true)
	a := startAgent(t, cfg)

	resp, err := yagpcc.NewGetQueryInfoClient(dial(t, a.Addr(), pki.clientCreds(t, true))).
		GetPidProcStat(context.Background(), request(1001))
	require.NoError(t, err)
	assert.Equal(t, []int64{1001}, answeredPids(resp))

	_, err = yagpcc.NewGetQueryInfoClient(dial(t, a.Addr(), pki.clientCreds(t, false))).
		GetPidProcStat(context.Background(), request(1001))
	assert.Equal(t, codes.Unavailable, status.Code(err), "a client without a certificate is refused")
}

// TestOnlyTheCollectorMayAskTheAgent calls every method of every service the
// agent registers with a certificate from the agent's own client CA that
// names someone else (gpotel-top's): each is PermissionDenied, while the
// collector's certificate is served.
func TestOnlyTheCollectorMayAskTheAgent(t *testing.T) {
	pki := newTestPKI(t)
	cfg := loopbackConfig(fixtureRoot)
	cfg.TLS = pki.serverTLS(true)
	a := startAgent(t, cfg)
	other := dial(t, a.Addr(), pki.credsOf(t, pki.otherCert, pki.otherKey))
	collector := dial(t, a.Addr(), pki.credsOf(t, pki.clientCert, pki.clientKey))

	methods := 0
	for service, info := range a.grpcServer.GetServiceInfo() {
		for _, m := range info.Methods {
			name := "/" + service + "/" + m.Name
			methods++
			assert.Equal(t, codes.PermissionDenied, status.Code(callEmpty(t, other, name, m)), "%s as gpotel-top", name)
			assert.NotEqual(t, codes.PermissionDenied, status.Code(callEmpty(t, collector, name, m)), "%s as the collector", name)
		}
	}
	assert.GreaterOrEqual(t, methods, 6, "the agent's services")

	resp, err := yagpcc.NewGetQueryInfoClient(collector).GetPidProcStat(context.Background(), request(1001))
	require.NoError(t, err)
	assert.Equal(t, []int64{1001}, answeredPids(resp))
}

// callEmpty calls one method with an empty request (every request message
// decodes from no bytes) and returns the call's error.
func callEmpty(t *testing.T, conn *grpc.ClientConn, name string, m grpc.MethodInfo) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !m.IsClientStream && !m.IsServerStream {
		return conn.Invoke(ctx, name, &emptypb.Empty{}, &emptypb.Empty{})
	}
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: m.IsServerStream, ClientStreams: m.IsClientStream}, name)
	if err != nil {
		return err
	}
	if err := stream.SendMsg(&emptypb.Empty{}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	require.NoError(t, stream.CloseSend())
	return stream.RecvMsg(&emptypb.Empty{})
}

func TestStartFailsOnBadTLSFiles(t *testing.T) {
	cfg := loopbackConfig(fixtureRoot)
	tlsCfg := configtls.NewDefaultServerConfig()
	tlsCfg.CertFile, tlsCfg.KeyFile = "/nonexistent/cert.pem", "/nonexistent/key.pem"
	cfg.TLS = &tlsCfg
	a, err := New(cfg, nil)
	require.NoError(t, err)
	assert.ErrorContains(t, a.Start(context.Background()), "tls")
}

func TestPlaintextBeyondLoopbackWarnsAtStart(t *testing.T) {
	for listen, warnings := range map[string]int{"0.0.0.0:0": 1, "127.0.0.1:0": 0} {
		core, logs := observer.New(zap.WarnLevel)
		cfg := loopbackConfig(fixtureRoot)
		cfg.ListenAddress, cfg.Insecure = listen, true
		a, err := New(cfg, zap.New(core))
		require.NoError(t, err)
		require.NoError(t, a.Start(context.Background()))
		ctx, cancel := context.WithDeadline(context.Background(), await.Deadline(t))
		assert.NoError(t, a.Shutdown(ctx))
		cancel()
		assert.Equal(t, warnings, logs.FilterMessageSnippet("plaintext gRPC beyond loopback").Len(), "%s: %v", listen, logs.All())
	}
}
