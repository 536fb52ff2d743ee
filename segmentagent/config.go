package segmentagent

import (
	"errors"
	"fmt"
	"net"
	"os"

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
	// a certificate signed by that CA (mTLS). Absent: plaintext.
	TLS *configtls.ServerConfig `mapstructure:"tls"`
	// Insecure allows plaintext on a non-loopback listen address.
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
