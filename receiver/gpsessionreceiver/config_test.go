// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/xconfmap"

	"github.com/gpotel/gpotel/internal/configtest"
	"github.com/gpotel/gpotel/internal/dialect"
)

func validConfig() *Config {
	c := createDefaultConfig()
	c.DSN = "host=127.0.0.1 port=5432 user=gpadmin dbname=postgres"
	return c
}

func TestDefaultConfigWithADSNIsValid(t *testing.T) {
	if err := xconfmap.Validate(validConfig()); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultsMatchTheDocumentedValues(t *testing.T) {
	c := createDefaultConfig()
	if c.AgentPort != 1433 || c.MaxPidsPerCall != 1000 || c.MaxParallelHosts != 16 || !c.IncludeSystemProcesses || c.Dialect != dialect.Auto {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestValidateNamesEveryProblem(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"no database", func(c *Config) { c.DSN = "" }, "no database"},
		{"dsn and fields", func(c *Config) { c.Host = "mdw" }, "use one or the other"},
		{"unparseable dsn", func(c *Config) { c.DSN = "host=x port=notaport" }, "dsn:"},
		{"bad port", func(c *Config) { c.DSN = ""; c.Host = "mdw"; c.Port = 70000 }, "port 70000"},
		{"two password sources", func(c *Config) { c.Password = "x"; c.PasswordEnv = "PGPW" }, "set at most one"},
		{"bad sslmode", func(c *Config) { c.SSLMode = "sometimes" }, `sslmode "sometimes"`},
		{"zero interval", func(c *Config) { c.CollectionInterval = 0 }, "collection_interval"},
		{"unknown dialect", func(c *Config) { c.Dialect = "gp5" }, `dialect "gp5": want auto, gp6, gp7, cloudberry or postgresql`},
		{"empty dialect", func(c *Config) { c.Dialect = "" }, `dialect "": want auto, gp6, gp7, cloudberry or postgresql`},
		{"negative query length", func(c *Config) { c.QueryMaxLength = -1 }, "query_max_length"},
		{"zero statement timeout", func(c *Config) { c.StatementTimeout = 0 }, "statement_timeout"},
		{"zero topology ttl", func(c *Config) { c.TopologyTTL = 0 }, "topology_ttl"},
		{"agent port zero", func(c *Config) { c.AgentPort = 0 }, "agent_port 0"},
		{"agent override without port", func(c *Config) { c.Agents = map[string]string{"sdw1": "10.0.0.1"} }, "agents[sdw1]"},
		{"agent template endpoint", func(c *Config) { c.Agent.Endpoint = "sdw1:1433" }, "agent::endpoint"},
		{"batch above agent limit", func(c *Config) { c.MaxPidsPerCall = 10001 }, "max_pids_per_call 10001"},
		{"batch zero", func(c *Config) { c.MaxPidsPerCall = 0 }, "max_pids_per_call 0"},
		{"no parallelism", func(c *Config) { c.MaxParallelHosts = 0 }, "max_parallel_hosts"},
		{"host timeout zero", func(c *Config) { c.HostTimeout = 0 }, "host_timeout 0s"},
		{"host timeout past the scrape deadline", func(c *Config) { c.HostTimeout = c.Timeout }, "shorter than the scrape deadline"},
		{"empty local host", func(c *Config) { c.LocalHosts = []string{" "} }, "local_hosts[0]"},
		{"session info disabled", func(c *Config) { c.Metrics.GpotelSessionInfo.Enabled = false }, "gpotel.session.info"},
		{"host up disabled", func(c *Config) { c.Metrics.GpotelHostUp.Enabled = false }, "gpotel.host.up"},
		{"backoff inverted", func(c *Config) { c.ReconnectBackoffMax = time.Millisecond }, "reconnect_backoff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.mutate(c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

// The dialect setting is a name in YAML: a known one is taken, anything
// else refused when the configuration is read, naming what is allowed.
func TestDialectSettingTakesOnlyADialectsName(t *testing.T) {
	c := createDefaultConfig()
	if err := confmap.NewFromStringMap(map[string]any{"dialect": "cloudberry"}).Unmarshal(c); err != nil || c.Dialect != "cloudberry" {
		t.Fatalf("dialect cloudberry: %q, %v", c.Dialect, err)
	}
	err := confmap.NewFromStringMap(map[string]any{"dialect": "greenplum6"}).Unmarshal(createDefaultConfig())
	if want := `dialect "greenplum6": want auto, gp6, gp7, cloudberry or postgresql`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("dialect greenplum6: %v, want an error saying %s", err, want)
	}
}

func TestValidateJoinsAllErrors(t *testing.T) {
	c := validConfig()
	c.DSN = ""
	c.AgentPort = -1
	c.MaxPidsPerCall = 0
	msg := c.Validate().Error()
	for _, want := range []string{"no database", "agent_port", "max_pids_per_call"} {
		if !strings.Contains(msg, want) {
			t.Errorf("joined error lacks %q: %s", want, msg)
		}
	}
}

func TestLoadConfigFromYAML(t *testing.T) {
	c := configtest.Load(t, NewFactory(), "gpsession").(*Config)
	if err := xconfmap.Validate(c); err != nil {
		t.Fatal(err)
	}
	if c.Host != "mdw" || c.Port != 5432 || c.PasswordFile != "/etc/gpotel/pgpass" || c.SSLMode != "verify-full" {
		t.Errorf("database fields: %+v", c)
	}
	if c.Agents["sdw1"] != "10.0.0.11:1433" || c.MaxPidsPerCall != 500 || c.HostTimeout != 3*time.Second {
		t.Errorf("agent fields: %+v", c)
	}
	if c.Agent.TLS.Insecure || c.Agent.TLS.CAFile != "/etc/gpotel/ca.pem" || c.Agent.TLS.CertFile != "/etc/gpotel/client.pem" {
		t.Errorf("agent TLS: %+v", c.Agent.TLS)
	}
	if len(c.LocalHosts) != 1 || c.LocalHosts[0] != "mdw" || c.Local.AllowedUsers[0] != "gpadmin" {
		t.Errorf("local read: %v %+v", c.LocalHosts, c.Local)
	}
	if c.CollectionInterval != 10*time.Second || c.Metrics.GpotelProcessMemorySwap.Enabled {
		t.Errorf("controller/metrics: %v %v", c.CollectionInterval, c.Metrics.GpotelProcessMemorySwap.Enabled)
	}
}

func TestConnStringKeepsURLsAndAddsTLS(t *testing.T) {
	c := validConfig()
	c.DSN = "postgres://gpadmin@mdw:5432/postgres"
	c.SSLMode = "require"
	got, err := connString(c)
	if err != nil || got != "postgres://gpadmin@mdw:5432/postgres?sslmode=require" {
		t.Fatalf("connString = %q, %v", got, err)
	}
	c.DSN = ""
	c.Host, c.Port, c.User, c.Database = "mdw", 6000, "o'brien", "db"
	got, _ = connString(c)
	if got != `host='mdw' port='6000' user='o\'brien' dbname='db' sslmode='require'` {
		t.Fatalf("connString = %q", got)
	}
}
