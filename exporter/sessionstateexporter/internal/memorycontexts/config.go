// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memorycontexts

import (
	"fmt"
	"math"
	"time"

	"github.com/gpotel/gpotel/internal/agentconn"
)

// Config says how GetSessionMemoryContexts reaches the agents.
type Config struct {
	// agent_port, agents, agent: the agents' addresses and the client
	// template (TLS, keepalive), as in the gpsession receiver.
	agentconn.Config `mapstructure:",squash"`
	// Timeout is how long each agent waits for its backend.
	Timeout time.Duration `mapstructure:"timeout"`
	// MaxParallel bounds the agent calls of one request.
	MaxParallel int `mapstructure:"max_parallel"`
	// TopBackends is how many backends each roll-up row names.
	TopBackends int `mapstructure:"top_backends"`
	// MaxBackends bounds the backends one request asks.
	MaxBackends int `mapstructure:"max_backends"`
	// CallerMaxRate (requests a second) and CallerMaxBurst are each caller's
	// token bucket (by client certificate, else by address).
	CallerMaxRate  float64 `mapstructure:"caller_max_rate"`
	CallerMaxBurst int     `mapstructure:"caller_max_burst"`
}

// Validate lists what is wrong with the section.
func (c Config) Validate() []error {
	errs := c.Problems("memory_contexts::")
	if c.Timeout <= 0 || c.Timeout > time.Minute {
		errs = append(errs, fmt.Errorf("memory_contexts::timeout %s: must be in (0, 1m]", c.Timeout))
	}
	if c.MaxParallel <= 0 {
		errs = append(errs, fmt.Errorf("memory_contexts::max_parallel %d: must be positive", c.MaxParallel))
	}
	if c.TopBackends < 0 {
		errs = append(errs, fmt.Errorf("memory_contexts::top_backends %d: must not be negative", c.TopBackends))
	}
	if c.MaxBackends <= 0 {
		errs = append(errs, fmt.Errorf("memory_contexts::max_backends %d: must be positive", c.MaxBackends))
	}
	if !(c.CallerMaxRate > 0) || math.IsInf(c.CallerMaxRate, 0) {
		errs = append(errs, fmt.Errorf("memory_contexts::caller_max_rate %g: must be a positive number of requests a second", c.CallerMaxRate))
	}
	if c.CallerMaxBurst <= 0 {
		errs = append(errs, fmt.Errorf("memory_contexts::caller_max_burst %d: must be positive", c.CallerMaxBurst))
	}
	return errs
}
