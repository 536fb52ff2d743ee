// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/gpotel/gpotel/internal/agentconn"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/gpsql"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadata"
	"github.com/gpotel/gpotel/segmentagent"
)

const (
	defaultMaxPidsPerCall  = 1000
	agentMaxPidsPerCall    = 10000 // the agent refuses larger requests
	defaultMaxParallel     = 16
	defaultQueryMaxLength  = 4096
	defaultMaxResponseMiB  = 64
	defaultApplicationName = gpsql.ApplicationName
)

var validSSLModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

// Config is the gpsession receiver's configuration.
type Config struct {
	scraperhelper.ControllerConfig `mapstructure:",squash"`
	metadata.MetricsBuilderConfig  `mapstructure:",squash"`

	// DSN is a libpq/pgx connection string or URL for the coordinator.
	// Alternatively give Host, Port, User and Database.
	DSN      configopaque.String `mapstructure:"dsn"`
	Host     string              `mapstructure:"host"`
	Port     int                 `mapstructure:"port"`
	User     string              `mapstructure:"user"`
	Database string              `mapstructure:"database"`

	// At most one password source: inline, an environment variable's name, or a file.
	Password     configopaque.String `mapstructure:"password"`
	PasswordEnv  string              `mapstructure:"password_env"`
	PasswordFile string              `mapstructure:"password_file"`

	// TLS to the database, with pgx's (libpq's) meaning of each field.
	SSLMode     string `mapstructure:"sslmode"`
	SSLRootCert string `mapstructure:"sslrootcert"`
	SSLCert     string `mapstructure:"sslcert"`
	SSLKey      string `mapstructure:"sslkey"`

	// Dialect is auto (detected from version()), gp6, gp7, cloudberry or postgresql.
	Dialect dialect.Dialect `mapstructure:"dialect"`
	// QueryMaxLength cuts session query text to this many bytes; 0 drops it.
	QueryMaxLength int `mapstructure:"query_max_length"`
	// StatementTimeout bounds every catalog query on the server side.
	StatementTimeout time.Duration `mapstructure:"statement_timeout"`
	// TopologyTTL is how long the segment → host map is trusted.
	TopologyTTL time.Duration `mapstructure:"topology_ttl"`
	// CoordinatorHostName names the one host of a PostgreSQL server; empty
	// means os.Hostname(). Greenplum takes it from gp_segment_configuration.
	CoordinatorHostName string `mapstructure:"coordinator_host_name"`
	// ReconnectBackoff is the first wait after a failed discovery before the
	// database is tried again; it doubles up to ReconnectBackoffMax.
	ReconnectBackoff    time.Duration `mapstructure:"reconnect_backoff"`
	ReconnectBackoffMax time.Duration `mapstructure:"reconnect_backoff_max"`

	// agent_port, agents, agent: each host's agent endpoint and the gRPC
	// client template used for every host.
	agentconn.Config `mapstructure:",squash"`
	// AgentMaxResponseSizeMiB bounds one GetPidProcStat answer.
	AgentMaxResponseSizeMiB int `mapstructure:"agent_max_response_size_mib"`
	// LocalHosts are read in-process through the agent's reader instead of gRPC.
	LocalHosts []string `mapstructure:"local_hosts"`
	// Local configures that in-process reader, exactly as the agent's own config.
	Local segmentagent.ServiceConfig `mapstructure:"local"`

	MaxPidsPerCall   int           `mapstructure:"max_pids_per_call"`
	MaxParallelHosts int           `mapstructure:"max_parallel_hosts"`
	HostTimeout      time.Duration `mapstructure:"host_timeout"`
	// IncludeSystemProcesses keeps processes that are not client backends.
	IncludeSystemProcesses bool `mapstructure:"include_system_processes"`
	// ExitRecords asks every host's agent each scrape for the final totals of
	// the database processes that exited (taskstats; needs CAP_NET_ADMIN on
	// the agent), so short-lived backends are counted.
	ExitRecords bool `mapstructure:"exit_records"`
	// SendUnchangedProcesses sends every process every scrape instead of
	// only those whose figures changed (docs/pipeline.md, sparse batches): for a
	// pipeline whose snapshotdiff emits per-process metrics, so that they
	// stream out with their batches instead of leaving in the closing one.
	SendUnchangedProcesses bool `mapstructure:"send_unchanged_processes"`
	// GreenplumFigures reads what the server keeps itself about its
	// sessions: spill, lock waits, session memory.
	GreenplumFigures GreenplumFiguresConfig `mapstructure:"greenplum_figures"`

	_ struct{}
}

// GreenplumFiguresConfig paces the reads of the server's own views. They
// run on the coordinator and dispatch to every segment, so they have their
// own interval, slower than the scrape's, and their own timeout; a scrape
// never waits for them but takes the latest read not older than MaxAge.
type GreenplumFiguresConfig struct {
	Enabled          bool          `mapstructure:"enabled"`
	Interval         time.Duration `mapstructure:"interval"`
	StatementTimeout time.Duration `mapstructure:"statement_timeout"`
	MaxAge           time.Duration `mapstructure:"max_age"`
}

