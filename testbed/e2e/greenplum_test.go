// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/workload"
)

// TestGreenplumConfigWithMutualTLS runs config/greenplum.yaml itself on a
// testbed: agents that demand client certificates, an API behind TLS with
// client certificates and a bearer token, read by gpotel-top. Only what a
// testbed cannot provide is overridden (addresses, ports, the OS user).
func TestGreenplumConfigWithMutualTLS(t *testing.T) {
	needBinaries(t)
	ctx := await.Context(t)
	c := cluster.Start(t, cluster.Options{Hosts: 2, SegmentsPerHost: 1, Dialect: dialect.GP6})
	pgUser, err := instanceOwner(c.Coordinator.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tlsDir := filepath.Join(dir, "tls")
	writePKI(t, tlsDir)
	token := filepath.Join(dir, "api-token")
	password := filepath.Join(dir, "db-password")
	for path, content := range map[string]string{token: "s3cret-token\n", password: "unused-under-trust\n"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	var sets, agents []string
	for _, h := range segmentHosts(c) {
		p, endpoint, err := startAgent(h.Name, "", h.AgentAddress, filepath.Join(dir, "agent-"+h.Name+".log"), bins.Agent,
			"--hostname", h.Name, "--allowed-users", pgUser, "--log-level", "warn",
			"--tls-cert-file", filepath.Join(tlsDir, "agent.pem"), "--tls-key-file", filepath.Join(tlsDir, "agent-key.pem"),
			"--tls-client-ca-file", filepath.Join(tlsDir, "ca.pem"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Stop(10 * time.Second) })
		sets = append(sets, "--set=receivers::gpsession::agents::"+h.Name+"="+endpoint)
		agents = append(agents, endpoint)
	}
	sink, err := StartOTLPSink("127.0.0.1:0", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Stop() })
	ports := map[string]int{}
	for _, name := range []string{"api", "health", "prometheus"} {
		if ports[name], err = freePort("127.0.0.1"); err != nil {
			t.Fatal(err)
		}
	}
	api := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports["api"]))
	coordinator := c.Coordinator
	args := append([]string{"--config", configPath("greenplum.yaml"),
		"--set=receivers::gpsession::port=" + strconv.Itoa(coordinator.Port),
		"--set=receivers::gpsession::host=127.0.0.1",
		"--set=receivers::gpsession::user=" + cluster.AdminRole,
		"--set=receivers::gpsession::collection_interval=2s",
		"--set=receivers::gpsession::timeout=6s",
		"--set=receivers::gpsession::host_timeout=1500ms",
		"--set=receivers::gpsession::reconnect_backoff_max=5s", // a loaded machine's failed scrapes must not push retries half a minute apart
		"--set=receivers::gpsession::local::allowed_users=[" + pgUser + "]",
		"--set=exporters::sessionstate::endpoint=" + api,
		"--set=exporters::sessionstate::last_metrics_window=5m",
		"--set=exporters::prometheus::endpoint=127.0.0.1:" + strconv.Itoa(ports["prometheus"]),
		"--set=exporters::otlp_grpc::tls::insecure=true",
		"--set=extensions::health_check::endpoint=127.0.0.1:" + strconv.Itoa(ports["health"]),
		"--set=service::telemetry::metrics::level=none",
	}, sets...)
	env := []string{
		"GPOTEL_DB_PASSWORD_FILE=" + password,
		"GPOTEL_COORDINATOR_HOST=" + cluster.CoordinatorHost,
		"GPOTEL_TLS_DIR=" + tlsDir,
		"GPOTEL_API_TOKEN_FILE=" + token,
		"GPOTEL_OTLP_ENDPOINT=" + sink.Addr(),
		"GPOTEL_STATE_DIR=" + filepath.Join(dir, "state"),
	}
	startHealthyCollector(t, filepath.Join(dir, "collector.log"), env, ports["health"], args...)

	w, err := workload.Start(ctx, c, workload.Spec{Name: "e2e-mtls", Kind: workload.IdleInTransaction, Duration: untilStopped(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()

	client := tlsAPI(t, api, tlsDir, "s3cret-token")
	waitFor(t, "the session, read over mTLS from both agents", func() (bool, string) {
		st, err := stateOf(ctx, client, w.SessID())
		if err != nil || st == nil {
			return false, fmt.Sprint(err)
		}
		sys := st.GetLastMetrics().GetSystemStat()
		return sys.GetHosts() == 3 && !sys.GetPartial(), fmt.Sprintf("hosts %d partial %v", sys.GetHosts(), sys.GetPartial())
	})
	// gpotel-top's certificate chains to the agents' client CA too, but names someone else.
	conn, err := grpc.NewClient(agents[0], grpc.WithTransportCredentials(tlsCreds(t, tlsDir, "client")))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := yagpcc.NewGetQueryInfoClient(conn).GetPidProcStat(ctx, &yagpcc.GetPidProcInfoReq{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("gpotel-top's certificate asked an agent: %v, want PermissionDenied", err)
	}

	top := filepath.Join(dir, "gpotel-top")
	if err := run(ctx, root, "go", "build", "-o", top, "./cmd/gpotel-top"); err != nil {
		t.Fatal(err)
	}
	topArgs := []string{"--once", "--addr", api, "--tls-ca", filepath.Join(tlsDir, "ca.pem"),
		"--tls-cert", filepath.Join(tlsDir, "client.pem"), "--tls-key", filepath.Join(tlsDir, "client-key.pem")}
	out, err := exec.CommandContext(ctx, top, append(topArgs, "--token-file", token)...).CombinedOutput()
	if err != nil {
		t.Fatalf("gpotel-top with certificate and token: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), " "+strconv.Itoa(w.SessID())+" ") {
		t.Errorf("gpotel-top does not list session %d:\n%s", w.SessID(), out)
	}
	if out, err := exec.CommandContext(ctx, top, topArgs...).CombinedOutput(); err == nil || !strings.Contains(string(out), "the reading token") {
		// gpotel-top words an Unauthenticated answer as a refusal that names the token.
		t.Errorf("gpotel-top without the token: err %v, want a refusal naming the reading token\n%s", err, out)
	}
	noCert := []string{"--once", "--addr", api, "--tls-ca", filepath.Join(tlsDir, "ca.pem"), "--token-file", token}
	if out, err := exec.CommandContext(ctx, top, noCert...).CombinedOutput(); err == nil {
		t.Errorf("gpotel-top without a client certificate was served:\n%s", out)
	}
}

// tlsAPI dials the API with the client certificate and the bearer token.
func tlsAPI(t *testing.T, addr, tlsDir, token string) yagpcc.GetGPInfoClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(tlsCreds(t, tlsDir, "client")), grpc.WithPerRPCCredentials(bearer(token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return yagpcc.NewGetGPInfoClient(conn)
}

// tlsCreds present the certificate <name>.pem of writePKI and trust its CA.
func tlsCreds(t *testing.T, tlsDir, name string) credentials.TransportCredentials {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(tlsDir, name+".pem"), filepath.Join(tlsDir, name+"-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(tlsDir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12})
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return true }

// writePKI writes a CA and the certificates greenplum.yaml names (collector.pem
// to reach agents, api.pem to serve), plus agent.pem for the agents and
// client.pem for API clients (gpotel-top); every server certificate names the
// loopback addresses.
func writePKI(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gpotel test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", caDER)
	var ips []net.IP
	for i := 1; i <= 20; i++ {
		ips = append(ips, net.IPv4(127, 0, 0, byte(i)))
	}
	// The client certificates carry the names docs/rollout.md issues: an
	// agent admits gpotel-collector only (its default allowed_clients).
	for i, leaf := range []struct {
		name, commonName string
		server           bool
	}{{"agent", "gpotel agent", true}, {"api", "gpotel api", true}, {"collector", "gpotel-collector", false}, {"client", "gpotel-top", false}} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: leaf.commonName},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		if leaf.server {
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
			tmpl.IPAddresses, tmpl.DNSNames = ips, []string{"localhost", "mdw", "sdw1", "sdw2"}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		writePEM(t, filepath.Join(dir, leaf.name+".pem"), "CERTIFICATE", der)
		writePEM(t, filepath.Join(dir, leaf.name+"-key.pem"), "EC PRIVATE KEY", keyDER)
	}
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
