// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/config/configgrpc"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/finishedwork"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/memorycontexts"
	"github.com/gpotel/gpotel/internal/agentconn"
	"github.com/gpotel/gpotel/internal/listenaddr"
	"github.com/gpotel/gpotel/internal/sessionaction"
)

// Defaults. Port 1432 is where yagpcc's coordinator service listens; on
// loopback until an endpoint is configured.
const (
	defaultEndpoint           = "127.0.0.1:1432"
	defaultLastMetricsWindow  = 5 * time.Minute
	defaultSessionGracePeriod = 30 * time.Second
	defaultMaxSessions        = 100000
	defaultPageSize           = 100
	defaultMaxPageSize        = 10000
	// A stock gRPC client refuses messages larger than 4 MiB.
	defaultMaxResponseBytes = 4 << 20
	// A Greenplum session has a backend per segment and slice; asking each
	// signals it and reads its server log.
	defaultMaxBackends = 4096
	// Below this no session with a cut query text fits reliably.
	minMaxResponseBytes = 1024
)

// ActionsConfig enables yagpcc's ActionService on the exporter's gRPC
// server: the action path's settings (internal/sessionaction).
type ActionsConfig = sessionaction.Config

// Config is the sessionstate exporter's configuration.
type Config struct {
	// The gRPC server: endpoint, tls, auth, keepalive, max_recv_msg_size_mib, ...
	configgrpc.ServerConfig `mapstructure:",squash"`

	// Insecure allows plaintext on a non-loopback endpoint.
	Insecure bool `mapstructure:"insecure"`
	// ClusterID is reported as SessionState.cluster_id.
	ClusterID string `mapstructure:"cluster_id"`
	// Hostname overrides the coordinator host name reported as
	// SessionState.hostname; empty means the snapshot's host.name, else os.Hostname.
	Hostname string `mapstructure:"hostname"`
	// LastMetricsWindow selects the snapshotdiff window that fills
	// last_metrics; it must be one of the processor's windows
	// (converter/windowcheckconverter checks it when the collector starts).
	LastMetricsWindow time.Duration `mapstructure:"last_metrics_window"`
	// SessionGracePeriod keeps a session that left the newest snapshot
	// visible this long (measured in snapshot time).
	SessionGracePeriod time.Duration `mapstructure:"session_grace_period"`
	// MaxSessions bounds the store.
	MaxSessions int `mapstructure:"max_sessions"`
	// DefaultPageSize applies when a request's page_size is 0.
	DefaultPageSize int `mapstructure:"default_page_size"`
	// MaxPageSize caps a request's page_size.
	MaxPageSize int `mapstructure:"max_page_size"`
	// MaxResponseBytes keeps every list response below this encoded size,
	// so that a client with the default 4 MiB receive limit can read it.
	MaxResponseBytes int `mapstructure:"max_response_bytes"`
	// MemoryContexts configures GetSessionMemoryContexts (gpotel.v1).
	MemoryContexts MemoryContextsConfig `mapstructure:"memory_contexts"`
	// Actions configures yagpcc's ActionService; off by default.
	Actions ActionsConfig `mapstructure:"actions"`
	// FinishedQueries keeps finished queries and ended sessions answerable.
	FinishedQueries FinishedQueriesConfig `mapstructure:"finished_queries"`
	// RuleActions keeps the latest firings of the workload rules for
	// ListRuleActions.
	RuleActions RuleActionsConfig `mapstructure:"rule_actions"`
}

// RuleActionsConfig bounds the firings ListRuleActions answers from.
type RuleActionsConfig struct {
	// MaxFirings is how many of the latest firings are kept; past it the
	// oldest goes, counted in the answer's dropped.
	MaxFirings int `mapstructure:"max_firings"`
}

const (
	defaultMaxFirings = 1000
	maxMaxFirings     = 1_000_000
)

// FinishedQueriesConfig says how long, and how much, finished work the
// exporter keeps answerable (internal/finishedwork).
type FinishedQueriesConfig = finishedwork.Config

// MemoryContextsConfig says how GetSessionMemoryContexts reaches the agents.
type MemoryContextsConfig = memorycontexts.Config

