// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// sixHosts: the coordinator and five segment hosts, sdw3 the busiest at 1.8
// cores and sdw5 silent (no CPU count reported); three queries, the first
// skewed onto segment 3.
func sixHosts() *fakeAPI {
	f := threeSessions()
	resp := &gpotelv1.GetClusterTopResponse{
		SnapshotTimeUnixNano: snapshotTime.UnixNano(),
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
	f.top = resp
	return f
}

func TestHeaderShowsTheClusterAndHostBars(t *testing.T) {
	h := newTUI(t, sixHosts(), 100, 24)
	lines := h.lines()
	if want := "cluster  CPU 320%  RD 2.0M/s  WR 1.0M/s  MEM 6.0G  hosts 5/6 up  queries 3  (avg 1m)"; lines[1] != want {
		t.Errorf("cluster line\n got %q\nwant %q", lines[1], want)
	}
	// (24-8)/4 = 4 header lines for hosts: three bars and how many more.
	if !strings.HasPrefix(lines[2], "mdw ") || !strings.HasPrefix(lines[4], "sdw2 ") || lines[5] != "… 3 more hosts (tab: hosts view)" {
		t.Errorf("host bars:\n%s", strings.Join(lines[2:6], "\n"))
	}
	// Without CPU counts the busiest host (1.8 cores) sets a 2-core scale:
	// sdw2's 0.5 cores fill a quarter.
	if !strings.Contains(lines[4], "[||||            ]  50.0%") {
		t.Errorf("sdw2 bar %q, want a quarter of the 2-core scale", lines[4])
	}
	if !strings.Contains(lines[2], "PSI 12%/0%/3%") {
		t.Errorf("mdw pressure missing: %q", lines[2])
	}
}

// With the hosts' CPU counts, a bar is full at the host's CPUs.
func TestHostBarsAreFullAtTheHostsCPUs(t *testing.T) {
	f := sixHosts()
	for _, h := range f.top.Hosts {
		h.Cpus = proto.Uint32(4)
	}
	f.top.Cluster.Cpus = proto.Uint32(24) // the API's sum
	h := newTUI(t, f, 100, 40)
	if l := h.line("sdw3 "); !strings.Contains(l, "[|||||||         ]   180%") {
		t.Errorf("sdw3's 1.8 cores of 4 CPUs: %q", l)
	}
	if !strings.Contains(h.lines()[1], "CPU 320% of 24 CPUs") {
		t.Errorf("cluster line %q", h.lines()[1])
	}
}

func TestHostsViewShowsEveryHostSideBySide(t *testing.T) {
	h := newTUI(t, sixHosts(), 100, 24)
	h.press("tab", "tab")
	header := h.line("HOST ")
	for host, want := range map[string]map[string]string{
		"mdw ":  {"CPU%": "10.0", "CPUS": "-", "RD/s": "300K", "MEM": "1.0G", "PROCS": "7"},
		"sdw3 ": {"CPU%": "180"},
		"sdw5 ": {"CPU%": "0.0"},
	} {
		for title, figure := range want {
			if got := cellUnder(header, h.line(host), title); got != figure {
				t.Errorf("%s %s = %q, want %q\n%s", host, title, got, figure, h.screen())
			}
		}
	}
	if !strings.Contains(h.line("sdw5 "), " no ") {
		t.Errorf("sdw5 is not marked down: %q", h.line("sdw5 "))
	}
}

func TestQueriesViewListsTheServersTopQueriesWithSkew(t *testing.T) {
	f := sixHosts()
	h := newTUI(t, f, 120, 24)
	h.press("tab")
	header := h.line(" SESS ")
	row := h.line("big_table_0")
	for title, want := range map[string]string{"SESS": "11", "CCNT": "4", "DUR": "12.5s", "CPU%": "150", "SKEW": "72%@3", "SPILL": "3.0G"} {
		if got := cellUnder(header, row, title); got != want {
			t.Errorf("first query's %s = %q, want %q\n%s", title, got, want, h.screen())
		}
	}
	if !strings.Contains(row, " alice ") || !strings.Contains(row, " run ") {
		t.Errorf("the query's user and state: %q", row)
	}
	if got := cellUnder(header, h.line("big_table_2"), "SKEW"); got != "-" {
		t.Errorf("a query without a hottest segment has skew %q", got)
	}
	// The skew sort asks the server for its skew ranking.
	h.press("s")
	f.mu.Lock()
	last := f.topReqs[len(f.topReqs)-1]
	f.mu.Unlock()
	if last.GetKey() != gpotelv1.TopKey_TOP_KEY_SKEW || last.GetLimit() != clusterTopLimit {
		t.Errorf("request %v, want the skew key and a limit of %d", last, clusterTopLimit)
	}
}

// Enter on a query shows it whole: per host, per segment, its text.
func TestEnterOnAQueryShowsItPerSegment(t *testing.T) {
	f := sixHosts()
	f.top.Queries[0].Hosts = []*gpotelv1.SessionHostUsage{{Hostname: "sdw3", Usage: &gpotelv1.Usage{CpuCores: 1.2}}}
	f.queries = map[int32]*yagpcc.TotalQueryData{11: segmentsOf(11, 12.5, map[int32]float64{-1: 0.5, 0: 3, 1: 15})}
	h := newTUI(t, f, 120, 40)
	h.press("tab", "enter")
	screen := h.screen()
	for _, want := range []string{"query of session 11", "command 4", "per host, averaged over its duration", "sdw3", "per segment, since it started",
		"select * from big_table_0 order by x"} {
		if !strings.Contains(screen, want) {
			t.Errorf("lacks %q:\n%s", want, screen)
		}
	}
	if l := h.line("   1 sdw"); !strings.Contains(l, "15.00s") || !strings.Contains(l, " 120 ") {
		t.Errorf("segment 1: 15 s of CPU over 12.5 s: %q\n%s", l, screen)
	}
	// A query has no memory or process count of its own per host (the API
	// gives none): absent, never 0.
	header, sdw3 := h.line("  HOST "), h.line("  sdw3 ")
	for title, want := range map[string]string{"CPU%": "120", "MEM": "-", "PROCS": "-"} {
		if got := cellUnder(header, sdw3, title); got != want {
			t.Errorf("the query's %s on sdw3 reads %q, want %q\n%s", title, got, want, screen)
		}
	}
}

// segmentsOf is GetGPQuery's answer: CPU seconds per content id over duration.
func segmentsOf(sess int32, duration float64, cpu map[int32]float64) *yagpcc.TotalQueryData {
	start := snapshotTime.Add(-durationOf(duration))
	d := &yagpcc.TotalQueryData{QueryStat: &yagpcc.QueryStat{StartTime: timestampOf(start), CollectTime: timestampOf(snapshotTime),
		QueryKey: &yagpcc.QueryKey{Tmid: 1700000000, Ssid: sess}}}
	for seg, s := range cpu {
		host := fmt.Sprintf("sdw%d", seg/2+1)
		if seg < 0 {
			host = "mdw"
		}
		d.SegmentQueryMetrics = append(d.SegmentQueryMetrics, &yagpcc.SegmentMetrics{Hostname: host, SegmentKey: &yagpcc.SegmentKey{Segindex: seg},
			SegmentMetrics: &yagpcc.GPMetrics{SystemStat: &yagpcc.SystemStat{UserTimeSeconds: s}}})
	}
	return d
}

func TestScreenSaysWhenTheServerHasNoClusterTop(t *testing.T) {
	f := threeSessions()
	f.onlySessions = true
	h := newTUI(t, f, 80, 24)
	if !strings.Contains(h.screen(), "this collector does not serve the cluster header") {
		t.Errorf("the screen does not say why there is no cluster header:\n%s", h.screen())
	}
	h.fits("no cluster top")
	h.press("tab", "tab")
	if !strings.Contains(h.screen(), "this collector does not serve host pressure") {
		t.Errorf("the hosts view does not say why there is no pressure:\n%s", h.screen())
	}
}

func TestOnceViewPrintsQueriesOrHosts(t *testing.T) {
	addr := serveAPI(t, sixHosts())
	queries := runOnce(t, "--addr", addr, "--view", "queries", "--sort", "skew")
	if _, rows := listRows(t, queries, "SESS"); len(rows) != 3 || sessOf(rows[0]) != "11" || !strings.Contains(queries, "\nsdw3 ") {
		t.Errorf("--view queries:\n%s", queries)
	}
	hosts := runOnce(t, "--addr", addr, "--view", "hosts")
	if _, rows := listRows(t, hosts, "HOST"); len(rows) < 6 || !strings.HasPrefix(strings.TrimSpace(rows[5]), "sdw5 ") {
		t.Errorf("--view hosts:\n%s", hosts)
	}
}

func someFull(resource string, some, full float64) []*gpotelv1.PressureFigures {
	return []*gpotelv1.PressureFigures{{Resource: resource, Kind: "some", Avg10: some}, {Resource: resource, Kind: "full", Avg10: full}}
}

// Under the hosts, one line per host: its pressure and its groups'.
func TestHostsViewShowsEachHostsPressureAndGroups(t *testing.T) {
	f := sixHosts()
	host := []*gpotelv1.PressureFigures{{Resource: "cpu", Kind: "some", Avg10: 0.71}}
	host = append(host, someFull("memory", 0.02, 0.01)...)
	host = append(host, someFull("io", 0.05, 0)...)
	f.pressure = []*gpotelv1.HostPressure{
		{Hostname: "sdw1", Pressure: host, Groups: []*gpotelv1.GroupPressure{
			{Name: "admin_group", Pressure: []*gpotelv1.PressureFigures{{Resource: "cpu", Kind: "some", Avg10: 0.05}}},
			{Name: "default_group", Pressure: []*gpotelv1.PressureFigures{{Resource: "cpu", Kind: "some", Avg10: 0.30}}},
		}},
		{Hostname: "sdw2", Groups: []*gpotelv1.GroupPressure{{Name: "oid:6437", Tasks: map[string]int64{"running": 1, "sleeping": 2}}}},
	}
	out := runOnce(t, "--addr", serveAPI(t, f), "--view", "hosts")
	_, pane, ok := strings.Cut(out, "\n\n")
	if !ok {
		t.Fatalf("no pressure pane under the hosts:\n%s", out)
	}
	lines := strings.Split(strings.TrimRight(pane, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "HOST") {
		t.Fatalf("pane is not a header and one line per host:\n%s", pane)
	}
	for _, want := range []string{"sdw1", "71%", "2%/1%", "5%/0%", "admin_group cpu 5%", "default_group cpu 30%"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("sdw1 line %q lacks %q", lines[1], want)
		}
	}
	if f := strings.Fields(lines[2]); f[0] != "sdw2" || f[1] != "-" || !strings.Contains(lines[2], "oid:6437 R1 S2 D0") {
		t.Errorf("sdw2 without host pressure and with a v1 group: %q", lines[2])
	}
}

func durationOf(seconds float64) time.Duration { return time.Duration(seconds * float64(time.Second)) }

func timestampOf(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

// A query outlives its session in the API (the processor keeps ended
// queries for its longest window): it still says whose it was, reads
// ended, is hidden with gpotel's own, and k refuses it.
func TestQueriesOfAGoneSessionSayWhoseTheyWere(t *testing.T) {
	f := sixHosts()
	addOwn(f, state(sessionFigures{sessID: 99, user: "gpotel", db: "postgres", state: "active", query: "select from pg_stat_activity", userCPU: 1, window: 10}))
	f.top.Queries = append(f.top.Queries, &gpotelv1.QueryTop{TmId: 1700000000, SessId: 99, DurationSeconds: 1, Completed: true,
		Usage: &gpotelv1.Usage{CpuCores: 0.2}, Query: "select from pg_stat_activity"})
	h := newTUI(t, f, 160, 40)
	h.press("tab")
	f.set(func(f *fakeAPI) { f.sessions = f.sessions[:1] }) // bob's (12), carol's (13) and gpotel's (99) are gone
	h.refresh()
	if l := h.line("big_table_1"); !strings.Contains(l, " bob ") || !strings.Contains(l, " ended ") {
		t.Errorf("bob's query once his session is gone: %q\n%s", l, h.screen())
	}
	if h.line("pg_stat_activity") != "" {
		t.Errorf("gpotel's own query is shown once its session is gone:\n%s", h.screen())
	}
	h.press("down", "k")
	if !strings.Contains(h.screen(), "session 12 has ended") || h.line("y/N") != "" {
		t.Errorf("k on the query of an ended session:\n%s", h.screen())
	}
}

// The title says how the list shown is ordered: a sort the queries have
// no figure for is not claimed for them.
func TestTheTitleSaysHowTheListShownIsOrdered(t *testing.T) {
	h := newTUI(t, sixHosts(), 160, 30)
	h.press("d")
	if !strings.Contains(h.lines()[0], "sort delay") {
		t.Errorf("sessions: %q", h.lines()[0])
	}
	h.press("tab")
	if !strings.Contains(h.lines()[0], "sort cpu (queries have no delay)") {
		t.Errorf("queries: %q", h.lines()[0])
	}
	h.press("m")
	if !strings.Contains(h.lines()[0], "unsorted (queries have no memory)") {
		t.Errorf("queries by memory: %q", h.lines()[0])
	}
	h.press("tab")
	if !strings.Contains(h.lines()[0], "hosts by name") {
		t.Errorf("hosts: %q", h.lines()[0])
	}
}
