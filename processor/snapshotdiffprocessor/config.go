// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
)

// Config configures the snapshotdiff processor.
type Config struct {
	// Windows are the look-back spans the session figures are computed over.
	Windows []time.Duration `mapstructure:"windows"`
	// MaxStoredPoints caps the ring buffer of snapshots. 0 means automatic:
	// enough snapshots to reach back the longest window, at least 30.
	MaxStoredPoints int `mapstructure:"max_stored_points"`
	// EmitProcessMetrics forwards the receiver's per-process resources too.
	EmitProcessMetrics bool `mapstructure:"emit_process_metrics"`
	// UnchangedProcesses is what the per-process output does with a process
	// the agents left out because nothing of it changed: carry it (its last
	// figures again, every snapshot: dense series) or leave it out.
	UnchangedProcesses string `mapstructure:"unchanged_processes"`
	// EmitSessionHostFigures adds each session's CPU, disk, memory and
	// process figures per host (sessions × hosts points; GetClusterTop's
	// per-host breakdown needs them).
	EmitSessionHostFigures bool `mapstructure:"emit_session_host_figures"`
	// TimeConstants are the time constants of the smoothed (exponentially
	// weighted) rates; empty turns smoothing off.
	TimeConstants []time.Duration `mapstructure:"time_constants"`
	// Queries configures the per-query figures (docs/pipeline.md, query figures).
	Queries QueriesConfig `mapstructure:"queries"`
}

// QueriesConfig configures the per-query figures.
type QueriesConfig struct {
	// Enabled writes a query resource per running and recently ended query.
	Enabled bool `mapstructure:"enabled"`
	// Text adds db.query.text; off by default, as query text can be sensitive.
	Text bool `mapstructure:"text"`
	// TextMaxLength cuts db.query.text to this many bytes (on a UTF-8 boundary).
	TextMaxLength int `mapstructure:"text_max_length"`
	// MaxFinished caps the ended queries kept (the most recently ended win).
	MaxFinished int `mapstructure:"max_finished"`
}

var _ component.Config = (*Config)(nil)

// What the per-process output does with the processes that did not change.
const (
	UnchangedCarry    = "carry"
	UnchangedLeaveOut = "leave_out"
)

// minStoredPoints is the floor of the automatic buffer size.
const minStoredPoints = 30

func createDefaultConfig() component.Config {
	return &Config{
		Windows: []time.Duration{5 * time.Minute},
		// The load average's constants: a DBA reads them like uptime's.
		TimeConstants:      []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute},
		Queries:            QueriesConfig{Enabled: true, TextMaxLength: 1024, MaxFinished: 1000},
		UnchangedProcesses: UnchangedCarry,
	}
}

// Validate reports every problem of the configuration at once, each as
// "key value: what is wrong".
func (cfg *Config) Validate() error {
	var errs []error
	if len(cfg.Windows) == 0 {
		errs = append(errs, errors.New("windows []: at least one window is required"))
	}
	errs = append(errs, distinctPositive("windows", cfg.Windows)...)
	errs = append(errs, distinctPositive("time_constants", cfg.TimeConstants)...)
	if cfg.MaxStoredPoints < 0 {
		errs = append(errs, fmt.Errorf("max_stored_points %d: must not be negative (0 means automatic)", cfg.MaxStoredPoints))
	} else if cfg.MaxStoredPoints == 1 {
		errs = append(errs, errors.New("max_stored_points 1: leaves nothing to diff against; use 0 (automatic) or at least 2"))
	}
	switch cfg.UnchangedProcesses {
	case "", UnchangedCarry, UnchangedLeaveOut: // "": carry, as the default
	default:
		errs = append(errs, fmt.Errorf("unchanged_processes %q: must be %q (dense per-process series) or %q",
			cfg.UnchangedProcesses, UnchangedCarry, UnchangedLeaveOut))
	}
	if cfg.Queries.TextMaxLength < 0 {
		errs = append(errs, fmt.Errorf("queries::text_max_length %d: must not be negative", cfg.Queries.TextMaxLength))
	}
	if cfg.Queries.MaxFinished < 0 {
		errs = append(errs, fmt.Errorf("queries::max_finished %d: must not be negative", cfg.Queries.MaxFinished))
	}
	return errors.Join(errs...)
}

// distinctPositive checks a list of durations: each positive, none twice.
func distinctPositive(key string, ds []time.Duration) []error {
	var errs []error
	seen := make(map[time.Duration]bool, len(ds))
	for i, d := range ds {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s[%d] %s: must be positive", key, i, d))
			continue
		}
		if seen[d] {
			errs = append(errs, fmt.Errorf("%s[%d] %s: listed twice", key, i, d))
		}
		seen[d] = true
	}
	return errs
}
