// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// errNoClusterTop: the server predates gpotel.v1.ClusterTop.
var errNoClusterTop = fmt.Errorf("cluster: not served by this collector (no gpotel.v1.ClusterTop)")

// clusterTopLimit is how many queries the queries view asks for: a screen's worth.
const clusterTopLimit = 50

// clusterTop asks for the cluster, its hosts and the top queries by the key.
func (c *sessionClient) clusterTop(ctx context.Context, k SortKey) (*gpotelv1.GetClusterTopResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := gpotelv1.NewClusterTopClient(c.conn).GetClusterTop(ctx, &gpotelv1.GetClusterTopRequest{
		Key: k.topKey(), Limit: clusterTopLimit, ShowSystem: c.opts.ShowSystem,
	})
	if status.Code(err) == codes.Unimplemented {
		return nil, errNoClusterTop
	}
	if err != nil {
		return nil, fmt.Errorf("GetClusterTop %s: %w", c.opts.Addr, err)
	}
	return resp, nil
}

// topKey is the GetClusterTop key matching the sort; the delays have none.
func (k SortKey) topKey() gpotelv1.TopKey {
	switch k {
	case SortMemory:
		return gpotelv1.TopKey_TOP_KEY_MEMORY
	case SortRead:
		return gpotelv1.TopKey_TOP_KEY_READ
	case SortWrite:
		return gpotelv1.TopKey_TOP_KEY_WRITE
	case SortSkew:
		return gpotelv1.TopKey_TOP_KEY_SKEW
	case SortSmoothed:
		return gpotelv1.TopKey_TOP_KEY_CPU_SMOOTHED
	case SortSpill:
		return gpotelv1.TopKey_TOP_KEY_SPILL
	}
	return gpotelv1.TopKey_TOP_KEY_CPU
}

// hostBarWidth is the width of a host's CPU bar, brackets excluded.
const hostBarWidth = 16

// coreScale is what a full CPU bar means: the busiest host's cores rounded
// up to a whole core. The pipeline has no host CPU count, so the bars show
// the hosts against each other, not against what each has.
func coreScale(hosts []*gpotelv1.HostTop) float64 {
	most := 0.0
	for _, h := range hosts {
		most = max(most, h.GetUsage().GetCpuCores())
	}
	return max(math.Ceil(most), 1)
}

func cpuBar(cores, scale float64, width int) string {
	n := 0
	if scale > 0 && cores > 0 {
		n = min(int(math.Round(cores/scale*float64(width))), width)
	}
	return "[" + strings.Repeat("|", n) + strings.Repeat(" ", width-n) + "]"
}

// clusterLine is the header's cluster total, like top's first lines.
func clusterLine(resp *gpotelv1.GetClusterTopResponse) string {
	c := resp.GetCluster()
	u := c.GetUsage()
	return fmt.Sprintf("cluster %.2f cores rd %s/s wr %s/s mem %s hosts %d/%d up sess %d qry %d avg %s",
		u.GetCpuCores(), formatBytes(u.GetReadBytesPerSecond()), formatBytes(u.GetWriteBytesPerSecond()),
		formatBytes(float64(u.GetRssBytes())), c.GetHostsUp(), c.GetHosts(), c.GetSessions(), c.GetQueries(),
		formatConstant(resp.GetTimeConstantSeconds()))
}

func formatConstant(seconds float64) string {
	switch {
	case seconds <= 0:
		return "-"
	case math.Mod(seconds, 60) == 0:
		return strconv.FormatFloat(seconds/60, 'f', 0, 64) + "m"
	}
	return strconv.FormatFloat(seconds, 'f', 0, 64) + "s"
}

// hostBar is one host in the header: its CPU bar and cores, disk rates,
// memory and pressure (cpu/memory/io "some" shares of the last 10 s).
func hostBar(h *gpotelv1.HostTop, scale float64) string {
	u := h.GetUsage()
	name := h.GetHostname()
	if !h.GetUp() {
		name += "!"
	}
	s := fmt.Sprintf("%-10s %s %5.2f rd %6s wr %6s mem %6s", cutText(name, 10), cpuBar(u.GetCpuCores(), scale, hostBarWidth),
		u.GetCpuCores(), formatBytes(u.GetReadBytesPerSecond()), formatBytes(u.GetWriteBytesPerSecond()), formatBytes(float64(u.GetRssBytes())))
	if p := h.GetPressure(); p != nil {
		s += fmt.Sprintf(" psi %s/%s/%s", percent(p.GetCpu()), percent(p.GetMemory()), percent(p.GetIo()))
	}
	return s
}

