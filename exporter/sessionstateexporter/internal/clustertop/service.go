// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package clustertop serves gpotel.v1.ClusterTop for the sessionstate
// exporter: the newest snapshot's hosts (their usage, CPUs and pressure),
// cluster totals, and its sessions and queries ranked by a key.
package clustertop

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
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/view"
	"github.com/gpotel/gpotel/internal/clockstep"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/output"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// GetClusterTop's bounds: a response holds at most MaxSessions sessions,
// each with at most one breakdown line per host and QueryBytes of text.
const (
	DefaultSessions = 20
	MaxSessions     = 100
	QueryBytes      = 200
	// skewMinCores: below this, a session's skew is noise and ranks as 0.
	skewMinCores = 0.05
)

// Lines are the newest snapshot's session and query lines, not ranked.
type Lines struct {
	// Time is the snapshot's; zero before the first.
	Time time.Time
	// Sessions are its live sessions' lines.
	Sessions []*gpotelv1.SessionTop
	// Queries are its queries' lines.
	Queries []*gpotelv1.QueryTop
}

// Views gives the newest view of the sessions and queries.
type Views interface {
	Load() *view.View
}

// Hosts keeps the latest snapshot's host figures for GetClusterTop.
type Hosts struct {
	mu     sync.Mutex
	time   int64 // unix ns
	tau    float64
	byName map[string]*gpotelv1.HostTop
}

// Consume replaces the figures with a closing batch's (nil: the batch
// closes no snapshot).
func (h *Hosts) Consume(tops *output.HostTops) {
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

// Service is gpotel.v1.ClusterTop over the session store, the host
// figures, the query figures and the host pressure.
type Service struct {
	gpotelv1.UnimplementedClusterTopServer
	sessions Views
	hosts    *Hosts
	pressure *pressure.Store
	window   time.Duration
}

// NewService ranks the lines of sessions beside the hosts' figures and
// pressure; window is the last_metrics window the rates are over.
func NewService(sessions Views, hosts *Hosts, pressure *pressure.Store, window time.Duration) *Service {
	return &Service{sessions: sessions, hosts: hosts, pressure: pressure, window: window}
}

// GetClusterTop answers the newest snapshot's hosts, sessions and queries.
func (s *Service) GetClusterTop(_ context.Context, req *gpotelv1.GetClusterTopRequest) (*gpotelv1.GetClusterTopResponse, error) {
	key := req.GetKey()
	if _, known := gpotelv1.TopKey_name[int32(key)]; !known || key == gpotelv1.TopKey_TOP_KEY_UNSPECIFIED {
		key = gpotelv1.TopKey_TOP_KEY_CPU
	}
	limit := int(req.GetLimit())
	if limit == 0 {
		limit = DefaultSessions
	}
	limit = min(limit, MaxSessions)

	resp := &gpotelv1.GetClusterTopResponse{WindowSeconds: s.window.Seconds(), Key: key, Cluster: &gpotelv1.ClusterTotals{Usage: &gpotelv1.Usage{}}}
	s.addHosts(resp)

	lines := linesOf(s.sessions.Load())
	if resp.SnapshotTimeUnixNano == 0 && !lines.Time.IsZero() {
		resp.SnapshotTimeUnixNano = lines.Time.UnixNano()
	}
	type ranked struct {
		top   *gpotelv1.SessionTop
		value float64
	}
	var all []ranked
	for _, top := range lines.Sessions {
		if top.GetSystem() && !req.GetShowSystem() {
			continue
		}
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
	resp.Cluster.Queries = uint32(min(len(lines.Queries), math.MaxUint32)) //nolint:gosec // bounded above
	resp.Queries = topQueries(lines.Queries, key, limit)
	return resp, nil
}

// addHosts fills the hosts, their pressure and the cluster totals.
func (s *Service) addHosts(resp *gpotelv1.GetClusterTopResponse) {
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

// CutText cuts a query text to what a top line shows.
func CutText(s string) string {
	out, _ := pipeline.CutUTF8(s, QueryBytes)
	return out
}

// topQueries ranks the queries by key, largest first, and keeps limit of them.
func topQueries(all []*gpotelv1.QueryTop, key gpotelv1.TopKey, limit int) []*gpotelv1.QueryTop {
	value := func(q *gpotelv1.QueryTop) float64 {
		u := q.GetUsage()
		switch key {
		case gpotelv1.TopKey_TOP_KEY_READ:
			return u.GetReadBytesPerSecond()
		case gpotelv1.TopKey_TOP_KEY_WRITE:
			return u.GetWriteBytesPerSecond()
		case gpotelv1.TopKey_TOP_KEY_MEMORY:
			return 0 // no memory figure per query
		case gpotelv1.TopKey_TOP_KEY_SPILL:
			return float64(q.GetSpillBytesMax())
		case gpotelv1.TopKey_TOP_KEY_SKEW:
			if u.GetCpuCores() < skewMinCores {
				return 0
			}
			return q.GetCpuSkew()
		}
		return u.GetCpuCores()
	}
	slices.SortFunc(all, func(a, b *gpotelv1.QueryTop) int {
		return cmp.Or(cmp.Compare(value(b), value(a)),
			cmp.Compare(a.GetTmId(), b.GetTmId()),
			cmp.Compare(a.GetSessId(), b.GetSessId()),
			cmp.Compare(a.GetStartUnixNano(), b.GetStartUnixNano()),
			cmp.Compare(a.GetCommandCount(), b.GetCommandCount()))
	})
	return all[:min(limit, len(all))]
}