// Each caller may ask about 5 sessions at once and then one a minute: every
// backend asked writes a block into its server's log, which the agents
// bound again per host (segmentagent memory_contexts.max_rate).
const (
	defaultCallerMaxRate  = 1.0 / 60
	defaultCallerMaxBurst = 5
)

func defaultMemoryContextsConfig() MemoryContextsConfig {
	return MemoryContextsConfig{Config: agentconn.NewDefaultConfig(), Timeout: 5 * time.Second, MaxParallel: 16, TopBackends: 3, MaxBackends: defaultMaxBackends,
		CallerMaxRate: defaultCallerMaxRate, CallerMaxBurst: defaultCallerMaxBurst}
}

func createDefaultConfig() *Config {
	server := configgrpc.NewDefaultServerConfig()
	server.NetAddr.Endpoint = defaultEndpoint
	return &Config{
		ServerConfig:       server,
		LastMetricsWindow:  defaultLastMetricsWindow,
		SessionGracePeriod: defaultSessionGracePeriod,
		MaxSessions:        defaultMaxSessions,
		DefaultPageSize:    defaultPageSize,
		MaxPageSize:        defaultMaxPageSize,
		MaxResponseBytes:   defaultMaxResponseBytes,
		MemoryContexts:     defaultMemoryContextsConfig(),
		Actions:            sessionaction.DefaultConfig(),
		FinishedQueries:    finishedwork.DefaultConfig(),
		RuleActions:        RuleActionsConfig{MaxFirings: defaultMaxFirings},
	}
}

// Validate checks the exporter's own settings, each problem as "key value:
// what is wrong"; the collector validates the embedded gRPC server
// settings itself.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.NetAddr.Endpoint == "" {
		errs = append(errs, errors.New(`endpoint "": must not be empty`))
	} else if err := listenaddr.CheckPlaintext("endpoint", cfg.NetAddr.Endpoint, cfg.TLS.HasValue(), cfg.Insecure); err != nil {
		errs = append(errs, err)
	}
	if cfg.LastMetricsWindow <= 0 {
		errs = append(errs, fmt.Errorf("last_metrics_window %s: must be positive", cfg.LastMetricsWindow))
	}
	if cfg.SessionGracePeriod < 0 {
		errs = append(errs, fmt.Errorf("session_grace_period %s: must not be negative", cfg.SessionGracePeriod))
	}
	if cfg.MaxSessions <= 0 {
		errs = append(errs, fmt.Errorf("max_sessions %d: must be positive", cfg.MaxSessions))
	}
	if cfg.DefaultPageSize <= 0 {
		errs = append(errs, fmt.Errorf("default_page_size %d: must be positive", cfg.DefaultPageSize))
	}
	if cfg.MaxPageSize <= 0 {
		errs = append(errs, fmt.Errorf("max_page_size %d: must be positive", cfg.MaxPageSize))
	} else if cfg.DefaultPageSize > cfg.MaxPageSize {
		errs = append(errs, fmt.Errorf("default_page_size %d: must not exceed max_page_size %d", cfg.DefaultPageSize, cfg.MaxPageSize))
	}
	if cfg.MaxResponseBytes < minMaxResponseBytes {
		errs = append(errs, fmt.Errorf("max_response_bytes %d: must be at least %d", cfg.MaxResponseBytes, minMaxResponseBytes))
	}
	errs = append(errs, cfg.MemoryContexts.Validate()...)
	errs = append(errs, cfg.FinishedQueries.Validate()...)
	if n := cfg.RuleActions.MaxFirings; n <= 0 || n > maxMaxFirings {
		errs = append(errs, fmt.Errorf("rule_actions::max_firings %d: must be 1 to %d", n, maxMaxFirings))
	}
	errs = append(errs, cfg.Actions.Validate(cfg.TLS.HasValue() && cfg.TLS.Get().ClientCAFile != "")...)
	// insecure: true covers reading beyond loopback, never acting: the
	// action token would cross the network in the clear.
	if cfg.Actions.Enabled && listenaddr.PlaintextBeyondLoopback(cfg.NetAddr.Endpoint, cfg.TLS.HasValue()) {
		errs = append(errs, fmt.Errorf("actions::enabled: endpoint %q is not a loopback address and tls is not configured: "+
			"actions need tls beyond loopback (insecure: true does not cover them)",
			cfg.NetAddr.Endpoint))
	}
	return errors.Join(errs...)
}
