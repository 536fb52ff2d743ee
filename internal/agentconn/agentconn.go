// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package agentconn is how a collector component reaches the agent of every
// host: its endpoint (a per-host override, else host:agent_port), the gRPC
// client template with its TLS rule, and one lazy connection per host. The
// gpsession receiver and the sessionstate exporter both use it.
package agentconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configtls"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"

	"github.com/gpotel/gpotel/internal/cpuslots"
)

// DefaultPort is where the agents listen unless configured otherwise.
const DefaultPort = 1433

// Config is squashed into a component's configuration, so its keys are
// agent_port, agents and agent wherever it is used.
type Config struct {
	// AgentPort is the agents' port when Agents does not name an endpoint.
	AgentPort int `mapstructure:"agent_port"`
	// Agents overrides the endpoint per host name: sdw1: 10.0.0.11:1433.
	Agents map[string]string `mapstructure:"agents"`
	// Agent is the gRPC client template used for every host; leave its endpoint empty.
	Agent configgrpc.ClientConfig `mapstructure:"agent"`
}

// NewDefaultConfig is port 1433 and plaintext until TLS is configured (the
// agents serve plaintext unless configured for TLS).
func NewDefaultConfig() Config {
	agent := configgrpc.NewDefaultClientConfig()
	agent.TLS = configtls.ClientConfig{Insecure: true}
	return Config{AgentPort: DefaultPort, Agent: agent}
}

// Problems lists what is wrong, each message led by prefix and the key.
func (c Config) Problems(prefix string) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(prefix+format, args...)) }
	if c.AgentPort < 1 || c.AgentPort > 65535 {
		add("agent_port %d: must be between 1 and 65535", c.AgentPort)
	}
	for host, endpoint := range c.Agents {
		if host == "" {
			add(`agents[""]: empty host name`)
		}
		if err := checkEndpoint(endpoint); err != nil {
			add("agents[%s] %q: %w", host, endpoint, err)
		}
	}
	if c.Agent.Endpoint != "" {
		add("agent::endpoint %q: leave empty; each host's endpoint comes from agent_port or agents", c.Agent.Endpoint)
	}
	if err := c.Agent.Validate(); err != nil {
		add("agent::%w", err)
	}
	return errs
}

func checkEndpoint(endpoint string) error {
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		return err
	}
	if host == "" {
		return errors.New("empty host")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("bad port %q", port)
	}
	return nil
}

// Endpoint is where the agent of host listens.
func (c Config) Endpoint(host string) string {
	if ep, ok := c.Agents[host]; ok {
		return ep
	}
	return net.JoinHostPort(host, strconv.Itoa(c.AgentPort))
}

// clientTLS turns TLS on when anything but plaintext is configured: the
// plaintext default must not silently win over a client certificate or the
// system CA pool (a CA file already turns TLS on in configtls).
func clientTLS(t configtls.ClientConfig) configtls.ClientConfig {
	if t.Insecure && (t.CertFile != "" || t.CertPem != "" || t.KeyFile != "" || t.KeyPem != "" || t.IncludeSystemCACertsPool) {
		t.Insecure = false
	}
	return t
}

// Pool keeps one connection per host, made on first use from the template.
// A connection is lazy: a dead agent fails its calls, not Conn.
type Pool struct {
	cfg            Config
	extensions     map[component.ID]component.Component
	telemetry      component.TelemetrySettings
	maxAnswerBytes int
	codec          encoding.Codec

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// PoolOption changes how a Pool's connections work.
type PoolOption func(*Pool)

// DecodeInSlots makes the pool's connections decode each large answer
// inside one of slots, so that a tick's answers, decoded by many calls at
// once, cannot take every core. An API call that asks an agent uses a
// pool without it: it must not wait behind a tick.
func DecodeInSlots(slots cpuslots.Slots) PoolOption {
	return func(p *Pool) { p.codec = slotCodec{slots: slots} }
}

// DecodeSlots are the slots the pool decodes large answers in; nil: none.
func (p *Pool) DecodeSlots() cpuslots.Slots {
	if c, ok := p.codec.(slotCodec); ok {
		return c.slots
	}
	return nil
}

// NewPool connects with cfg; an answer above maxAnswerBytes fails its call.
func NewPool(cfg Config, extensions map[component.ID]component.Component, telemetry component.TelemetrySettings, maxAnswerBytes int, opts ...PoolOption) *Pool {
	p := &Pool{cfg: cfg, extensions: extensions, telemetry: telemetry, maxAnswerBytes: maxAnswerBytes, codec: Codec, conns: map[string]*grpc.ClientConn{}}
	for _, opt := range opts {
		opt(p)
	}
	return p
}

// Conn is the connection to host's agent.
func (p *Pool) Conn(ctx context.Context, host string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if conn, ok := p.conns[host]; ok {
		return conn, nil
	}
	cc := p.cfg.Agent
	cc.Endpoint = p.cfg.Endpoint(host)
	cc.TLS = clientTLS(cc.TLS)
	conn, err := cc.ToClientConn(ctx, p.extensions, p.telemetry,
		configgrpc.WithGrpcDialOption(grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(p.maxAnswerBytes), grpc.ForceCodec(p.codec))))
	if err != nil {
		return nil, fmt.Errorf("agent of %s at %s: %w", host, cc.Endpoint, err)
	}
	p.conns[host] = conn
	return conn, nil
}

// Len is how many hosts have a connection.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Forget closes the connections of the hosts not in keep and names them.
func (p *Pool) Forget(keep map[string]bool) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var gone []string
	for h, c := range p.conns {
		if !keep[h] {
			_ = c.Close()
			delete(p.conns, h)
			gone = append(gone, h)
		}
	}
	return gone
}

// Close closes every connection.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for h, c := range p.conns {
		errs = append(errs, c.Close())
		delete(p.conns, h)
	}
	return errors.Join(errs...)
}
