// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package finishedwork

import (
	"fmt"
	"time"
)

// Config says how long, and how much, finished work the
// exporter keeps answerable: the processor's finished_query and
// ended_session events, for GetGPQuery and gpotel.v1.FinishedWork.
type Config struct {
	// Retention keeps each event this long after its end, in snapshot
	// time; 0 keeps none.
	Retention time.Duration `mapstructure:"retention"`
	// MaxEvents bounds the finished queries and ended sessions kept together.
	MaxEvents int `mapstructure:"max_events"`
	// MaxBytes bounds the memory they hold, as the store counts it.
	MaxBytes int `mapstructure:"max_bytes"`
}

const (
	defaultFinishedRetention = time.Hour
	// 1 h at 10 queries/s is 36 000 queries, and their sessions.
	defaultFinishedMaxEvents = 100000
	// 1 h at 10 queries/s of 64 segments each, with room to spare
	// (docs/performance.md, finished work in the exporter).
	defaultFinishedMaxBytes = 256 << 20
	// The retention is bounded by the count and the bytes; a week is
	// already more than either lets a busy cluster keep.
	maxFinishedRetention = 7 * 24 * time.Hour
	// One event of a cluster of a thousand segments fits.
	minFinishedMaxBytes = 1 << 20
)

// DefaultConfig keeps an hour of finished work, within the default bounds.
func DefaultConfig() Config {
	return Config{Retention: defaultFinishedRetention, MaxEvents: defaultFinishedMaxEvents, MaxBytes: defaultFinishedMaxBytes}
}

// Validate reports every problem of c, each as "key value: what is wrong".
func (c Config) Validate() []error {
	var errs []error
	if c.Retention < 0 || c.Retention > maxFinishedRetention {
		errs = append(errs, fmt.Errorf("finished_queries::retention %s: must be in [0, %s]", c.Retention, maxFinishedRetention))
	}
	if c.MaxEvents <= 0 {
		errs = append(errs, fmt.Errorf("finished_queries::max_events %d: must be positive", c.MaxEvents))
	}
	if c.MaxBytes < minFinishedMaxBytes {
		errs = append(errs, fmt.Errorf("finished_queries::max_bytes %d: must be at least %d", c.MaxBytes, minFinishedMaxBytes))
	}
	return errs
}
