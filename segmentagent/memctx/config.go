// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memctx

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of Config.
const (
	DefaultDatabase    = "postgres"
	DefaultTimeout     = 5 * time.Second
	DefaultMinInterval = 10 * time.Second
	DefaultMaxInFlight = 4
	DefaultMaxLogBytes = 256 << 20
	// MaxTimeout caps what a request may ask to wait.
	MaxTimeout = time.Minute
)

// Config configures GetMemoryContexts. With no data directories the
// service answers FailedPrecondition.
type Config struct {
	// DataDirectories are the instances on this host whose backends may be
	// asked about (each has a postmaster.pid).
	DataDirectories []string `mapstructure:"data_directories"`
	// DatabaseUser is the role of the local connection; empty = the agent's
	// OS user name (peer authentication over the Unix socket, no password).
	DatabaseUser string `mapstructure:"database_user"`
	// Database to connect to.
	Database string `mapstructure:"database"`
	// Timeout is how long a request waits for the backend when it names none.
	Timeout time.Duration `mapstructure:"timeout"`
	// MinInterval: at most one request per pid in this interval.
	MinInterval time.Duration `mapstructure:"min_interval"`
	// MaxInFlight bounds the requests served at once on this host.
	MaxInFlight int `mapstructure:"max_in_flight"`
	// MaxLogBytes bounds how much server log one request reads.
	MaxLogBytes int64 `mapstructure:"max_log_bytes"`
}

// NewDefaultConfig returns the defaults (no instances: the feature is off).
func NewDefaultConfig() Config {
	return Config{Database: DefaultDatabase, Timeout: DefaultTimeout, MinInterval: DefaultMinInterval,
		MaxInFlight: DefaultMaxInFlight, MaxLogBytes: DefaultMaxLogBytes}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	for i, d := range c.DataDirectories {
		if d == "" {
			errs = append(errs, fmt.Errorf("memory_contexts.data_directories[%d] is empty", i))
		}
	}
	if c.Timeout < 0 || c.Timeout > MaxTimeout {
		errs = append(errs, fmt.Errorf("memory_contexts.timeout %s must be between 0 and %s", c.Timeout, MaxTimeout))
	}
	if c.MinInterval < 0 {
		errs = append(errs, fmt.Errorf("memory_contexts.min_interval %s is negative", c.MinInterval))
	}
	if c.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("memory_contexts.max_in_flight %d is negative", c.MaxInFlight))
	}
	if c.MaxLogBytes < 0 {
		errs = append(errs, fmt.Errorf("memory_contexts.max_log_bytes %d is negative", c.MaxLogBytes))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	d := NewDefaultConfig()
	if c.Database == "" {
		c.Database = d.Database
	}
	if c.Timeout == 0 {
		c.Timeout = d.Timeout
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = d.MaxInFlight
	}
	if c.MaxLogBytes == 0 {
		c.MaxLogBytes = d.MaxLogBytes
	}
	return c
}
