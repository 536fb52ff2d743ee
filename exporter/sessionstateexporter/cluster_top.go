package sessionstateexporter

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"google.golang.org/protobuf/proto"

	"github.com/gpotel/gpotel/internal/clockstep"
	sc "github.com/gpotel/gpotel/internal/gpsemconv"
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
func (h *hostTops) consume(md pmetric.Metrics) {
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		rm := rms.At(i)
		if strAttr(rm.Resource().Attributes(), sc.AttrResourceKind) != sc.KindSnapshot {
			continue
		}
		hosts := map[string]*gpotelv1.HostTop{}
		host := func(name string) *gpotelv1.HostTop {
			if hosts[name] == nil {
				hosts[name] = &gpotelv1.HostTop{Hostname: name}
			}
			return hosts[name]
		}
		usage := func(name string) *gpotelv1.Usage {
			h := host(name)
			if h.Usage == nil {
				h.Usage = &gpotelv1.Usage{}
			}
			return h.Usage
		}
		// Host averages at the shortest time constant: the closest to "now".
		tau := math.Inf(1)
		forEachMetric(rm, func(m pmetric.Metric) {
			switch m.Name() {
			case sc.MetricHostCPUUsageSmoothed, sc.MetricHostDiskIORateSmoothed, sc.MetricHostMemoryUsageSmoothed:
				pts := numberPoints(m)
				for k := range pts.Len() {
					if d, err := time.ParseDuration(strAttr(pts.At(k).Attributes(), sc.AttrTimeConstant)); err == nil && d > 0 {
						tau = min(tau, d.Seconds())
					}
				}
			}
		})
		forEachMetric(rm, func(m pmetric.Metric) {
			pts := numberPoints(m)
			for k := range pts.Len() {
				dp := pts.At(k)
				a := dp.Attributes()
				name := strAttr(a, sc.AttrHostName)
				if name == "" {
					continue
				}
				switch m.Name() {
				case sc.MetricHostUp:
					host(name).Up = pointFloat(dp) == 1
					continue
				case sc.MetricHostProcesses:
					usage(name).Processes = uint32(min(pointUint(dp), math.MaxUint32))
					continue
				case sc.MetricHostCPUUsageSmoothed, sc.MetricHostDiskIORateSmoothed, sc.MetricHostMemoryUsageSmoothed:
				default:
					continue
				}
				if d, err := time.ParseDuration(strAttr(a, sc.AttrTimeConstant)); err != nil || d.Seconds() != tau {
					continue
				}
				u, v := usage(name), max(pointFloat(dp), 0)
				switch m.Name() {
				case sc.MetricHostCPUUsageSmoothed:
					u.CpuCores = v
				case sc.MetricHostMemoryUsageSmoothed:
					u.RssBytes = pointUint(dp)
				case sc.MetricHostDiskIORateSmoothed:
					switch strAttr(a, sc.AttrDirection) {
					case sc.DirectionRead:
						u.ReadBytesPerSecond = v
					case sc.DirectionWrite:
						u.WriteBytesPerSecond = v
					}
				}
			}
		})
		if math.IsInf(tau, 1) {
			tau = 0
		}
		at := int64(firstPointTime(rm)) //nolint:gosec // nanoseconds since 1970 fit int64 until 2262
		h.mu.Lock()
		defer h.mu.Unlock()
		// A replayed or late snapshot must not replace a newer one, unless the
		// wall clock went back.
		if at > h.time || clockstep.SteppedBack(time.Unix(0, h.time), time.Unix(0, at)) {
			h.time, h.tau, h.byName = at, tau, hosts
		}
		return
	}
}

// sessionHostFigures collects a session's per-host figures of the
// last_metrics window (docs/pipeline.md, per-host session figures).
type sessionHostFigures struct {
	byName map[string]*gpotelv1.SessionHostUsage
}

