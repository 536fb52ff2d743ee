// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// fixedTop is an in-process ClusterTop server answering with a fixed response.
type fixedTop struct {
	gpotelv1.UnimplementedClusterTopServer
	resp *gpotelv1.GetClusterTopResponse

	mu   sync.Mutex
	reqs []*gpotelv1.GetClusterTopRequest
}

func (f *fixedTop) GetClusterTop(_ context.Context, req *gpotelv1.GetClusterTopRequest) (*gpotelv1.GetClusterTopResponse, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	return f.resp, nil
}

// serveBoth serves sessions and the cluster top on one server, as the exporter does.
func serveBoth(t *testing.T, sessions *fixedSessions, top *fixedTop) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	yagpcc.RegisterGetGPInfoServer(srv, sessions)
	gpotelv1.RegisterClusterTopServer(srv, top)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// sixHosts: the coordinator and five segment hosts, sdw3 the busiest at 1.8
// cores and sdw5 silent; three queries, the first skewed onto segment 3.
func sixHosts() *fixedTop {
	resp := &gpotelv1.GetClusterTopResponse{
		SnapshotTimeUnixNano: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano(),
		WindowSeconds:        10, TimeConstantSeconds: 60,
		Cluster: &gpotelv1.ClusterTotals{Hosts: 6, HostsUp: 5, Sessions: 3, Queries: 3,
			Usage: &gpotelv1.Usage{CpuCores: 3.2, ReadBytesPerSecond: 2 << 20, WriteBytesPerSecond: 1 << 20, RssBytes: 6 << 30, Processes: 40}},
	}
	for i, cores := range []float64{0.1, 0.4, 0.5, 1.8, 0.4, 0} {
		name := fmt.Sprintf("sdw%d", i)
		if i == 0 {
			name = "mdw"
		}
		resp.Hosts = append(resp.Hosts, &gpotelv1.HostTop{Hostname: name, Up: i != 5,
			Usage:    &gpotelv1.Usage{CpuCores: cores, ReadBytesPerSecond: 300 << 10, RssBytes: 1 << 30, Processes: 7},
			Pressure: &gpotelv1.HostStall{Cpu: 0.12, Io: 0.03}})
	}
	for i := range 3 {
		q := &gpotelv1.QueryTop{TmId: 1700000000, SessId: int64(11 + i), CommandCount: proto.Int64(int64(4 + i)), DurationSeconds: 12.5,
			Usage: &gpotelv1.Usage{CpuCores: 1.5 - 0.5*float64(i)}, Query: "select * from big_table_" + fmt.Sprint(i) + " order by x"}
		if i == 0 {
			q.CpuSkew, q.CpuHottestSegment = 0.72, proto.Int32(3)
			q.SpillBytesMax = 3 << 30
		}
		resp.Queries = append(resp.Queries, q)
	}
	return &fixedTop{resp: resp}
}

