// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memctx

import (
	"errors"
	"fmt"
	"math"
	"os/user"
	"time"
)

// Defaults of Config.
const (
	DefaultDatabase    = "postgres"
	DefaultTimeout     = 5 * time.Second
	DefaultMinInterval = 10 * time.Second
	DefaultMaxInFlight = 4
	DefaultMaxLogBytes = 256 << 20
	// Every request makes a backend write its memory contexts into the
	// server log (10-100 KiB): on this host at most DefaultMaxBurst at once
	// and then one every 10 s, whoever asks: 32 + 360 = 392 blocks an hour.
	DefaultMaxRate  = 0.1
	DefaultMaxBurst = 32
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
	// MaxRate (requests a second) and MaxBurst are the host's token bucket
	// over every request that would signal a backend, from every caller.
	MaxRate  float64 `mapstructure:"max_rate"`
	MaxBurst int     `mapstructure:"max_burst"`
}

// NewDefaultConfig returns the defaults (no instances: the feature is off).
func NewDefaultConfig() Config {
	return Config{Database: DefaultDatabase, Timeout: DefaultTimeout, MinInterval: DefaultMinInterval,
		MaxInFlight: DefaultMaxInFlight, MaxLogBytes: DefaultMaxLogBytes, MaxRate: DefaultMaxRate, MaxBurst: DefaultMaxBurst}
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
	if c.MaxRate < 0 || math.IsNaN(c.MaxRate) || math.IsInf(c.MaxRate, 0) {
		errs = append(errs, fmt.Errorf("memory_contexts.max_rate %g must be a finite number of requests a second, at least 0 (0: the default %g)",
			c.MaxRate, DefaultMaxRate))
	}
	if c.MaxBurst < 0 {
		errs = append(errs, fmt.Errorf("memory_contexts.max_burst %d is negative", c.MaxBurst))
	}
	return errors.Join(errs...)
}

// withDefaults fills what c leaves out, the database user included: every
// connection the agent makes to a local instance uses the result.
func (c Config) withDefaults() (Config, error) {
	d := NewDefaultConfig()
	if c.DatabaseUser == "" {
		u, err := user.Current()
		if err != nil {
			return c, fmt.Errorf("memory_contexts.database_user is empty and the agent's OS user is unknown: %w", err)
		}
		c.DatabaseUser = u.Username
	}
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
	if c.MaxRate == 0 {
		c.MaxRate = d.MaxRate
	}
	if c.MaxBurst == 0 {
		c.MaxBurst = d.MaxBurst
	}
	return c, nil
}
