// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/pressure"
	"github.com/gpotel/gpotel/internal/clockstep"
	"github.com/gpotel/gpotel/internal/pipeline"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// GetClusterTop's bounds: a response holds at most maxTopSessions sessions,
// each with at most one breakdown line per host and topQueryBytes of text.
const (
	defaultTopSessions = 20
	maxTopSessions     = 100
	topQueryBytes      = 200
	// skewMinCores: below this, a session's skew is noise and ranks as 0.
	skewMinCores = 0.05
)

// hostTops keeps the latest snapshot's host figures for GetClusterTop.
type hostTops struct {
	mu     sync.Mutex
	time   int64 // unix ns
	tau    float64
	byName map[string]*gpotelv1.HostTop
}

// consume replaces the figures with those of a batch that closes a snapshot.
func (h *hostTops) consume(b *batch) {
	tops := b.tops
	if tops == nil {
		return
	}
	at := int64(tops.Time) //nolint:gosec // nanoseconds since 1970 fit int64 until 2262
	h.mu.Lock()
	defer h.mu.Unlock()
	// A replayed or late snapshot must not replace a newer one, unless the
	// wall clock went back.
	if at > h.time || clockstep.SteppedBack(time.Unix(0, h.time), time.Unix(0, at)) {
		h.time, h.tau, h.byName = at, tops.Tau, tops.Hosts
	}
}

// clusterTopService is gpotel.v1.ClusterTop over the session store, the
// host figures, the query figures and the host pressure.
type clusterTopService struct {
	gpotelv1.UnimplementedClusterTopServer
	sessions *sessionStore
	hosts    *hostTops
	pressure *pressure.Store
	window   time.Duration
}

func (s *clusterTopService) GetClusterTop(_ context.Context, req *gpotelv1.GetClusterTopRequest) (*gpotelv1.GetClusterTopResponse, error) {
	key := req.GetKey()
	if _, known := gpotelv1.TopKey_name[int32(key)]; !known || key == gpotelv1.TopKey_TOP_KEY_UNSPECIFIED {
		key = gpotelv1.TopKey_TOP_KEY_CPU
	}
	limit := int(req.GetLimit())
	if limit == 0 {
		limit = defaultTopSessions
	}
	limit = min(limit, maxTopSessions)

	resp := &gpotelv1.GetClusterTopResponse{WindowSeconds: s.window.Seconds(), Key: key, Cluster: &gpotelv1.ClusterTotals{Usage: &gpotelv1.Usage{}}}
	s.addHosts(resp)

	v := s.sessions.load()
	if resp.SnapshotTimeUnixNano == 0 && !v.time.IsZero() {
		resp.SnapshotTimeUnixNano = v.time.UnixNano()
	}
	type ranked struct {
		top   *gpotelv1.SessionTop
		value float64
	}
	var all []ranked
	for _, ss := range v.sessions {
		if !v.live(ss) || ss.system && !req.GetShowSystem() {
			continue
		}
		top := sessionTop(ss)
		all = append(all, ranked{top, topValue(top, key)})
	}
	resp.Cluster.Sessions = uint32(min(len(all), math.MaxUint32)) //nolint:gosec // bounded above
	slices.SortFunc(all, func(a, b ranked) int {
		if c := cmp.Compare(b.value, a.value); c != 0 {
			return c
		}
		if c := cmp.Compare(a.top.GetTmId(), b.top.GetTmId()); c != 0 {
			return c
		}
		return cmp.Compare(a.top.GetSessId(), b.top.GetSessId())
	})
	for _, r := range all[:min(limit, len(all))] {
		resp.Sessions = append(resp.Sessions, r.top)
	}
	// Then the collector's own beyond the limit (the pools' few
	// connections), in key order, so that a client can hide every one.
	var own []*gpotelv1.SessionTop
	for _, r := range all[min(limit, len(all)):] {
		if r.top.GetOwn() {
			own = append(own, r.top)
		}
	}
	slices.SortFunc(own, func(a, b *gpotelv1.SessionTop) int {
		return cmp.Or(cmp.Compare(a.GetTmId(), b.GetTmId()), cmp.Compare(a.GetSessId(), b.GetSessId()))
	})
	resp.Sessions = append(resp.Sessions, own...)
	resp.Cluster.Queries = uint32(min(len(v.queries), math.MaxUint32)) //nolint:gosec // bounded above
	resp.Queries = topQueries(v, key, limit)
	return resp, nil
}

