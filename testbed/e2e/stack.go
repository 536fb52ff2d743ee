// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package e2e runs gpotel whole on a testbed: the ocb-built collector with
// config/testbed.yaml, one gpotel-agent per emulated segment host on its
// loopback address, and an OTLP/gRPC sink for the collector's OTLP output.
// `gpotel-testbed demo`, `make run` and the end-to-end tests all start it here.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// StackOptions say how to run gpotel on a testbed.
type StackOptions struct {
	Binaries
	// Config is the collector configuration (config/testbed.yaml).
	Config string
	// Dir receives the logs and the OTLP output (otlp-metrics.jsonl).
	Dir string
	// APIEndpoint is where GetGPInfo listens; empty picks a free loopback port.
	APIEndpoint string
	// CollectorArgs are added to the collector's command line (--set overrides).
	CollectorArgs []string
	// OTLPKeep is how many OTLP requests the sink keeps in memory.
	OTLPKeep int
	// WriteOTLP appends every OTLP request to Dir/otlp-metrics.jsonl.
	WriteOTLP bool
	// OTLPFileMaxBytes > 0 bounds that file (OTLPSink.RotateAt): at most
	// twice this on disk.
	OTLPFileMaxBytes int64
}

// Stack is gpotel running on a testbed.
type Stack struct {
	Cluster   *cluster.Cluster
	Collector *Process
	// Agents are the gpotel-agent processes by emulated host name.
	Agents map[string]*Process
	// AgentEndpoints are the agents' host:port by emulated host name.
	AgentEndpoints map[string]string
	Sink           *OTLPSink
	API            string // GetGPInfo host:port
	Health         string // health_check host:port
	Telemetry      string // the collector's own Prometheus metrics host:port
	OTLPFile       string // empty unless WriteOTLP

	opts     StackOptions
	pgOSUser string
}