// screen is a model that has fetched once from addr, sized width x height.
func screen(t *testing.T, addr string, width, height int) tea.Model {
	t.Helper()
	c, err := dial(context.Background(), clientOptions{Addr: addr, CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	var m tea.Model = topModel{ctx: context.Background(), client: c, interval: time.Second, width: width, height: height}
	m, _ = m.Update(m.(topModel).fetch()())
	return m
}

func press(m tea.Model, key string) tea.Model {
	msg := tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(key)}
	if key == "tab" {
		msg = tea.KeyMsg{Type: tea.KeyTab}
	}
	m, _ = m.Update(msg)
	return m
}

// fitsTerminal checks that the screen neither scrolls nor wraps.
func fitsTerminal(t *testing.T, what, view string, width, height int) {
	t.Helper()
	lines := strings.Split(view, "\n")
	if len(lines) > height {
		t.Errorf("%s: %d lines on a %d-line terminal:\n%s", what, len(lines), height, view)
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w > width {
			t.Errorf("%s: line %d is %d cells wide on %d: %q", what, i, w, width, ansi.Strip(l))
		}
	}
}

func manySessions(n int) *fixedSessions {
	f := &fixedSessions{}
	for i := range n {
		f.states = append(f.states, state(sessionFigures{sessID: int64(100 + i), user: "u", db: "d", state: "active", userCPU: float64(i), window: 10,
			query: "select a_rather_long_column_name, another_one from a_table_with_a_long_name where x > 1"}))
	}
	return f
}

func TestEveryViewFitsAnEightyByTwentyFourTerminal(t *testing.T) {
	addr := serveBoth(t, manySessions(40), sixHosts())
	m := screen(t, addr, 80, 24)
	for _, view := range viewNames {
		v := m.View()
		if !strings.Contains(ansi.Strip(v), "view "+view) {
			t.Fatalf("expected the %s view:\n%s", view, v)
		}
		fitsTerminal(t, view, v, 80, 24)
		m = press(m, "tab")
	}
	if v := m.View(); !strings.Contains(ansi.Strip(v), "view sessions") {
		t.Errorf("tab after hosts must come back to sessions:\n%s", v)
	}
}

func TestHeaderShowsTheClusterAndHostBars(t *testing.T) {
	addr := serveBoth(t, threeSessions(), sixHosts())
	lines := strings.Split(ansi.Strip(screen(t, addr, 80, 24).View()), "\n")
	if !strings.HasPrefix(lines[1], "cluster 3.20 cores rd 2.0M/s wr 1.0M/s mem 6.0G hosts 5/6 up sess 3 qry 3 avg 1m") {
		t.Errorf("cluster line %q", lines[1])
	}
	// (24-8)/4 = 4 header lines for hosts: three bars and how many more.
	if !strings.HasPrefix(lines[2], "mdw ") || !strings.HasPrefix(lines[4], "sdw2 ") || lines[5] != "... 3 more hosts (tab: host view)" {
		t.Errorf("host bars:\n%s", strings.Join(lines[2:6], "\n"))
	}
	// The busiest host (1.8 cores) sets a 2-core scale: sdw2's 0.5 cores fill a quarter.
	if !strings.Contains(lines[4], "[||||            ]  0.50") {
		t.Errorf("sdw2 bar %q, want a quarter of the 2-core scale", lines[4])
	}
	if !strings.Contains(lines[2], "psi 12%/0%/3%") {
		t.Errorf("mdw pressure missing: %q", lines[2])
	}
	if got := sessOf(lines[firstRow(t, lines)]); got != "11" {
		t.Errorf("first session %s, want 11", got)
	}
}

func TestHostViewShowsEveryHostSideBySide(t *testing.T) {
	addr := serveBoth(t, threeSessions(), sixHosts())
	m := press(press(screen(t, addr, 80, 24), "tab"), "tab")
	v := ansi.Strip(m.View())
	for _, want := range []string{
		"mdw        up [|               ]  0.10",
		"sdw3       up [||||||||||||||  ]  1.80",
		"sdw5       no [                ]  0.00",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("host view lacks %q:\n%s", want, v)
		}
	}
}

func TestQueriesViewListsTheServersTopQueriesWithSkew(t *testing.T) {
	top := sixHosts()
	addr := serveBoth(t, threeSessions(), top)
	m := press(screen(t, addr, 80, 24), "tab")
	lines := strings.Split(ansi.Strip(m.View()), "\n")
	var rows []string
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "SESS ") {
			rows = lines[i+1 : i+4]
		}
	}
	if len(rows) != 3 {
		t.Fatalf("no query table:\n%s", strings.Join(lines, "\n"))
	}
	if f := strings.Fields(rows[0]); f[0] != "11" || f[1] != "4" || f[2] != "run" || f[3] != "12.5s" || f[4] != "150.0" || f[7] != "72%@3" || f[8] != "3.0G" || f[9] != "select" {
		t.Errorf("first query row %q", rows[0])
	}
	if f := strings.Fields(rows[2]); f[0] != "13" || f[7] != "-" {
		t.Errorf("third query row %q: no hottest segment, no skew", rows[2])
	}
	// The skew sort asks the server for its skew ranking.
	m = press(m, "s")
	m.(topModel).fetch()()
	top.mu.Lock()
	last := top.reqs[len(top.reqs)-1]
	top.mu.Unlock()
	if last.GetKey() != gpotelv1.TopKey_TOP_KEY_SKEW || last.GetLimit() != clusterTopLimit {
		t.Errorf("request %v, want the skew key and a limit of %d", last, clusterTopLimit)
	}
}