// add reads m if it is a per-host session figure and reports whether it was.
func (sh *sessionHostFigures) add(m pmetric.Metric, p *snapshotParser) bool {
	switch m.Name() {
	case sc.MetricSessionHostCPUUsage, sc.MetricSessionHostDiskIORate, sc.MetricSessionHostMemory, sc.MetricSessionHostProcesses:
	default:
		return false
	}
	pts := numberPoints(m)
	for k := range pts.Len() {
		dp := pts.At(k)
		a := dp.Attributes()
		name := strAttr(a, sc.AttrHostName)
		windowed := m.Name() == sc.MetricSessionHostCPUUsage || m.Name() == sc.MetricSessionHostDiskIORate
		if name == "" || windowed && p.windowOf(a) != windowLast {
			continue
		}
		if sh.byName == nil {
			sh.byName = map[string]*gpotelv1.SessionHostUsage{}
		}
		h := sh.byName[name]
		if h == nil {
			h = &gpotelv1.SessionHostUsage{Hostname: name, Usage: &gpotelv1.Usage{}}
			sh.byName[name] = h
		}
		v := max(pointFloat(dp), 0)
		switch m.Name() {
		case sc.MetricSessionHostCPUUsage:
			h.Usage.CpuCores = v
		case sc.MetricSessionHostMemory:
			h.Usage.RssBytes = pointUint(dp)
		case sc.MetricSessionHostProcesses:
			h.Usage.Processes = uint32(min(pointUint(dp), math.MaxUint32))
		case sc.MetricSessionHostDiskIORate:
			switch strAttr(a, sc.AttrDirection) {
			case sc.DirectionRead:
				h.Usage.ReadBytesPerSecond = v
			case sc.DirectionWrite:
				h.Usage.WriteBytesPerSecond = v
			}
		}
	}
	return true
}

// list is the breakdown in host-name order; nil when there is none.
func (sh *sessionHostFigures) list() []*gpotelv1.SessionHostUsage {
	if len(sh.byName) == 0 {
		return nil
	}
	out := make([]*gpotelv1.SessionHostUsage, 0, len(sh.byName))
	for _, h := range sh.byName {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b *gpotelv1.SessionHostUsage) int { return strings.Compare(a.GetHostname(), b.GetHostname()) })
	return out
}

// clusterTopService is gpotel.v1.ClusterTop over the session store, the
// host figures, the query figures and the host pressure.
type clusterTopService struct {
	gpotelv1.UnimplementedClusterTopServer
	sessions *sessionStore
	hosts    *hostTops
	pressure *pressureStore
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
	for _, hp := range s.pressure.get().GetHosts() {
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
	for _, h := range resp.Hosts {
		h.Pressure = stalls[h.GetHostname()]
		c.Hosts++
		if h.GetUp() {
			c.HostsUp++
		}
		if u := h.GetUsage(); u != nil {
			c.Usage.CpuCores += u.GetCpuCores()
			c.Usage.ReadBytesPerSecond += u.GetReadBytesPerSecond()
			c.Usage.WriteBytesPerSecond += u.GetWriteBytesPerSecond()
			c.Usage.RssBytes += u.GetRssBytes()
			c.Usage.Processes += u.GetProcesses()
		}
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
		Query:  cutUTF8(st.GetRunningQueryInfo().GetQueryText(), topQueryBytes),
		System: ss.system, Partial: last.GetPartial(),
		Usage: &gpotelv1.Usage{
			CpuCores:            rate(last.GetUserTimeSeconds() + last.GetKernelTimeSeconds()),
			ReadBytesPerSecond:  rate(float64(last.GetReadBytes())),
			WriteBytesPerSecond: rate(float64(last.GetWriteBytes())),
			RssBytes:            last.GetRss(),
			Processes:           last.GetProcesses(),
		},
		CpuSkew: last.GetCpuSkew(), CpuMaxOverAvg: last.GetCpuMaxOverAvg(), CpuHottestSegment: last.CpuHottestSegment,
		IoSkew: last.GetIoSkew(), IoMaxOverAvg: last.GetIoMaxOverAvg(), IoHottestSegment: last.IoHottestSegment,
		Hosts: ss.hosts,
	}
	if avgs := st.GetProcAvg(); len(avgs) > 0 {
		top.CpuCoresSmoothed = avgs[0].GetCpuCores() // shortest time constant first
	}
	return top
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
	}
	return u.GetCpuCores()
}

// cutUTF8 cuts s to at most n bytes without splitting a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
