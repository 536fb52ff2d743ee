// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/testbed/workload"
)

// netns is a network namespace joined to the host by a veth pair.
type netns struct {
	name, hostIf, hostIP, nsIP string
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newNetns creates the namespace and the veth pair (10.231.<n>.1 on the host,
// .2 inside) and removes them when the test ends.
func newNetns(t *testing.T) (*netns, error) {
	id := os.Getpid() % 250
	n := &netns{
		name:   fmt.Sprintf("gpotel-e2e-%d", os.Getpid()),
		hostIf: fmt.Sprintf("gpe%dh", os.Getpid()%100000),
		hostIP: fmt.Sprintf("10.231.%d.1", id),
		nsIP:   fmt.Sprintf("10.231.%d.2", id),
	}
	peer := strings.TrimSuffix(n.hostIf, "h") + "n"
	if err := ipCmd("netns", "add", n.name); err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		_ = ipCmd("link", "del", n.hostIf)
		_ = ipCmd("netns", "del", n.name)
	})
	for _, args := range [][]string{
		{"link", "add", n.hostIf, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", n.name},
		{"addr", "add", n.hostIP + "/30", "dev", n.hostIf},
		{"link", "set", n.hostIf, "up"},
		{"netns", "exec", n.name, "ip", "addr", "add", n.nsIP + "/30", "dev", peer},
		{"netns", "exec", n.name, "ip", "link", "set", peer, "up"},
		{"netns", "exec", n.name, "ip", "link", "set", "lo", "up"},
	} {
		if err := ipCmd(args...); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// goroutines reads the total from the collector's pprof goroutine profile.
func goroutines(endpoint string) (int, error) {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + endpoint + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		return 0, err
	}
	var n int
	if _, err := fmt.Sscanf(line, "goroutine profile: total %d", &n); err != nil {
		return 0, fmt.Errorf("%q: %w", line, err)
	}
	return n, nil
}

// TestAgentBehindSlowLossyLink puts one host's agent in a network namespace
// behind 2 s of delay and 10 % packet loss (tc netem on the veth): every
// call to it outlasts host_timeout, the collector keeps its ticks, marks the
// host down, and neither its goroutines nor its memory grow.
// GPOTEL_E2E_NETEM sets how long it runs (default 1m).
func TestAgentBehindSlowLossyLink(t *testing.T) {
	needBinaries(t)
	drill := envDuration(t, "GPOTEL_E2E_NETEM", time.Minute)
	ns, err := newNetns(t)
	if err != nil {
		t.Skipf("needs CAP_NET_ADMIN and iproute2 to make a network namespace: %v", err)
	}
	if out, err := exec.Command("tc", "qdisc", "add", "dev", ns.hostIf, "root", "netem", "delay", "2s", "loss", "10%").CombinedOutput(); err != nil {
		t.Skipf("tc netem is not available here (modprobe sch_netem; the kernel needs CONFIG_NET_SCH_NETEM): %v: %s", err, strings.TrimSpace(string(out)))
	}
	s := startStack(t)
	pprofPort, err := freePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	pprof := net.JoinHostPort("127.0.0.1", strconv.Itoa(pprofPort))

	const victim = "sdw2"
	if err := s.KillAgent(victim); err != nil {
		t.Fatal(err)
	}
	endpoint := net.JoinHostPort(ns.nsIP, "14330")
	// Beyond loopback without TLS: the agent refuses unless told insecure.
	agent, err := StartProcess("agent "+victim+" in "+ns.name, filepath.Join(s.opts.Dir, "agent-netns.log"), nil,
		"ip", "netns", "exec", ns.name, bins.Agent, "--listen", endpoint, "--insecure",
		"--hostname", victim, "--allowed-users", s.pgOSUser, "--log-level", "warn")
	if err != nil {
		t.Fatal(err)
	}
	s.Agents[victim], s.AgentEndpoints[victim] = agent, endpoint
	if err := s.Collector.Stop(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	s.opts.APIEndpoint = s.API
	s.opts.CollectorArgs = append(s.opts.CollectorArgs,
		"--set=extensions::pprof::endpoint="+pprof, "--set=service::extensions=[health_check, pprof]")
	ctx := await.Context(t)
	if err := s.startCollector(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("injected: %s's agent in netns %s at %s, behind tc netem delay 2s loss 10%% on %s", victim, ns.name, endpoint, ns.hostIf)

	w, err := workload.Start(context.Background(), s.Cluster, workload.Spec{Name: "netem-cpu", Kind: workload.CPU, Duration: drill + time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop() })
	// Settle: connections attempted, pools built.
	time.Sleep(10 * testbedInterval)
	g0, err := goroutines(pprof)
	if err != nil {
		t.Fatal(err)
	}
	rss0, err := rssBytes(s.Collector.PID())
	if err != nil {
		t.Fatal(err)
	}
	from := time.Now()
	time.Sleep(drill)
	to := time.Now()
	g1, err := goroutines(pprof)
	if err != nil {
		t.Fatal(err)
	}
	rss1, err := rssBytes(s.Collector.PID())
	if err != nil {
		t.Fatal(err)
	}
	snaps := sinkSnapshots(snapshotsOf(s.Sink))
	gap, ticks := largestGap(snaps, from, to)
	down := 0
	for _, sn := range snaps {
		if !sn.at.Before(from) && !sn.at.After(to) && sn.up[victim] == 0 {
			down++
		}
	}
	t.Logf("counts over %s: %d snapshots, largest gap %s, %d with %s down; collector goroutines %d -> %d, RSS %.1f -> %.1f MiB",
		to.Sub(from).Round(time.Second), ticks, gap.Round(time.Millisecond), down, victim, g0, g1, mib(float64(rss0)), mib(float64(rss1)))
	if gap >= 2*testbedInterval {
		t.Errorf("a tick was lost: %s between two snapshots (interval %s)", gap, testbedInterval)
	}
	if ticks < int(drill/testbedInterval)/2 {
		t.Errorf("%d snapshots in %s", ticks, drill)
	}
	if g1 > g0+20 {
		t.Errorf("collector goroutines grew from %d to %d behind a slow agent", g0, g1)
	}
	if rss1 > rss0+max(rss0/5, 32<<20) {
		t.Errorf("collector RSS grew from %.1f to %.1f MiB behind a slow agent", mib(float64(rss0)), mib(float64(rss1)))
	}
}
