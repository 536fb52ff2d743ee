// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configtls"
	"go.uber.org/zap"

	"github.com/gpotel/gpotel/segmentagent"
	"github.com/gpotel/gpotel/segmentagent/procfixture"
)

// testPKI writes a CA and two leaf certificates it signed (server for
// 127.0.0.1, client) as PEM files, and returns their paths.
func testPKI(t *testing.T) (dir string) {
	t.Helper()
	dir = t.TempDir()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	caKey := key()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gpotel test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	write("ca.pem", "CERTIFICATE", caDER)
	for i, leaf := range []struct {
		name  string
		usage x509.ExtKeyUsage
	}{{"server", x509.ExtKeyUsageServerAuth}, {"client", x509.ExtKeyUsageClientAuth}} {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: leaf.name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{leaf.usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		write(leaf.name+".pem", "CERTIFICATE", der)
		kDER, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		write(leaf.name+"-key.pem", "EC PRIVATE KEY", kDER)
	}
	return dir
}

// TestMutualTLSToARealAgent scrapes through a real agent that demands a
// client certificate: with the certificate every process arrives, without it
// the host is down.
func TestMutualTLSToARealAgent(t *testing.T) {
	pki := testPKI(t)
	root := t.TempDir()
	pids := []int{101, 102, 103}
	if err := procfixture.Write(root, pids, os.Getuid()); err != nil {
		t.Fatal(err)
	}
	acfg := segmentagent.NewDefaultConfig()
	acfg.ListenAddress = "127.0.0.1:0"
	acfg.ProcRoot = root
	acfg.AllowedUsers = []string{strconv.Itoa(os.Getuid())}
	server := configtls.NewDefaultServerConfig()
	server.CertFile, server.KeyFile = filepath.Join(pki, "server.pem"), filepath.Join(pki, "server-key.pem")
	server.ClientCAFile = filepath.Join(pki, "ca.pem")
	acfg.TLS = &server
	acfg.AllowedClients = []string{"client"} // the collector's certificate's name here
	agent, err := segmentagent.New(acfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Shutdown(context.Background()) })

	scrapeWith := func(t *testing.T, tls configtls.ClientConfig) map[int64]processKey {
		cfg := validConfig()
		cfg.HostTimeout = 2 * time.Second
		cfg.Agents = map[string]string{"sdw1": agent.Addr().String()}
		cfg.Agent.TLS = tls
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		s := unitScraper(t, cfg, &countingSource{memorySource: newMemorySource(1, pids)}, nil, componenttest.NewTelemetry())
		md, err := scrapeJoined(context.Background(), s)
		if up := hostUp(md)["sdw1"]; (err == nil) != (up == 1) {
			t.Fatalf("err %v but host.up %d", err, up)
		}
		return processesIn(md)
	}

	t.Run("with the client certificate", func(t *testing.T) {
		tls := configtls.ClientConfig{}
		tls.CAFile = filepath.Join(pki, "ca.pem")
		tls.CertFile, tls.KeyFile = filepath.Join(pki, "client.pem"), filepath.Join(pki, "client-key.pem")
		if got := scrapeWith(t, tls); len(got) != len(pids) {
			t.Fatalf("%d processes over mTLS, want %d", len(got), len(pids))
		}
	})
	t.Run("without a client certificate", func(t *testing.T) {
		tls := configtls.ClientConfig{}
		tls.CAFile = filepath.Join(pki, "ca.pem")
		if got := scrapeWith(t, tls); len(got) != 0 {
			t.Fatalf("%d processes read without a client certificate", len(got))
		}
	})
	t.Run("plaintext", func(t *testing.T) {
		if got := scrapeWith(t, configtls.ClientConfig{Insecure: true}); len(got) != 0 {
			t.Fatalf("%d processes read in plaintext from a TLS agent", len(got))
		}
	})
}
