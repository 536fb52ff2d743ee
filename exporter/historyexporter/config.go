// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/roleconn"
)

// Defaults.
const (
	defaultSchema    = "gpotel_history"
	defaultRetention = 30 * 24 * time.Hour
	defaultTimeout   = 30 * time.Second
	// 256 MiB holds about a day of 10 queries/s (docs/operations.md, history).
	defaultQueueMaxBytes = 256 << 20
	// One COPY per batch: large enough that a statement's round trips cost
	// little per row, small enough that a batch is written within timeout.
	defaultBatchMaxEvents = 10000
	defaultRetryInitial   = time.Second
	defaultRetryMax       = 30 * time.Second
	// A queue smaller than this cannot hold one snapshot's events of a busy cluster.
	minQueueMaxBytes = 1 << 20
)

// schemaName is what the schema setting accepts: a plain lower-case
// identifier, so that the documented SQL names it without quotes.
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Config is the history exporter's configuration.
type Config struct {
	// The connection, with a role of its own (never the receiver's
	// monitoring role): docs/operations.md lists its rights.
	roleconn.Settings `mapstructure:",squash"`

	// Dialect is auto (from the server's version()), gp6, gp7, cloudberry
	// or postgresql: it chooses the tables' partitioning and distribution.
	Dialect dialect.Dialect `mapstructure:"dialect"`
	// Schema holds the tables queries and sessions.
	Schema string `mapstructure:"schema"`
	// Retention keeps whole UTC days: a day is dropped once its last
	// instant is older than this. 0 keeps everything.
	Retention time.Duration `mapstructure:"retention"`
	// Timeout bounds connecting and each write (the server's
	// statement_timeout, and the client's own deadline).
	Timeout time.Duration `mapstructure:"timeout"`

	// Storage is the storage extension (file_storage) that keeps the queue
	// through a collector restart; without it the queue is in memory.
	Storage *component.ID `mapstructure:"storage"`
	Queue   QueueConfig   `mapstructure:"queue"`
	Batch   BatchConfig   `mapstructure:"batch"`
	Retry   RetryConfig   `mapstructure:"retry"`
}

// QueueConfig bounds the events waiting to be written.
type QueueConfig struct {
	// MaxBytes bounds the queue's encoded events; past it the oldest are
	// dropped (and counted).
	MaxBytes int64 `mapstructure:"max_bytes"`
}

// BatchConfig shapes the writes.
type BatchConfig struct {
	// MaxEvents bounds the events of one write (one transaction).
	MaxEvents int `mapstructure:"max_events"`
}

// RetryConfig paces the attempts after a failed write: the first wait,
// doubling up to the longest. A batch is retried until it is written (or
// dropped from the queue to make room).
type RetryConfig struct {
	InitialInterval time.Duration `mapstructure:"initial_interval"`
	MaxInterval     time.Duration `mapstructure:"max_interval"`
}

func createDefaultConfig() *Config {
	return &Config{
		Settings:  roleconn.Settings{Port: 5432, SSLMode: "prefer"},
		Dialect:   dialect.Auto,
		Schema:    defaultSchema,
		Retention: defaultRetention,
		Timeout:   defaultTimeout,
		Queue:     QueueConfig{MaxBytes: defaultQueueMaxBytes},
		Batch:     BatchConfig{MaxEvents: defaultBatchMaxEvents},
		Retry:     RetryConfig{InitialInterval: defaultRetryInitial, MaxInterval: defaultRetryMax},
	}
}

// Validate checks every setting and names each one that is wrong.
func (c *Config) Validate() error {
	errs := c.Problems("", "the database server")
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Dialect != dialect.Auto && !c.Dialect.Known() {
		add("dialect %q: want %s", c.Dialect, dialect.Names(true))
	}
	if !schemaName.MatchString(c.Schema) {
		add("schema %q: want a lower-case identifier (letters, digits, _; at most 63)", c.Schema)
	}
	if c.Retention != 0 && c.Retention < 24*time.Hour {
		add("retention %s: whole days are dropped; want 0 (keep everything) or at least 24h", c.Retention)
	}
	if c.Timeout <= 0 || c.Timeout > 10*time.Minute {
		add("timeout %s: must be in (0, 10m]", c.Timeout)
	}
	if c.Queue.MaxBytes < minQueueMaxBytes {
		add("queue::max_bytes %d: must be at least %d", c.Queue.MaxBytes, minQueueMaxBytes)
	}
	if c.Batch.MaxEvents <= 0 {
		add("batch::max_events %d: must be positive", c.Batch.MaxEvents)
	}
	if c.Retry.InitialInterval <= 0 || c.Retry.MaxInterval < c.Retry.InitialInterval {
		add("retry: initial_interval %s and max_interval %s: want 0 < initial_interval <= max_interval", c.Retry.InitialInterval, c.Retry.MaxInterval)
	}
	return errors.Join(errs...)
}
