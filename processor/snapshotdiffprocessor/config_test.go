// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/confmap/xconfmap"

	"github.com/gpotel/gpotel/internal/configtest"
	"github.com/gpotel/gpotel/internal/pipeline"
)

func TestDefaultConfig(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	if len(cfg.Windows) != 1 || cfg.Windows[0] != 5*time.Minute {
		t.Errorf("default windows = %v, want [5m]", cfg.Windows)
	}
	if cfg.MaxStoredPoints != 0 || cfg.EmitProcessMetrics || cfg.EmitSessionHostFigures {
		t.Errorf("default max_stored_points=%d emit_process_metrics=%v emit_session_host_figures=%v, want 0, false, false",
			cfg.MaxStoredPoints, cfg.EmitProcessMetrics, cfg.EmitSessionHostFigures)
	}
	if want := []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute}; len(cfg.TimeConstants) != 3 ||
		cfg.TimeConstants[0] != want[0] || cfg.TimeConstants[1] != want[1] || cfg.TimeConstants[2] != want[2] {
		t.Errorf("default time_constants = %v, want %v", cfg.TimeConstants, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("default config does not validate: %v", err)
	}
}

// loadConfig reads one entry of testdata/config.yaml over the defaults.
func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	return configtest.Load(t, NewFactory(), name).(*Config)
}

func TestConfigUnmarshal(t *testing.T) {
	if err := xconfmap.Validate(loadConfig(t, "snapshotdiff")); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
	cfg := loadConfig(t, "snapshotdiff/custom")
	if err := xconfmap.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{time.Minute, 5 * time.Minute, 90 * time.Minute}
	if len(cfg.Windows) != len(want) {
		t.Fatalf("windows = %v, want %v", cfg.Windows, want)
	}
	for i := range want {
		if cfg.Windows[i] != want[i] {
			t.Errorf("windows[%d] = %v, want %v", i, cfg.Windows[i], want[i])
		}
	}
	if cfg.MaxStoredPoints != 120 || !cfg.EmitProcessMetrics || !cfg.EmitSessionHostFigures {
		t.Errorf("got %+v", cfg)
	}
	if len(cfg.TimeConstants) != 2 || cfg.TimeConstants[0] != 10*time.Second ||
		cfg.Queries != (QueriesConfig{Enabled: true, Text: true, TextMaxLength: 256, MaxFinished: 10}) {
		t.Errorf("time constants %v, queries %+v", cfg.TimeConstants, cfg.Queries)
	}
}

// Every problem of testdata's invalid entry is named, as key, value and what is wrong.
func TestInvalidConfigNamesEveryProblem(t *testing.T) {
	err := xconfmap.Validate(loadConfig(t, "snapshotdiff/invalid"))
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"windows[0] 0s: must be positive", "windows[2] 1m0s: listed twice",
		"time_constants[0] -1s: must be positive", "max_stored_points -1: must not be negative",
		"queries::text_max_length -1: must not be negative", "queries::max_finished -2: must not be negative"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		wants []string // every one must appear in the joined error
	}{
		{"empty windows", Config{}, []string{"at least one window"}},
		{"non-positive window", Config{Windows: []time.Duration{0, -time.Second}}, []string{"windows[0] 0s", "windows[1] -1s", "must be positive"}},
		{"duplicate window", Config{Windows: []time.Duration{time.Minute, 60 * time.Second}}, []string{"windows[1] 1m0s", "twice"}},
		{"negative max_stored_points", Config{Windows: []time.Duration{time.Minute}, MaxStoredPoints: -1}, []string{"max_stored_points -1", "negative"}},
		{"one stored point", Config{Windows: []time.Duration{time.Minute}, MaxStoredPoints: 1}, []string{"max_stored_points 1", "nothing to diff"}},
		{"bad time constants", Config{Windows: []time.Duration{time.Minute}, TimeConstants: []time.Duration{0, time.Minute, 60 * time.Second}},
			[]string{"time_constants[0] 0s", "must be positive", "time_constants[2] 1m0s", "twice"}},
		{"all problems at once", Config{Windows: []time.Duration{-1, time.Minute, time.Minute}, MaxStoredPoints: -5},
			[]string{"must be positive", "twice", "negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if err == nil {
				t.Fatal("Validate accepted it")
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	ok := Config{Windows: []time.Duration{time.Minute, 5 * time.Minute}, MaxStoredPoints: 2}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid config rejected: %v", err)
	}
}

func TestWindowName(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * time.Second:        "30s",
		5 * time.Minute:         "5m",
		90 * time.Second:        "1m30s",
		time.Hour:               "1h",
		90 * time.Minute:        "1h30m",
		1500 * time.Millisecond: "1.5s",
	} {
		if got := pipeline.WindowName(d); got != want {
			t.Errorf("WindowName(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestQueriesConfigDefaultsAndValidate(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	if q := cfg.Queries; !q.Enabled || q.Text || q.TextMaxLength != 1024 || q.MaxFinished != 1000 {
		t.Errorf("default queries = %+v, want enabled, text off, 1024 bytes, 1000 ended", q)
	}
	cfg.Queries.TextMaxLength, cfg.Queries.MaxFinished = -1, -2
	err := cfg.Validate()
	for _, want := range []string{"queries::text_max_length -1", "queries::max_finished -2"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %q", err, want)
		}
	}
}