func cutText(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// clusterHeader is the cluster line and up to maxHosts host bars; when
// there are more hosts, the last line says how many more the host view has.
func clusterHeader(resp *gpotelv1.GetClusterTopResponse, maxHosts, width int) string {
	var b strings.Builder
	b.WriteString(cut(clusterLine(resp), width))
	hosts := resp.GetHosts()
	scale := coreScale(hosts)
	shown := hosts
	if len(hosts) > maxHosts {
		shown = hosts[:max(maxHosts-1, 0)]
	}
	for _, h := range shown {
		b.WriteString(cut(hostBar(h, scale), width))
	}
	if len(shown) < len(hosts) {
		b.WriteString(cut(fmt.Sprintf("... %d more hosts (tab: host view)", len(hosts)-len(shown)), width))
	}
	return b.String()
}

// hostTable is the host view: every host side by side, one line each.
func hostTable(resp *gpotelv1.GetClusterTopResponse, maxRows, width int) string {
	var b strings.Builder
	b.WriteString(cut(fmt.Sprintf("%-10s %-2s %-*s %5s %7s %7s %6s %5s %s", "HOST", "UP", hostBarWidth+2, "CPU", "CORES", "READ/s", "WRITE/s", "MEM", "PROCS", "PSI c/m/io"), width))
	hosts := resp.GetHosts()
	scale := coreScale(hosts)
	for i, h := range hosts {
		if maxRows > 0 && i == maxRows-1 && len(hosts) > maxRows {
			b.WriteString(cut(fmt.Sprintf("... %d more hosts", len(hosts)-i), width))
			break
		}
		u := h.GetUsage()
		up := "no"
		if h.GetUp() {
			up = "up"
		}
		psi := "-"
		if p := h.GetPressure(); p != nil {
			psi = percent(p.GetCpu()) + "/" + percent(p.GetMemory()) + "/" + percent(p.GetIo())
		}
		b.WriteString(cut(fmt.Sprintf("%-10s %-2s %s %5.2f %7s %7s %6s %5d %s", cutText(h.GetHostname(), 10), up, cpuBar(u.GetCpuCores(), scale, hostBarWidth),
			u.GetCpuCores(), formatBytes(u.GetReadBytesPerSecond()), formatBytes(u.GetWriteBytesPerSecond()), formatBytes(float64(u.GetRssBytes())),
			u.GetProcesses(), psi), width))
	}
	return b.String()
}

// skewText is a skew share and its hottest segment: "75%@3"; "-" without one.
func skewText(skew float64, hottest *int32) string {
	if hottest == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f%%@%d", skew*100, *hottest)
}

// queryColumns are the queries view's columns; the text takes the rest.
var queryColumns = []struct {
	title string
	width int
	value func(*gpotelv1.QueryTop) string
}{
	{"SESS", 7, func(q *gpotelv1.QueryTop) string { return strconv.FormatInt(q.GetSessId(), 10) }},
	{"CCNT", 6, func(q *gpotelv1.QueryTop) string {
		if q.CommandCount == nil {
			return "-"
		}
		return strconv.FormatInt(q.GetCommandCount(), 10)
	}},
	{"ST", 4, func(q *gpotelv1.QueryTop) string {
		s := "run"
		if q.GetCompleted() {
			s = "done"
		}
		if q.GetPartial() {
			s += "*"
		}
		return s
	}},
	{"DUR", 7, func(q *gpotelv1.QueryTop) string {
		return strconv.FormatFloat(q.GetDurationSeconds(), 'f', 1, 64) + "s"
	}},
	{"CPU%", 7, func(q *gpotelv1.QueryTop) string {
		return strconv.FormatFloat(q.GetUsage().GetCpuCores()*100, 'f', 1, 64)
	}},
	{"READ/s", 8, func(q *gpotelv1.QueryTop) string { return formatBytes(q.GetUsage().GetReadBytesPerSecond()) }},
	{"WRITE/s", 8, func(q *gpotelv1.QueryTop) string { return formatBytes(q.GetUsage().GetWriteBytesPerSecond()) }},
	{"SKEW", 7, func(q *gpotelv1.QueryTop) string { return skewText(q.GetCpuSkew(), q.CpuHottestSegment) }},
	// The most workfile bytes the query held at once (Greenplum).
	{"SPILL", 7, func(q *gpotelv1.QueryTop) string { return formatBytes(float64(q.GetSpillBytesMax())) }},
}

// queryTable is the queries view: the server's top queries in its order
// (averages over each query's duration; * = a host did not answer).
func queryTable(queries []*gpotelv1.QueryTop, maxRows, width int) string {
	var b strings.Builder
	cells := make([]string, 0, len(queryColumns)+1)
	for _, c := range queryColumns {
		cells = append(cells, pad(c.title, c.width, c.title != "ST"))
	}
	b.WriteString(cut(strings.Join(append(cells, "QUERY"), " "), width))
	for i, q := range queries {
		if maxRows > 0 && i >= maxRows {
			break
		}
		cells = cells[:0]
		for _, c := range queryColumns {
			cells = append(cells, pad(c.value(q), c.width, c.title != "ST"))
		}
		b.WriteString(cut(strings.Join(append(cells, firstLine(q.GetQuery())), " "), width))
	}
	return b.String()
}
