// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/confmap"

	"github.com/gpotel/gpotel/testbed/cluster"
)

func validConfig() *Config {
	cfg := createDefaultConfig()
	cfg.Host, cfg.Database, cfg.User, cfg.SSLMode = "mdw", "gpotel_history", "gpotel_history", "verify-full"
	return cfg
}

func TestDefaultConfigWithAConnectionIsValid(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	cfg := createDefaultConfig()
	if cfg.Retention != 30*24*time.Hour || cfg.Schema != "gpotel_history" || cfg.Dialect != "auto" || cfg.Storage != nil {
		t.Errorf("defaults: %+v", cfg)
	}
}

func TestConfigValidateNamesEveryProblem(t *testing.T) {
	cm := confmap.NewFromStringMap(map[string]any{
		"host": "", "port": 70000, "database": "", "user": "",
		"password_file": "/p", "password_env": "P", "sslmode": "sometimes",
		"schema":    `history"; DROP TABLE x; --`,
		"retention": "1h", "timeout": "0s",
		"queue": map[string]any{"max_bytes": 1024},
		"batch": map[string]any{"max_events": 0},
		"retry": map[string]any{"initial_interval": "10s", "max_interval": "1s"},
	})
	cfg := createDefaultConfig()
	if err := cm.Unmarshal(cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Dialect = "oracle" // configuration read from YAML never holds it: see the next test
	err := cfg.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{`host ""`, "port 70000", `database ""`, `user ""`, "password_env", `sslmode "sometimes"`,
		`dialect "oracle": want auto, gp6, gp7, cloudberry or postgresql`, "schema ", "retention 1h0m0s", "timeout 0s", "queue::max_bytes 1024",
		"batch::max_events 0", "retry:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %q:\n%v", want, err)
		}
	}
}

func TestConfigRefusesAnUnknownDialectWhenRead(t *testing.T) {
	err := confmap.NewFromStringMap(map[string]any{"dialect": "oracle"}).Unmarshal(createDefaultConfig())
	if want := `dialect "oracle": want auto, gp6, gp7, cloudberry or postgresql`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("dialect oracle: %v, want an error saying %s", err, want)
	}
}

// As the API's rule for plaintext beyond loopback: a history connection
// beyond this host whose sslmode does not check the server's certificate
// (the default prefer among them) is refused unless insecure: true says
// so; on a socket directory or loopback any sslmode goes.
func TestAnUnverifiedHistoryConnectionBeyondLoopbackIsRefused(t *testing.T) {
	for _, tc := range []struct {
		host, sslmode string
		insecure, ok  bool
	}{
		{"mdw", "prefer", false, false},
		{"10.0.0.5", "require", false, false},
		{"mdw,sdw1", "disable", false, false},
		{"mdw", "verify-ca", false, true},
		{"mdw", "verify-full", false, true},
		{"mdw", "prefer", true, true},
		{"127.0.0.1", "prefer", false, true},
		{"::1", "disable", false, true},
		{"localhost", "prefer", false, true},
		{"/var/run/postgresql", "prefer", false, true},
	} {
		cfg := validConfig()
		cfg.Host, cfg.SSLMode, cfg.Insecure = tc.host, tc.sslmode, tc.insecure
		err := cfg.Validate()
		if tc.ok != (err == nil) {
			t.Errorf("host %s, sslmode %s, insecure %v: %v; want accepted %v", tc.host, tc.sslmode, tc.insecure, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "insecure: true") {
			t.Errorf("host %s, sslmode %s: %v; want it to name insecure: true", tc.host, tc.sslmode, err)
		}
	}
}

func TestRetentionZeroKeepsEverything(t *testing.T) {
	cfg := validConfig()
	cfg.Retention = 0
	if err := cfg.Validate(); err != nil {
		t.Errorf("retention 0: %v", err)
	}
}

// The testbed (make run) creates the history role and database with the
// statements docs/operations.md gives a DBA.
func TestTheTestbedGrantsWhatTheDocsSay(t *testing.T) {
	var documented []string
	for _, stmt := range statementsOf(documentedSQL(t, "grants")) {
		documented = append(documented, strings.TrimSuffix(stmt, ";"))
	}
	if !slices.Equal(documented, cluster.HistoryGrants) {
		t.Errorf("docs/operations.md grants %q;\nthe testbed %q", documented, cluster.HistoryGrants)
	}
}