// Launch starts the OTLP sink, the agents and the collector, and waits until
// the collector's health check and its GetGPInfo API answer. On error nothing
// it started is left running.
func Launch(ctx context.Context, c *cluster.Cluster, o StackOptions) (*Stack, error) {
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	s := &Stack{Cluster: c, Agents: map[string]*Process{}, AgentEndpoints: map[string]string{}, opts: o}
	ok := false
	defer func() {
		if !ok {
			_ = s.Close()
		}
	}()
	var err error
	if s.pgOSUser, err = instanceOwner(c.Coordinator.DataDir); err != nil {
		return nil, err
	}
	if o.WriteOTLP {
		s.OTLPFile = filepath.Join(o.Dir, "otlp-metrics.jsonl")
	}
	if s.Sink, err = StartOTLPSink("127.0.0.1:0", s.OTLPFile, o.OTLPKeep); err != nil {
		return nil, err
	}
	s.Sink.RotateAt(o.OTLPFileMaxBytes)
	// Every host gets an agent; the coordinator's serves only the exporter's
	// memory-context requests (the receiver reads its /proc itself, local_hosts).
	for _, h := range c.Hosts {
		if err := s.StartAgent(h.Name); err != nil {
			return nil, err
		}
	}
	if err := s.startCollector(ctx); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// segmentHosts are the emulated hosts whose /proc an agent reads for the
// receiver: every host but the coordinator's, which the collector reads
// itself (local_hosts).
func segmentHosts(c *cluster.Cluster) []cluster.Host {
	var out []cluster.Host
	for _, h := range c.Hosts {
		if h.Name != cluster.CoordinatorHost {
			out = append(out, h)
		}
	}
	return out
}

// StartAgent starts (or restarts, on the same endpoint) the agent of one host.
func (s *Stack) StartAgent(host string) error {
	var h cluster.Host
	for _, x := range s.Cluster.Hosts {
		if x.Name == host {
			h = x
		}
	}
	if h.Name == "" {
		return fmt.Errorf("no emulated host %q", host)
	}
	dataDirs := s.Cluster.DataDirsOf(host)
	// Only its own host's postmasters: every emulated host shares one
	// kernel, and an agent that answered for another host's backends
	// would hide a receiver that asks the wrong host.
	p, endpoint, err := startAgent(host, s.AgentEndpoints[host], h.AgentAddress, filepath.Join(s.opts.Dir, "agent-"+host+".log"),
		s.opts.Agent, "--hostname", host, "--allowed-users", s.pgOSUser, "--log-level", "warn",
		"--postmaster-pid-files", strings.Join(pidFiles(dataDirs), ","),
		"--memory-contexts-data-dirs", strings.Join(dataDirs, ","), "--memory-contexts-database-user", cluster.AdminRole,
		"--memory-contexts-min-interval", "2s")
	if err != nil {
		return err
	}
	s.Agents[host], s.AgentEndpoints[host] = p, endpoint
	return nil
}

// startAgent runs an agent on endpoint, or on a free port of ip when endpoint
// is empty; a port taken between choosing and binding it is chosen again.
func startAgent(name, endpoint, ip, logPath, bin string, args ...string) (*Process, string, error) {
	fixed := endpoint != ""
	for attempt := 1; ; attempt++ {
		if !fixed {
			port, err := freePort(ip)
			if err != nil {
				return nil, "", err
			}
			endpoint = net.JoinHostPort(ip, strconv.Itoa(port))
		}
		p, err := StartProcess("agent "+name, logPath, nil, bin, append([]string{"--listen", endpoint}, args...)...)
		if err != nil {
			return nil, "", err
		}
		err = waitListening(p, endpoint, time.Minute)
		if err == nil {
			return p, endpoint, nil
		}
		_ = p.Kill()
		if fixed || attempt == 3 || !strings.Contains(err.Error(), "address already in use") && !strings.Contains(err.Error(), "another process listens there") {
			return nil, "", err
		}
	}
}

// KillAgent ends one host's agent with SIGKILL, as a crash would.
func (s *Stack) KillAgent(host string) error {
	p := s.Agents[host]
	if p == nil {
		return fmt.Errorf("no agent for %q", host)
	}
	return p.Kill()
}

func (s *Stack) startCollector(ctx context.Context) error {
	api := s.opts.APIEndpoint
	if api == "" {
		port, err := freePort("127.0.0.1")
		if err != nil {
			return err
		}
		api = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	healthPort, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	telemetryPort, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	s.API = api
	s.Health = net.JoinHostPort("127.0.0.1", strconv.Itoa(healthPort))
	s.Telemetry = net.JoinHostPort("127.0.0.1", strconv.Itoa(telemetryPort))
	env := []string{
		"GPOTEL_COORDINATOR_DSN=" + s.Cluster.CoordinatorDSN,
		"GPOTEL_COORDINATOR_PORT=" + strconv.Itoa(s.Cluster.Coordinator.Port),
		"GPOTEL_AGENTS=" + agentsYAML(s.AgentEndpoints),
		"GPOTEL_PG_OS_USER=" + s.pgOSUser,
		"GPOTEL_LOCAL_PID_FILES=[" + strings.Join(pidFiles(s.Cluster.DataDirsOf(cluster.CoordinatorHost)), ", ") + "]",
		"GPOTEL_API_ENDPOINT=" + s.API,
		"GPOTEL_OTLP_ENDPOINT=" + s.Sink.Addr(),
		"GPOTEL_HEALTH_ENDPOINT=" + s.Health,
		"GPOTEL_TELEMETRY_PORT=" + strconv.Itoa(telemetryPort),
	}
	args := append([]string{"--config", s.opts.Config}, s.opts.CollectorArgs...)
	p, err := StartProcess("collector", filepath.Join(s.opts.Dir, "collector.log"), env, s.opts.Collector, args...)
	if err != nil {
		return err
	}
	s.Collector = p
	return s.waitCollectorReady(ctx, 2*time.Minute)
}

// pidFiles are the postmaster.pid files of data directories.
func pidFiles(dataDirs []string) []string {
	out := make([]string, len(dataDirs))
	for i, d := range dataDirs {
		out[i] = filepath.Join(d, "postmaster.pid")
	}
	return out
}

// agentsYAML renders the receiver's agents map as a YAML flow mapping.
func agentsYAML(endpoints map[string]string) string {
	hosts := make([]string, 0, len(endpoints))
	for h := range endpoints {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	parts := make([]string, 0, len(hosts))
	for _, h := range hosts {
		parts = append(parts, fmt.Sprintf("%s: %q", h, endpoints[h]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// waitCollectorReady polls the health check and then GetGPSessions.
func (s *Stack) waitCollectorReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	conn, err := grpc.NewClient(s.API, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	api := yagpcc.NewGetGPInfoClient(conn)
	client := http.Client{Timeout: time.Second}
	for {
		if exited, err := s.Collector.Exited(); exited {
			return fmt.Errorf("collector exited (%v): %s", err, s.Collector.LogTail(3000))
		}
		resp, err := client.Get("http://" + s.Health + "/")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
				_, err = api.GetGPSessions(cctx, &yagpcc.GetGPSessionsReq{})
				ccancel()
				if err == nil {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("collector not ready within %s (last: %v): %s", limit, err, s.Collector.LogTail(3000))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close stops the collector, the agents and the sink.
func (s *Stack) Close() error {
	var errs []error
	if s.Collector != nil {
		errs = append(errs, s.Collector.Stop(15*time.Second))
	}
	for _, p := range s.Agents {
		errs = append(errs, p.Stop(15*time.Second))
	}
	if s.Sink != nil {
		errs = append(errs, s.Sink.Stop())
	}
	return errors.Join(errs...)
}

// instanceOwner names the OS user that runs the instances (the data dir's owner).
func instanceOwner(dataDir string) (string, error) {
	st, err := os.Stat(dataDir)
	if err != nil {
		return "", err
	}
	uid := st.Sys().(*syscall.Stat_t).Uid
	u, err := user.LookupId(strconv.Itoa(int(uid)))
	if err != nil {
		return strconv.Itoa(int(uid)), nil //nolint:nilerr // no passwd entry: the numeric uid names the owner just as well
	}
	return u.Username, nil
}

// freePort returns a port nothing listens on at ip now, for a process
// this binary starts to bind. It picks outside the kernel's ephemeral range
// (net.ipv4.ip_local_port_range): a port from inside it may be handed to
// any bind to port 0 or outgoing connection between this check and the
// child's bind, and was (under make test-stress, a demo's own testbed
// instance took the API port its test had picked). Within one binary no
// port is given twice; two binaries collide only when their random picks
// among the thousands below the range meet and the first has not bound
// yet.
func freePort(ip string) (int, error) {
	lo, hi := portsOutsideEphemeral()
	for range 200 {
		port := lo + rand.IntN(hi-lo) // #nosec G404 -- spreading picks, not a secret
		portsGiven.Lock()
		given := portsGiven.m[port]
		portsGiven.m[port] = true
		portsGiven.Unlock()
		if given {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			continue // taken: try another
		}
		_ = l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no port on %s in [%d, %d) that is free and this test binary has not given out already", ip, lo, hi)
}

// portsOutsideEphemeral is the range freePort picks from: the 10 000
// ports below the ephemeral range, or the ports above it when fewer than
// a thousand lie below (and at least a thousand above).
func portsOutsideEphemeral() (lo, hi int) {
	first, last := 32768, 60999 // the kernel's default range
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			a, errA := strconv.Atoi(f[0])
			z, errZ := strconv.Atoi(f[1])
			if errA == nil && errZ == nil && 0 < a && a <= z && z < 65536 {
				first, last = a, z
			}
		}
	}
	if first-1024 < 1000 && 65535-last >= 1000 {
		return last + 1, 65536
	}
	if lo := max(1024, first-10_000); lo < first {
		return lo, first
	}
	return 1024, 65536 // the range covers every port: any may collide
}

// portsGiven are the ports freePort has returned.
var portsGiven = struct {
	sync.Mutex
	m map[int]bool
}{m: map[int]bool{}}

// waitListening waits until p itself listens on endpoint (a listener of
// another process on that port does not count), p exits, or limit passes.
func waitListening(p *Process, endpoint string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("%s exited (%v): %s", p.Name, err, p.LogTail(2000))
		}
		owns, err := listensOn(p.PID(), endpoint)
		if owns {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not listening on %s within %s (%v): %s", p.Name, endpoint, limit, err, p.LogTail(2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// listensOn says whether process pid holds a TCP socket listening on the
// IPv4 endpoint: /proc/net/tcp names the listener's inode, and one of the
// process's descriptors must be that socket.
func listensOn(pid int, endpoint string) (bool, error) {
	host, portText, err := net.SplitHostPort(endpoint)
	if err != nil {
		return false, err
	}
	ip := net.ParseIP(host).To4()
	port, err := strconv.Atoi(portText)
	if ip == nil || err != nil {
		return false, fmt.Errorf("not an IPv4 endpoint: %s", endpoint)
	}
	// The kernel prints the address as a host-order (little-endian) word.
	local := fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], port)
	table, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return false, err
	}
	inode := ""
	for _, line := range strings.Split(string(table), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == local && f[3] == "0A" { // 0A: TCP_LISTEN
			inode = f[9]
		}
	}
	if inode == "" {
		return false, errors.New("nothing listens there yet")
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false, err
	}
	for _, fd := range fds {
		if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); target == "socket:["+inode+"]" {
			return true, nil
		}
	}
	return false, errors.New("another process listens there")
}