func TestScreenSaysWhenTheServerHasNoClusterTop(t *testing.T) {
	addr := serve(t, threeSessions()) // GetGPInfo only
	v := screen(t, addr, 80, 24).View()
	if !strings.Contains(v, "cluster: not served by this collector") {
		t.Errorf("the screen does not say why there is no cluster header:\n%s", v)
	}
	fitsTerminal(t, "no cluster top", v, 80, 24)
}

func TestOncePrintsTheClusterHeaderWithEveryHost(t *testing.T) {
	addr := serveBoth(t, threeSessions(), sixHosts())
	lines := strings.Split(runOnce(t, "--addr", addr, "--width", "80"), "\n")
	if !strings.HasPrefix(lines[1], "cluster 3.20 cores") || !strings.HasPrefix(lines[7], "sdw5!") || !strings.HasPrefix(strings.TrimSpace(lines[8]), "SESS ") {
		t.Errorf("--once header:\n%s", strings.Join(lines, "\n"))
	}
}

func TestOnceViewPrintsQueriesOrHosts(t *testing.T) {
	addr := serveBoth(t, threeSessions(), sixHosts())
	queries := strings.Split(strings.TrimRight(runOnce(t, "--addr", addr, "--view", "queries", "--sort", "skew"), "\n"), "\n")
	// The cluster line, six host bars, the header, three queries.
	if len(queries) != 11 || !strings.HasPrefix(strings.TrimSpace(queries[7]), "SESS ") || sessOf(queries[8]) != "11" {
		t.Errorf("--view queries:\n%s", strings.Join(queries, "\n"))
	}
	hosts := strings.Split(strings.TrimRight(runOnce(t, "--addr", addr, "--view", "hosts"), "\n"), "\n")
	if len(hosts) != 14 || !strings.HasPrefix(hosts[7], "HOST ") || !strings.HasPrefix(hosts[13], "sdw5       no ") {
		t.Errorf("--view hosts:\n%s", strings.Join(hosts, "\n"))
	}
	for _, args := range [][]string{{"--once", "--view", "tables"}, {"--view", "queries"}} {
		if err := run(context.Background(), append([]string{"--addr", addr}, args...), &strings.Builder{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// The VMEM column shows Greenplum's vmem from GetClusterTop for the
// sessions it lists, "-" for the others (and where the server keeps none).
func TestVmemComesFromTheClusterTop(t *testing.T) {
	rows := []SessionRow{{TmID: 1700000000, SessID: 11}, {TmID: 1700000000, SessID: 12}}
	addVmem(rows, &gpotelv1.GetClusterTopResponse{Sessions: []*gpotelv1.SessionTop{
		{TmId: 1700000000, SessId: 11, VmemBytes: proto.Uint64(45 << 20)}, {TmId: 1700000000, SessId: 12}}})
	out := formatTable(rows, 0)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if f := strings.Fields(lines[1]); !slices.Contains(f, "45.0M") {
		t.Errorf("session 11 row %q lacks its 45.0M vmem", lines[1])
	}
	if rows[1].HasVmem {
		t.Errorf("session 12 has no vmem figure, yet the row has one")
	}
}

// A blocked session shows the chain of sessions it waits behind; a wait
// cycle ends in "…" instead of looping.
func TestBlockedSessionsShowTheChain(t *testing.T) {
	rows := []SessionRow{{SessID: 1, BlockedBy: 2}, {SessID: 2, BlockedBy: 3}, {SessID: 3}, {SessID: 4, BlockedBy: 5}, {SessID: 5, BlockedBy: 4}}
	markBlockChains(rows)
	for i, want := range []string{"<2<3", "<3", "", "<5…", "<4…"} {
		if rows[i].BlockChain != want {
			t.Errorf("session %d chain %q, want %q", rows[i].SessID, rows[i].BlockChain, want)
		}
	}
}
