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
var errNoClusterTop = fmt.Errorf("this collector does not serve the cluster header (gpotel.v1.ClusterTop)")

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
		return nil, c.callError("the cluster header", err)
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

// barScale is what a full CPU bar means for a host: its CPUs when the
// snapshot reports them; else the busiest host's cores rounded up to a
// whole core, so the bars compare the hosts without saying how full each is.
func barScale(h *gpotelv1.HostTop, hosts []*gpotelv1.HostTop) float64 {
	if h.GetCpus() > 0 {
		return float64(h.GetCpus())
	}
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

// clusterLine is the header's cluster total, like top's first lines: every
// host's database processes, smoothed at the API's time constant.
func clusterLine(resp *gpotelv1.GetClusterTopResponse, capa capacity, width int) string {
	c := resp.GetCluster()
	u := c.GetUsage()
	cpus := ""
	if capa.cluster > 0 {
		cpus = fmt.Sprintf(" of %.0f CPUs", capa.cluster)
	}
	return fitItems([]item{
		{0, "cluster"},
		{0, "CPU " + cpuPercent(u.GetCpuCores(), capa.cluster) + cpus},
		{1, "RD " + bytesText(u.GetReadBytesPerSecond()) + "/s"},
		{1, "WR " + bytesText(u.GetWriteBytesPerSecond()) + "/s"},
		{2, "MEM " + bytesText(float64(u.GetRssBytes()))},
		{0, fmt.Sprintf("hosts %d/%d up", c.GetHostsUp(), c.GetHosts())},
		{3, fmt.Sprintf("queries %d", c.GetQueries())},
		{1, "(avg " + constantText(resp.GetTimeConstantSeconds()) + ")"},
	}, "  ", width)
}

// hostBar is one host in the header: its CPU bar and use, disk rates,
// memory and pressure (cpu/memory/io "some" shares of the last 10 s).
func hostBar(h *gpotelv1.HostTop, hosts []*gpotelv1.HostTop, capa capacity, width int) string {
	name := h.GetHostname()
	u := h.GetUsage()
	switch {
	case !h.GetUp():
		return cutLine(pad(name, 10, false)+" down: its agent did not answer the latest snapshot", width)
	case u == nil:
		return cutLine(pad(name, 10, false)+" no averages yet", width)
	}
	s := fmt.Sprintf("%s %s %6s  RD %5s/s  WR %5s/s  MEM %5s", pad(name, 10, false), cpuBar(u.GetCpuCores(), barScale(h, hosts), hostBarWidth),
		cpuPercent(u.GetCpuCores(), capa.host[h.GetHostname()]), bytesText(u.GetReadBytesPerSecond()), bytesText(u.GetWriteBytesPerSecond()),
		bytesText(float64(u.GetRssBytes())))
	if p := h.GetPressure(); p != nil {
		s += "  PSI " + psiText(p)
	}
	return cutLine(s, width)
}

func psiText(p *gpotelv1.HostStall) string {
	if p == nil {
		return absentText
	}
	return shareText(p.GetCpu()) + "/" + shareText(p.GetMemory()) + "/" + shareText(p.GetIo())
}

// clusterHeader is the cluster line and up to maxHosts host bars; when
// there are more hosts, the last line says how many more the host view has.
func clusterHeader(resp *gpotelv1.GetClusterTopResponse, maxHosts, width int) []string {
	capa := capacityOf(resp)
	lines := []string{clusterLine(resp, capa, width)}
	hosts := resp.GetHosts()
	shown := hosts
	if len(hosts) > maxHosts {
		shown = hosts[:max(maxHosts-1, 0)]
	}
	for _, h := range shown {
		lines = append(lines, hostBar(h, hosts, capa, width))
	}
	if len(shown) < len(hosts) {
		lines = append(lines, cutLine(fmt.Sprintf("… %d more hosts (tab: hosts view)", len(hosts)-len(shown)), width))
	}
	return lines
}

// hostColumns are the hosts view's: every host side by side.
func hostColumns(resp *gpotelv1.GetClusterTopResponse) table[*gpotelv1.HostTop] {
	capa := capacityOf(resp)
	usage := func(f func(*gpotelv1.HostTop, *gpotelv1.Usage) string) func(*gpotelv1.HostTop) string {
		return func(h *gpotelv1.HostTop) string {
			if h.GetUsage() == nil {
				return absentText
			}
			return f(h, h.GetUsage())
		}
	}
	return table[*gpotelv1.HostTop]{columns: []column[*gpotelv1.HostTop]{
		{"HOST", 10, true, 0, (*gpotelv1.HostTop).GetHostname},
		{"UP", 2, true, 0, func(h *gpotelv1.HostTop) string {
			if h.GetUp() {
				return "up"
			}
			return "no"
		}},
		{"CPU", hostBarWidth + 2, true, 5, func(h *gpotelv1.HostTop) string {
			return cpuBar(h.GetUsage().GetCpuCores(), barScale(h, resp.GetHosts()), hostBarWidth)
		}},
		{"CPU%", 6, false, 0, usage(func(h *gpotelv1.HostTop, u *gpotelv1.Usage) string {
			return cpuText(u.GetCpuCores(), capa.host[h.GetHostname()])
		})},
		{"CPUS", 4, false, 4, func(h *gpotelv1.HostTop) string {
			if h.Cpus == nil {
				return absentText
			}
			return strconv.FormatUint(uint64(h.GetCpus()), 10)
		}},
		{"RD/s", 5, false, 1, usage(func(_ *gpotelv1.HostTop, u *gpotelv1.Usage) string { return bytesText(u.GetReadBytesPerSecond()) })},
		{"WR/s", 5, false, 1, usage(func(_ *gpotelv1.HostTop, u *gpotelv1.Usage) string { return bytesText(u.GetWriteBytesPerSecond()) })},
		{"MEM", 5, false, 2, usage(func(_ *gpotelv1.HostTop, u *gpotelv1.Usage) string { return bytesText(float64(u.GetRssBytes())) })},
		{"PROCS", 5, false, 3, usage(func(_ *gpotelv1.HostTop, u *gpotelv1.Usage) string {
			return strconv.FormatUint(uint64(u.GetProcesses()), 10)
		})},
		{"PSI c/m/io", 11, true, 2, func(h *gpotelv1.HostTop) string { return psiText(h.GetPressure()) }},
	}}
}
