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
	cfg.Host, cfg.Database, cfg.User = "mdw", "gpotel_history", "gpotel_history"
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
		`dialect "oracle": want auto, gp6, gp7, cloudberry or postgresql`, "schema ", "retention 1h0m0s", "timeout 0s", "queue::max_bytes 1024", "batch::max_events 0", "retry:"} {
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
