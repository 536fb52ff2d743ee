// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/confmap/xconfmap"

	"github.com/gpotel/gpotel/internal/configtest"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	return configtest.Load(t, NewFactory(), name).(*Config)
}

func TestDefaultConfig(t *testing.T) {
	cfg := loadConfig(t, "sessionstate")
	if err := xconfmap.Validate(cfg); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	if cfg.NetAddr.Endpoint != "127.0.0.1:1432" || cfg.LastMetricsWindow != 5*time.Minute ||
		cfg.SessionGracePeriod != 30*time.Second || cfg.MaxSessions != 100000 ||
		cfg.DefaultPageSize != 100 || cfg.MaxPageSize != 10000 || cfg.MaxResponseBytes != 4<<20 ||
		cfg.MemoryContexts.AgentPort != 1433 || cfg.MemoryContexts.Timeout != 5*time.Second || !cfg.MemoryContexts.Agent.TLS.Insecure ||
		cfg.MemoryContexts.MaxBackends != 4096 {
		t.Fatalf("unexpected defaults: %+v", cfg)
	}
}

func TestCustomConfig(t *testing.T) {
	cfg := loadConfig(t, "sessionstate/custom")
	if err := xconfmap.Validate(cfg); err != nil {
		t.Fatalf("custom config invalid: %v", err)
	}
	if cfg.NetAddr.Endpoint != "127.0.0.1:11432" || cfg.MaxRecvMsgSizeMiB != 8 || !cfg.TLS.HasValue() ||
		cfg.TLS.Get().CertFile != "/etc/gpotel/server.crt" || !cfg.Auth.HasValue() ||
		cfg.Auth.Get().AuthenticatorID != component.MustNewID("bearertokenauth") {
		t.Fatalf("gRPC server settings not read: %+v", cfg.ServerConfig)
	}
	if cfg.ClusterID != "prod-gp" || cfg.Hostname != "mdw.example" || cfg.LastMetricsWindow != 15*time.Minute ||
		cfg.SessionGracePeriod != time.Minute || cfg.MaxSessions != 5000 || cfg.DefaultPageSize != 50 ||
		cfg.MaxPageSize != 500 || cfg.MaxResponseBytes != 1<<20 {
		t.Fatalf("exporter settings not read: %+v", cfg)
	}
	mc := cfg.MemoryContexts
	if mc.AgentPort != 11433 || mc.Agents["sdw1"] != "10.0.0.11:1433" || mc.Agent.TLS.CAFile != "/etc/gpotel/ca.crt" ||
		mc.Timeout != 10*time.Second || mc.MaxParallel != 4 || mc.TopBackends != 5 || mc.MaxBackends != 100 {
		t.Fatalf("memory_contexts not read: %+v", mc)
	}
	ac := cfg.Actions
	if !ac.Enabled || ac.Host != "mdw.example" || ac.Port != 6432 || ac.Database != "postgres" || ac.User != "gpotel_actions" ||
		ac.PasswordFile != "/etc/gpotel/actions.password" || ac.SSLMode != "verify-full" || ac.SSLRootCert != "/etc/gpotel/db-ca.crt" ||
		ac.StatementTimeout != 3*time.Second || ac.TokenFile != "/etc/gpotel/action.token" || ac.MaxSessionsPerCall != 20 {
		t.Fatalf("actions not read: %+v", ac)
	}
}

// Actions are off unless configured, and enabled they need their own
// connection settings and a way to tell which clients may act.
func TestActionsAreOffByDefaultAndNeedTheirOwnAuthorization(t *testing.T) {
	if cfg := loadConfig(t, "sessionstate"); cfg.Actions.Enabled {
		t.Fatal("actions are enabled by default")
	}
	err := xconfmap.Validate(loadConfig(t, "sessionstate/actions_without_authorization"))
	if err == nil || !strings.Contains(err.Error(), `actions::token_file "": set token_file or allowed_clients`) {
		t.Fatalf("actions without a token or allowed clients: %v", err)
	}
}

func TestInvalidConfigNamesEveryProblem(t *testing.T) {
	err := xconfmap.Validate(loadConfig(t, "sessionstate/invalid"))
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{`endpoint ""`, "last_metrics_window 0s", "session_grace_period -1s", "max_sessions 0",
		"default_page_size 600: must not exceed max_page_size 500", "max_response_bytes 10",
		"memory_contexts::agent_port 0", "memory_contexts::timeout 2m0s", "memory_contexts::max_parallel 0", "memory_contexts::top_backends -1", "memory_contexts::max_backends 0",
		`actions::host ""`, "actions::port 70000", `actions::database ""`, `actions::user ""`,
		`actions::password_file "/a": password_env "B" is set too`, `actions::sslmode "sometimes"`, "actions::statement_timeout 0s",
		`actions::allowed_clients[1] " "`, "actions::allowed_clients [ops  ]: needs tls::client_ca_file", "actions::max_sessions_per_call 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q: %v", want, err)
		}
	}
}

func TestPlaintextBeyondLoopbackNeedsInsecure(t *testing.T) {
	err := xconfmap.Validate(loadConfig(t, "sessionstate/plaintext_beyond_loopback"))
	if err == nil || !strings.Contains(err.Error(), "insecure: true") {
		t.Fatalf("plaintext on 0.0.0.0 without insecure: %v", err)
	}
	cfg := loadConfig(t, "sessionstate/insecure")
	if err := xconfmap.Validate(cfg); err != nil || !cfg.Insecure {
		t.Fatalf("insecure: true on 0.0.0.0: %v (insecure %v)", err, cfg.Insecure)
	}
}

// Actions need TLS beyond loopback: insecure: true lets a plaintext API be
// read from other hosts, never acted through, where anyone on the path
// could take the action token.
func TestActionsNeedTLSBeyondLoopback(t *testing.T) {
	withActions := func(endpoint string) *Config {
		cfg := testConfig()
		cfg.NetAddr.Endpoint, cfg.Insecure = endpoint, true
		cfg.Actions.Enabled = true
		cfg.Actions.Host, cfg.Actions.Database, cfg.Actions.User = "127.0.0.1", "postgres", testActionRole
		cfg.Actions.TokenFile = "/etc/gpotel/action.token"
		return cfg
	}
	err := withActions("0.0.0.0:1432").Validate()
	if err == nil || !strings.Contains(err.Error(), `actions::enabled: endpoint "0.0.0.0:1432" is not a loopback address`) {
		t.Errorf("actions in plaintext on 0.0.0.0 with insecure: true: %v", err)
	}
	if err := withActions("127.0.0.1:1432").Validate(); err != nil {
		t.Errorf("actions in plaintext on loopback: %v", err)
	}
	tlsOn := withActions("0.0.0.0:1432")
	tlsOn.TLS = configoptional.Some(configtls.NewDefaultServerConfig())
	if err := tlsOn.Validate(); err != nil {
		t.Errorf("actions with tls on 0.0.0.0: %v", err)
	}
}