func createDefaultConfig() *Config {
	cc := scraperhelper.NewDefaultControllerConfig()
	cc.CollectionInterval = 15 * time.Second
	cc.Timeout = 10 * time.Second
	return &Config{
		ControllerConfig:        cc,
		MetricsBuilderConfig:    metadata.NewDefaultMetricsBuilderConfig(),
		Dialect:                 dialect.Auto,
		QueryMaxLength:          defaultQueryMaxLength,
		StatementTimeout:        5 * time.Second,
		TopologyTTL:             time.Minute,
		ReconnectBackoff:        time.Second,
		ReconnectBackoffMax:     time.Minute,
		Config:                  agentconn.NewDefaultConfig(),
		AgentMaxResponseSizeMiB: defaultMaxResponseMiB,
		Local:                   segmentagent.NewDefaultServiceConfig(),
		MaxPidsPerCall:          defaultMaxPidsPerCall,
		MaxParallelHosts:        defaultMaxParallel,
		HostTimeout:             5 * time.Second,
		IncludeSystemProcesses:  true,
		ExitRecords:             true,
		GreenplumFigures: GreenplumFiguresConfig{Enabled: true, Interval: 30 * time.Second, StatementTimeout: 10 * time.Second,
			MaxAge: 90 * time.Second},
	}
}

// Validate reports every problem of the configuration at once, each as
// "key value: what is wrong".
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if err := c.ControllerConfig.Validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.validateDatabase()...)

	if c.Dialect != dialect.Auto && !c.Dialect.Known() {
		add("dialect %q: want %s", c.Dialect, dialect.Names(true))
	}
	if c.QueryMaxLength < 0 {
		add("query_max_length %d: must be 0 (no query text) or positive", c.QueryMaxLength)
	}
	if c.StatementTimeout <= 0 {
		add("statement_timeout %s: must be positive", c.StatementTimeout)
	}
	if c.TopologyTTL <= 0 {
		add("topology_ttl %s: must be positive", c.TopologyTTL)
	}
	if c.ReconnectBackoff <= 0 || c.ReconnectBackoffMax < c.ReconnectBackoff {
		add("reconnect_backoff %s / reconnect_backoff_max %s: want 0 < reconnect_backoff <= reconnect_backoff_max", c.ReconnectBackoff, c.ReconnectBackoffMax)
	}

	if g := c.GreenplumFigures; g.Enabled {
		if g.Interval <= 0 {
			add("greenplum_figures::interval %s: must be positive", g.Interval)
		}
		if g.StatementTimeout <= 0 || g.StatementTimeout > g.Interval {
			add("greenplum_figures::statement_timeout %s: must be positive and at most the interval %s", g.StatementTimeout, g.Interval)
		}
		if g.MaxAge < g.Interval {
			add("greenplum_figures::max_age %s: must be at least the interval %s, or no read would ever be used", g.MaxAge, g.Interval)
		}
	}

	errs = append(errs, c.Problems("")...)
	if c.AgentMaxResponseSizeMiB < 1 {
		add("agent_max_response_size_mib %d: must be at least 1", c.AgentMaxResponseSizeMiB)
	}
	for i, h := range c.LocalHosts {
		if strings.TrimSpace(h) == "" {
			add("local_hosts[%d] %q: empty host name", i, h)
		}
	}
	if err := c.Local.Validate(); err != nil {
		add("local: %w", err)
	}

	if c.MaxPidsPerCall < 1 || c.MaxPidsPerCall > agentMaxPidsPerCall {
		add("max_pids_per_call %d: must be between 1 and the agent's limit %d", c.MaxPidsPerCall, agentMaxPidsPerCall)
	}
	if c.MaxParallelHosts < 1 {
		add("max_parallel_hosts %d: must be at least 1", c.MaxParallelHosts)
	}
	if c.HostTimeout <= 0 {
		add("host_timeout %s: must be positive", c.HostTimeout)
	}
	if deadline := c.scrapeDeadline(); c.HostTimeout > 0 && c.HostTimeout >= deadline {
		add("host_timeout %s: must be shorter than the scrape deadline %s (timeout, or collection_interval when timeout is 0) so a hung host cannot hold "+
			"back the snapshot", c.HostTimeout, deadline)
	}

	// The contract needs these: a session exists only through its info metric,
	// and the processor tells "host down" from "process exited" by host.up.
	if !c.Metrics.GpotelSessionInfo.Enabled {
		add("metrics::gpotel.session.info::enabled false: cannot be disabled; sessions exist in the pipeline only through it")
	}
	if !c.Metrics.GpotelHostUp.Enabled {
		add("metrics::gpotel.host.up::enabled false: cannot be disabled; the processor needs it to tell a down host from exited processes")
	}
	return errors.Join(errs...)
}

func (c *Config) scrapeDeadline() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return c.CollectionInterval
}

func (c *Config) validateDatabase() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case c.DSN == "" && c.Host == "":
		add(`dsn "", host "": no database; set dsn, or host (with port, user and database)`)
	case c.DSN != "" && (c.Host != "" || c.Port != 0 || c.User != "" || c.Database != ""):
		add("dsn, host/port/user/database: both set; use one or the other")
	case c.DSN != "":
		if _, err := pgxpool.ParseConfig(string(c.DSN)); err != nil {
			add("dsn: %w", err)
		}
	}
	if c.Port < 0 || c.Port > 65535 {
		add("port %d: must be between 1 and 65535 (0 means 5432)", c.Port)
	}
	sources := 0
	for _, set := range []bool{c.Password != "", c.PasswordEnv != "", c.PasswordFile != ""} {
		if set {
			sources++
		}
	}
	if sources > 1 {
		add("password, password_env and password_file: set at most one")
	}
	if c.SSLMode != "" && !slices.Contains(validSSLModes, c.SSLMode) {
		add("sslmode %q: want one of %s", c.SSLMode, strings.Join(validSSLModes, ", "))
	}
	return errs
}
