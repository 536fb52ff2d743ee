// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/testbed/faultproxy"
	"github.com/gpotel/gpotel/testbed/workload"
)

// The slow, lossy link of the drill: 2 s each way, 10 % of segments lost.
const (
	linkDelay = 2 * time.Second
	linkLoss  = 0.10
)

// netns is a network namespace joined to the host by a veth pair. Its names
// carry the test process's pid, so a later run removes what a killed one
// left (reapStaleNetns).
type netns struct {
	name, hostIf, hostIP, nsIP string
}

const netnsPrefix = "gpotel-e2e-"

// vethName is the host end (h) or namespace end (n) of pid's pair (at most 15 bytes).
func vethName(pid int, end string) string { return fmt.Sprintf("gpe%d%s", pid, end) }

var vethOfPid = regexp.MustCompile(`^gpe(\d+)[hn]$`)

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// capNetAdmin reports whether this process may make namespaces and links:
// CAP_NET_ADMIN (12) and CAP_SYS_ADMIN (21, for ip netns' mounts) effective.
func capNetAdmin() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return err == nil && caps&(1<<12) != 0 && caps&(1<<21) != 0
		}
	}
	return false
}

// reapStaleNetns removes the namespaces and host veths of earlier runs whose
// test process is gone (a binary killed by its timeout runs no cleanup).
func reapStaleNetns(t *testing.T) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		pid, err := strconv.Atoi(strings.TrimPrefix(name, netnsPrefix))
		if !strings.HasPrefix(name, netnsPrefix) || err != nil || processAlive(pid) {
			continue
		}
		if err := ipCmd("netns", "del", name); err != nil {
			t.Errorf("removing a stale namespace: %v", err)
		} else {
			t.Logf("removed namespace %s of a test process that is gone", name)
		}
	}
	links, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		m := vethOfPid.FindStringSubmatch(l.Name)
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if _, err := net.InterfaceByName(l.Name); err != nil || processAlive(pid) {
			continue // alive, or gone with its other end just now
		}
		if err := ipCmd("link", "del", l.Name); err != nil {
			t.Errorf("removing a stale veth: %v", err)
		} else {
			t.Logf("removed veth %s of a test process that is gone", l.Name)
		}
	}
}

// newNetns creates the namespace and the veth pair (10.231.<n>.1 on the host,
// .2 inside) and removes them when the test ends.
func newNetns(t *testing.T) (*netns, error) {
	pid := os.Getpid()
	id := pid % 250
	n := &netns{
		name:   fmt.Sprintf("%s%d", netnsPrefix, pid),
		hostIf: vethName(pid, "h"),
		hostIP: fmt.Sprintf("10.231.%d.1", id),
		nsIP:   fmt.Sprintf("10.231.%d.2", id),
	}
	peer := vethName(pid, "n")
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

// errNoNetem: the kernel has no sch_netem, a capability this machine lacks.
var errNoNetem = errors.New("tc netem is not available (modprobe sch_netem; the kernel needs CONFIG_NET_SCH_NETEM)")

func addNetem(dev string) error {
	out, err := exec.Command("tc", "qdisc", "add", "dev", dev, "root", "netem",
		"delay", linkDelay.String(), "loss", fmt.Sprintf("%g%%", linkLoss*100)).CombinedOutput()
	if err == nil {
		return nil
	}
	if strings.Contains(string(out), "qdisc kind is unknown") || strings.Contains(string(out), "Unknown qdisc") {
		return fmt.Errorf("%w: %s", errNoNetem, strings.TrimSpace(string(out)))
	}
	return fmt.Errorf("tc qdisc add netem on %s: %v: %s", dev, err, strings.TrimSpace(string(out)))
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

// TestAgentBehindSlowLossyLink puts one host's agent behind a link of 2 s
// delay and 10 % segment loss: every call to it outlasts host_timeout, the
// collector keeps its ticks, marks the host down, and neither its
// goroutines nor its memory grow. The link is a fault-injecting TCP proxy
// in this process (every machine), and tc netem on a veth into a network
// namespace where the kernel has sch_netem. GPOTEL_E2E_NETEM sets how long
// each drill runs (default 1m).
func TestAgentBehindSlowLossyLink(t *testing.T) {
	needBinaries(t)
	drill := envDuration(t, "GPOTEL_E2E_NETEM", time.Minute)
	const victim = "sdw2"

	t.Run("proxy", func(t *testing.T) {
		s := startStack(t)
		proxy, err := faultproxy.Start("127.0.0.1:0", s.AgentEndpoints[victim],
			faultproxy.Faults{Delay: linkDelay, Loss: linkLoss, ResetShare: 0.5, Seed: uint64(os.Getpid())})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = proxy.Close() })
		s.AgentEndpoints[victim] = proxy.Addr()
		slowLinkDrill(t, s, victim, drill, fmt.Sprintf("%s's agent behind a fault-injecting proxy at %s (delay %s, %.0f%% of segments lost, half of those resetting the connection)",
			victim, proxy.Addr(), linkDelay, linkLoss*100))
		st := proxy.Stats()
		t.Logf("proxy: %d connections, %d segments, %d retransmitted, %d resets", st.Connections, st.Segments, st.Retransmitted, st.Resets)
		if st.Segments == 0 || st.Retransmitted+st.Resets == 0 {
			t.Errorf("the drill injected no loss: %+v", st)
		}
	})

	t.Run("netem", func(t *testing.T) {
		if !capNetAdmin() {
			t.Skip("needs CAP_NET_ADMIN and CAP_SYS_ADMIN to make a network namespace")
		}
		for _, tool := range []string{"ip", "tc"} {
			if _, err := exec.LookPath(tool); err != nil {
				t.Skipf("%s (iproute2) is not installed: %v", tool, err)
			}
		}
		reapStaleNetns(t)
		ns, err := newNetns(t)
		if err != nil {
			t.Fatalf("network namespace and veth: %v", err)
		}
		if err := addNetem(ns.hostIf); errors.Is(err, errNoNetem) {
			t.Skip(err)
		} else if err != nil {
			t.Fatal(err)
		}
		s := startStack(t)
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
		slowLinkDrill(t, s, victim, drill, fmt.Sprintf("%s's agent in netns %s at %s, behind tc netem delay %s loss %.0f%% on %s",
			victim, ns.name, endpoint, linkDelay, linkLoss*100, ns.hostIf))
	})
}

// slowLinkDrill restarts the collector on the stack's agent endpoints (the
// victim's now behind the slow link), runs a CPU workload for drill, and
// checks the ticks, the victim's host.up and the collector's goroutines and RSS.
func slowLinkDrill(t *testing.T, s *Stack, victim string, drill time.Duration, injected string) {
	t.Helper()
	pprofPort, err := freePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	pprof := net.JoinHostPort("127.0.0.1", strconv.Itoa(pprofPort))
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
	t.Logf("injected: %s", injected)

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
	checkNoSnapshotLost(t, s)
	if ticks < int(drill/testbedInterval)/2 {
		t.Errorf("%d snapshots in %s", ticks, drill)
	}
	if down < ticks*9/10 {
		t.Errorf("%s was down in %d of %d snapshots behind a link slower than host_timeout", victim, down, ticks)
	}
	if g1 > g0+20 {
		t.Errorf("collector goroutines grew from %d to %d behind a slow agent", g0, g1)
	}
	if rss1 > rss0+max(rss0/5, 32<<20) {
		t.Errorf("collector RSS grew from %.1f to %.1f MiB behind a slow agent", mib(float64(rss0)), mib(float64(rss1)))
	}
}
