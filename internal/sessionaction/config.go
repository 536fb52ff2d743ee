// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionaction

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpotel/gpotel/internal/roleconn"
)

// Config is the action path's settings (the sessionstate exporter's
// actions section): cancel a query, end a session, move it to a resource
// group. It has its own database role and its own authorization: a client
// that may read the API may not act unless one of these admits it.
type Config struct {
	// Enabled serves ActionService; off by default.
	Enabled bool `mapstructure:"enabled"`

	// The action connection to the coordinator: never the receiver's
	// monitoring role. The role needs pg_signal_backend and pg_read_all_stats
	// (or superuser) and, on Greenplum, the right to run pg_resgroup_move_query.
	roleconn.Settings `mapstructure:",squash"`
	// StatementTimeout bounds connecting and every action statement.
	StatementTimeout time.Duration `mapstructure:"statement_timeout"`

	// TokenFile holds the action token a client sends in the
	// gpotel-action-token header.
	TokenFile string `mapstructure:"token_file"`
	// AllowedClients are client certificate names (subject CN or a DNS, URI
	// or IP SAN) that may act; needs the server's tls.client_ca_file.
	AllowedClients []string `mapstructure:"allowed_clients"`

	// MaxSessionsPerCall bounds the sessions one TerminateSessions ends.
	MaxSessionsPerCall int `mapstructure:"max_sessions_per_call"`
	// MaxViewAge refuses every action while the newest snapshot is older;
	// 0: twice the interval between the last two snapshots the exporter
	// received (the receiver's collection_interval).
	MaxViewAge time.Duration `mapstructure:"max_view_age"`
}

// DefaultConfig is the section's defaults: off.
func DefaultConfig() Config {
	return Config{Settings: roleconn.Settings{Port: 5432, SSLMode: "prefer"}, StatementTimeout: 5 * time.Second, MaxSessionsPerCall: 100}
}

// Validate checks the section when enabled; clientCA says whether the
// server verifies client certificates.
func (c Config) Validate(clientCA bool) []error {
	if !c.Enabled {
		return nil
	}
	errs := c.ConnectionProblems("actions::")
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf("actions::"+format, args...)) }
	if c.TokenFile == "" && len(c.AllowedClients) == 0 {
		errs = append(errs, errors.New(`actions::token_file "": set token_file or allowed_clients: without either no client may act`))
	}
	for i, name := range c.AllowedClients {
		if strings.TrimSpace(name) == "" {
			add("allowed_clients[%d] %q: must not be empty", i, name)
		}
	}
	if len(c.AllowedClients) > 0 && !clientCA {
		add("allowed_clients %v: needs tls::client_ca_file: without client certificates there is no name to check", c.AllowedClients)
	}
	if c.MaxSessionsPerCall <= 0 {
		add("max_sessions_per_call %d: must be positive", c.MaxSessionsPerCall)
	}
	if c.MaxViewAge < 0 {
		add("max_view_age %s: must not be negative (0: twice the collection interval)", c.MaxViewAge)
	}
	return errs
}

// ConnectionProblems checks what the action connection needs, for every
// caller of the action path; section leads each message.
func (c Config) ConnectionProblems(section string) []error {
	errs := c.Problems(section, "the coordinator")
	if c.StatementTimeout <= 0 || c.StatementTimeout > time.Minute {
		errs = append(errs, fmt.Errorf("%sstatement_timeout %s: must be in (0, 1m]", section, c.StatementTimeout))
	}
	return errs
}
