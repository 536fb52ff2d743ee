// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package agentconn

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
)

func TestEndpointIsTheOverrideElseHostAndPort(t *testing.T) {
	c := NewDefaultConfig()
	c.Agents = map[string]string{"sdw1": "10.0.0.11:7000"}
	if got := c.Endpoint("sdw1"); got != "10.0.0.11:7000" {
		t.Errorf("sdw1: %s, want the override", got)
	}
	if got := c.Endpoint("sdw2"); got != "sdw2:1433" {
		t.Errorf("sdw2: %s, want sdw2:1433", got)
	}
	if got := c.Endpoint("fe80::1"); got != "[fe80::1]:1433" {
		t.Errorf("an IPv6 host: %s", got)
	}
}

func TestTLSIsOnWhenAnythingButPlaintextIsConfigured(t *testing.T) {
	plain := NewDefaultConfig().Agent.TLS
	if !clientTLS(plain).Insecure {
		t.Error("the default agent connection is not plaintext")
	}
	withCert := plain
	withCert.CertFile, withCert.KeyFile = "/etc/gpotel/client.pem", "/etc/gpotel/client-key.pem"
	if clientTLS(withCert).Insecure {
		t.Error("a client certificate was configured and the connection stays plaintext")
	}
	withSystemPool := plain
	withSystemPool.IncludeSystemCACertsPool = true
	if clientTLS(withSystemPool).Insecure {
		t.Error("include_system_ca_certs_pool was configured and the connection stays plaintext")
	}
}

func TestProblemsNameTheKeyAfterThePrefix(t *testing.T) {
	c := NewDefaultConfig()
	c.AgentPort = 0
	c.Agents = map[string]string{"sdw1": "10.0.0.1", "": "10.0.0.2:1433"}
	c.Agent.Endpoint = "sdw1:1433"
	var msgs []string
	for _, err := range c.Problems("memory_contexts::") {
		msgs = append(msgs, err.Error())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"memory_contexts::agent_port 0", "memory_contexts::agents[sdw1]",
		`memory_contexts::agents[""]: empty host name`, "memory_contexts::agent::endpoint"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems do not name %q:\n%s", want, all)
		}
	}
	if errs := NewDefaultConfig().Problems(""); len(errs) != 0 {
		t.Errorf("the default config has problems: %v", errs)
	}
}

func TestPoolKeepsOneConnectionPerHostUntilForgotten(t *testing.T) {
	p := NewPool(NewDefaultConfig(), nil, componenttest.NewNopTelemetrySettings(), 1<<20)
	ctx := context.Background()
	a, err := p.Conn(ctx, "sdw1")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := p.Conn(ctx, "sdw1"); again != a {
		t.Error("a second Conn for sdw1 made another connection")
	}
	if _, err := p.Conn(ctx, "sdw2"); err != nil {
		t.Fatal(err)
	}
	if gone := p.Forget(map[string]bool{"sdw2": true}); len(gone) != 1 || gone[0] != "sdw1" {
		t.Errorf("forgot %v, want [sdw1]", gone)
	}
	if p.Len() != 1 {
		t.Errorf("after forgetting sdw1: %d connections, want 1", p.Len())
	}
	if err := p.Close(); err != nil || p.Len() != 0 {
		t.Errorf("Close: %v, %d connections left", err, p.Len())
	}
}
