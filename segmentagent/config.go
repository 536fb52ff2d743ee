// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/confmap"
	"go.uber.org/zap/zapcore"
	"gopkg.in/yaml.v3"

	"github.com/gpotel/gpotel/internal/listenaddr"
	"github.com/gpotel/gpotel/segmentagent/memctx"
)

// Defaults of Config.
const (
	// Loopback until configured: the coordinator reaches an agent only once
	// the operator opens it, with TLS or with insecure set.
	DefaultListenAddress     = "127.0.0.1:1433"
	DefaultMaxRecvMsgSizeMiB = 4
	DefaultMaxSendMsgSizeMiB = 64
	// maxConcurrentStreams bounds the calls in flight on one connection.
	maxConcurrentStreams = 16
)

// Config is the agent process's configuration: the service's settings plus
// how it is served. YAML keys are the mapstructure tags.
type Config struct {
	ServiceConfig `mapstructure:",squash"`

	// ListenAddress is the gRPC host:port; port 0 picks a free one.
	ListenAddress string `mapstructure:"listen_address"`
	// TLS serves gRPC over TLS; with client_ca_file set, clients must present
	// a certificate signed by that CA (mTLS). Absent: plaintext. Beyond
	// loopback, client_ca_file is required (unless insecure is set).
	TLS *configtls.ServerConfig `mapstructure:"tls"`
	// AllowedClients are the identities that may call the agent when client
	// certificates are required: a certificate's subject common name or a
	// DNS, URI or IP subject alternative name. Empty: DefaultAllowedClients.
	AllowedClients []string `mapstructure:"allowed_clients"`
	// Insecure allows plaintext, or TLS without client certificates, on a
	// non-loopback listen address: then any host that reaches it may ask.
	Insecure bool `mapstructure:"insecure"`
	// MaxRecvMsgSizeMiB bounds a request (10000 pids take about 0.2 MiB).
	MaxRecvMsgSizeMiB int `mapstructure:"max_recv_msg_size_mib"`
	// MaxSendMsgSizeMiB bounds an answer (about 0.5 KiB a process).
	MaxSendMsgSizeMiB int `mapstructure:"max_send_msg_size_mib"`
	// Telemetry configures the agent's own metrics.
	Telemetry TelemetryConfig `mapstructure:"telemetry"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `mapstructure:"log_level"`
	// MemoryContexts configures GetMemoryContexts (off without data directories).
	MemoryContexts memctx.Config `mapstructure:"memory_contexts"`
}

// TelemetryConfig says where the agent's own metrics go.
type TelemetryConfig struct {
	// PrometheusAddress serves the metrics as Prometheus text on
	// http://<address>/metrics; empty turns the endpoint off.
	PrometheusAddress string `mapstructure:"prometheus_address"`
}

// NewDefaultConfig returns the configuration used when nothing is set.
func NewDefaultConfig() Config {
	return Config{
		ServiceConfig:     NewDefaultServiceConfig(),
		ListenAddress:     DefaultListenAddress,
		MaxRecvMsgSizeMiB: DefaultMaxRecvMsgSizeMiB,
		MaxSendMsgSizeMiB: DefaultMaxSendMsgSizeMiB,
		LogLevel:          "info",
		MemoryContexts:    memctx.NewDefaultConfig(),
	}
}

// Validate reports every problem of the configuration at once.
func (c Config) Validate() error {
	var errs []error
	if err := c.ServiceConfig.Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, _, err := net.SplitHostPort(c.ListenAddress); err != nil {
		errs = append(errs, fmt.Errorf("listen_address: %w", err))
	} else if err := listenaddr.CheckPlaintext("listen_address", c.ListenAddress, c.TLS != nil, c.Insecure); err != nil {
		errs = append(errs, err)
	}
	if c.TLS != nil && c.TLS.ClientCAFile == "" && !c.Insecure && !listenaddr.Loopback(c.ListenAddress) {
		errs = append(errs, fmt.Errorf("listen_address %q is not a loopback address and tls has no client_ca_file: any host that reaches it could ask; "+
			"set tls.client_ca_file (only allowed_clients may then ask), or set insecure: true", c.ListenAddress))
	}
	for i, name := range c.AllowedClients {
		if strings.TrimSpace(name) == "" {
			errs = append(errs, fmt.Errorf("allowed_clients[%d] is empty", i))
		}
	}
	if len(c.AllowedClients) > 0 && !c.VerifiesClients() {
		errs = append(errs, errors.New("allowed_clients needs tls.client_ca_file: without client certificates there is no identity to check"))
	}
	if c.TLS != nil {
		if err := c.TLS.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("tls: %w", err))
		}
		if err := c.TLS.Config.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("tls: %w", err))
		}
	}
	if c.MaxRecvMsgSizeMiB <= 0 {
		errs = append(errs, fmt.Errorf("max_recv_msg_size_mib %d must be positive", c.MaxRecvMsgSizeMiB))
	}
	if c.MaxSendMsgSizeMiB <= 0 {
		errs = append(errs, fmt.Errorf("max_send_msg_size_mib %d must be positive", c.MaxSendMsgSizeMiB))
	}
	if c.Telemetry.PrometheusAddress != "" {
		if _, _, err := net.SplitHostPort(c.Telemetry.PrometheusAddress); err != nil {
			errs = append(errs, fmt.Errorf("telemetry.prometheus_address: %w", err))
		}
	}
	if err := c.MemoryContexts.Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := zapcore.ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("log_level: %w", err))
	}
	return errors.Join(errs...)
}

// VerifiesClients is true when clients must present a certificate from the client CA.
func (c Config) VerifiesClients() bool {
	return c.TLS != nil && c.TLS.ClientCAFile != ""
}

// clientIdentities are the identities admitted when clients are verified.
func (c Config) clientIdentities() []string {
	if len(c.AllowedClients) > 0 {
		return c.AllowedClients
	}
	return DefaultAllowedClients
}

// LoadConfig reads a YAML file over the defaults. Unknown keys are errors.
func LoadConfig(path string) (Config, error) {
	cfg := NewDefaultConfig()
	raw, err := os.ReadFile(path)
	if err != nil {
		return cfg, err
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	if err := confmap.NewFromStringMap(m).Unmarshal(&cfg); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}