// addHosts fills the hosts, their pressure and the cluster totals.
func (s *clusterTopService) addHosts(resp *gpotelv1.GetClusterTopResponse) {
	s.hosts.mu.Lock()
	resp.SnapshotTimeUnixNano, resp.TimeConstantSeconds = s.hosts.time, s.hosts.tau
	for _, h := range s.hosts.byName {
		resp.Hosts = append(resp.Hosts, proto.Clone(h).(*gpotelv1.HostTop))
	}
	s.hosts.mu.Unlock()
	stalls := map[string]*gpotelv1.HostStall{}
	for _, hp := range s.pressure.Get().GetHosts() {
		st := &gpotelv1.HostStall{}
		for _, f := range hp.GetPressure() {
			if f.GetKind() != "some" {
				continue
			}
			switch f.GetResource() {
			case "cpu":
				st.Cpu = f.GetAvg10()
			case "memory":
				st.Memory = f.GetAvg10()
			case "io":
				st.Io = f.GetAvg10()
			}
		}
		if len(hp.GetPressure()) > 0 {
			stalls[hp.GetHostname()] = st
		}
	}
	slices.SortFunc(resp.Hosts, func(a, b *gpotelv1.HostTop) int { return strings.Compare(a.GetHostname(), b.GetHostname()) })
	c := resp.Cluster
	// The cluster's CPUs are the hosts' sum only when every host listed
	// reports its own: a partial sum would make a true figure look impossible.
	cpus, everyHost := uint32(0), len(resp.Hosts) > 0
	for _, h := range resp.Hosts {
		h.Pressure = stalls[h.GetHostname()]
		c.Hosts++
		if h.GetUp() {
			c.HostsUp++
		}
		if h.Cpus == nil {
			everyHost = false
		}
		cpus += h.GetCpus() // at most kernelunits.MaxCPUs each
		if u := h.GetUsage(); u != nil {
			c.Usage.CpuCores += u.GetCpuCores()
			c.Usage.ReadBytesPerSecond += u.GetReadBytesPerSecond()
			c.Usage.WriteBytesPerSecond += u.GetWriteBytesPerSecond()
			c.Usage.RssBytes += u.GetRssBytes()
			c.Usage.Processes += u.GetProcesses()
		}
	}
	if everyHost {
		c.Cpus = &cpus
	}
}

// sessionTop is one session's line: rates from its last_metrics window.
func sessionTop(ss *session) *gpotelv1.SessionTop {
	st := ss.state
	info := st.GetSessionInfo()
	last := st.GetLastMetrics().GetSystemStat()
	rate := func(v float64) float64 {
		if w := last.GetWindowSeconds(); w > 0 {
			return v / w
		}
		return 0
	}
	top := &gpotelv1.SessionTop{
		TmId: st.GetSessionKey().GetTmId(), SessId: st.GetSessionKey().GetSessId(),
		User: info.GetUser(), Database: info.GetDatabase(), State: info.GetState(),
		Query:  cutText(st.GetRunningQueryInfo().GetQueryText()),
		System: ss.system, Own: ss.own, Partial: last.GetPartial(),
		CpuSkew: last.GetCpuSkew(), CpuMaxOverAvg: last.GetCpuMaxOverAvg(),
		IoSkew: last.GetIoSkew(), IoMaxOverAvg: last.GetIoMaxOverAvg(),
		Hosts: ss.hosts,
	}
	// A session without last_metrics (its window not filled yet) has no
	// usage and no hottest segment: absent, not zero.
	if last != nil {
		top.Usage = &gpotelv1.Usage{
			CpuCores:            rate(last.GetUserTimeSeconds() + last.GetKernelTimeSeconds()),
			ReadBytesPerSecond:  rate(float64(last.GetReadBytes())),
			WriteBytesPerSecond: rate(float64(last.GetWriteBytes())),
			RssBytes:            last.GetRss(),
			Processes:           last.GetProcesses(),
		}
		top.CpuHottestSegment, top.IoHottestSegment = last.CpuHottestSegment, last.IoHottestSegment
	}
	if avgs := st.GetProcAvg(); len(avgs) > 0 {
		top.CpuCoresSmoothed = avgs[0].GetCpuCores() // shortest time constant first
	}
	addGreenplum(top, ss.greenplum)
	return top
}

// addGreenplum puts the server's own figures of a session on its line.
func addGreenplum(top *gpotelv1.SessionTop, g *pipeline.GreenplumSession) {
	if g == nil {
		return
	}
	if bytes, files := g.SpillTotal(); len(g.Spill) > 0 {
		b := uint64(max(bytes, 0))                                                      // #nosec G115 -- not negative
		top.SpillBytes, top.SpillFiles = &b, uint32(min(max(files, 0), math.MaxUint32)) // #nosec G115 -- capped
	}
	if w := g.Wait; w != nil {
		top.BlockedBySessId = &w.Blocker
		top.LockWaitMode, top.LockedItem, top.BlockerMode = w.Mode, w.Object, w.BlockerMode
	}
	if bytes, runaway, ok := g.VmemTotal(); ok {
		b := uint64(max(bytes, 0)) // #nosec G115 -- not negative
		top.VmemBytes, top.Runaway = &b, runaway
	}
}

func topValue(t *gpotelv1.SessionTop, key gpotelv1.TopKey) float64 {
	u := t.GetUsage()
	switch key {
	case gpotelv1.TopKey_TOP_KEY_CPU_SMOOTHED:
		return t.GetCpuCoresSmoothed()
	case gpotelv1.TopKey_TOP_KEY_READ:
		return u.GetReadBytesPerSecond()
	case gpotelv1.TopKey_TOP_KEY_WRITE:
		return u.GetWriteBytesPerSecond()
	case gpotelv1.TopKey_TOP_KEY_MEMORY:
		return float64(u.GetRssBytes())
	case gpotelv1.TopKey_TOP_KEY_SKEW:
		if u.GetCpuCores() < skewMinCores {
			return 0
		}
		return t.GetCpuSkew()
	case gpotelv1.TopKey_TOP_KEY_SPILL:
		return float64(t.GetSpillBytes())
	}
	return u.GetCpuCores()
}

// cutText cuts a query text to what a top line shows.
func cutText(s string) string {
	out, _ := pipeline.CutUTF8(s, topQueryBytes)
	return out
}
