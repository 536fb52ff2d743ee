package sessionstateexporter

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	sc "github.com/gpotel/gpotel/internal/gpsemconv"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// queryTops keeps the query lines of the latest snapshot for GetClusterTop.
type queryTops struct {
	mu      sync.Mutex
	time    int64 // unix ns of the snapshot they came with
	queries []*gpotelv1.QueryTop
}

// consume replaces the queries with those of a batch that closes a snapshot
// (docs/pipeline.md, query figures); other batches leave them alone.
func (q *queryTops) consume(md pmetric.Metrics) {
	var at int64
	var queries []*gpotelv1.QueryTop
	closing := false
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		rm := rms.At(i)
		switch strAttr(rm.Resource().Attributes(), sc.AttrResourceKind) {
		case sc.KindSnapshot:
			closing = true
			at = int64(firstPointTime(rm)) //nolint:gosec // nanoseconds since 1970 fit int64 until 2262
		case sc.KindQuery:
			if qt, ok := parseQueryTop(rm); ok {
				queries = append(queries, qt)
			}
		}
	}
	if !closing {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if at > q.time { // a replayed or late snapshot must not replace a newer one
		q.time, q.queries = at, queries
	}
}

func (q *queryTops) get() []*gpotelv1.QueryTop {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queries // never changed once stored: readers share it
}

// parseQueryTop reads one query resource as a top line; ok is false without its identity.
func parseQueryTop(rm pmetric.ResourceMetrics) (*gpotelv1.QueryTop, bool) {
	attrs := rm.Resource().Attributes()
	tmID, okT := intAttr(attrs, sc.AttrTmID)
	sessID, okS := intAttr(attrs, sc.AttrSessionID)
	if !okT || !okS {
		return nil, false
	}
	qt := &gpotelv1.QueryTop{TmId: tmID, SessId: sessID, Query: cutUTF8(strAttr(attrs, sc.AttrDBQueryText), topQueryBytes), Usage: &gpotelv1.Usage{}}
	if ccnt, ok := intAttr(attrs, sc.AttrQueryCommandCount); ok {
		qt.CommandCount = &ccnt
	}
	if start, err := time.Parse(time.RFC3339Nano, strAttr(attrs, sc.AttrQueryStart)); err == nil {
		qt.StartUnixNano = start.UnixNano()
	}
	type hostIO struct{ cpu, read, write float64 }
	hosts := map[string]*hostIO{}
	on := func(dp pmetric.NumberDataPoint) *hostIO {
		name := strAttr(dp.Attributes(), sc.AttrHostName)
		if hosts[name] == nil {
			hosts[name] = &hostIO{}
		}
		return hosts[name]
	}
	hottest := func(dp pmetric.NumberDataPoint, dst **int32) {
		if v := pointFloat(dp); v >= 0 && v <= math.MaxInt32 {
			seg := int32(v)
			*dst = &seg
		}
	}
	forEachMetric(rm, func(m pmetric.Metric) {
		pts := numberPoints(m)
		for k := range pts.Len() {
			dp := pts.At(k)
			v := pointFloat(dp)
			switch m.Name() {
			case sc.QueryMetric(sc.MetricSessionCPUTime):
				qt.CpuSeconds += max(v, 0)
			case sc.QueryMetric(sc.MetricSessionDiskIO):
				setDirection(dp.Attributes(), pointUint(dp), &qt.ReadBytes, &qt.WriteBytes)
			case sc.MetricQueryDuration:
				qt.DurationSeconds = max(v, 0)
			case sc.MetricQueryCompleted:
				qt.Completed = v != 0
			case sc.MetricQueryPartial:
				qt.Partial = v != 0
			case sc.QueryMetric(sc.MetricSessionSkewRatio), sc.QueryMetric(sc.MetricSessionSkewMaxOverAvg), sc.QueryMetric(sc.MetricSessionSkewHottestSegment):
				skew, overAvg, hot := &qt.CpuSkew, &qt.CpuMaxOverAvg, &qt.CpuHottestSegment
				switch strAttr(dp.Attributes(), sc.AttrSkewFigure) {
				case sc.SkewFigureCPU:
				case sc.SkewFigureIO:
					skew, overAvg, hot = &qt.IoSkew, &qt.IoMaxOverAvg, &qt.IoHottestSegment
				default:
					continue
				}
				switch m.Name() {
				case sc.QueryMetric(sc.MetricSessionSkewRatio):
					*skew = v
				case sc.QueryMetric(sc.MetricSessionSkewMaxOverAvg):
					*overAvg = v
				default:
					hottest(dp, hot)
				}
			case sc.MetricQuerySegmentCPUTime:
				on(dp).cpu += max(v, 0)
			case sc.MetricQuerySegmentDiskIO:
				switch strAttr(dp.Attributes(), sc.AttrDirection) {
				case sc.DirectionRead:
					on(dp).read += max(v, 0)
				case sc.DirectionWrite:
					on(dp).write += max(v, 0)
				}
			}
		}
	})
	rate := func(v float64) float64 {
		if qt.DurationSeconds > 0 {
			return v / qt.DurationSeconds
		}
		return 0
	}
	qt.Usage.CpuCores = rate(qt.CpuSeconds)
	qt.Usage.ReadBytesPerSecond = rate(float64(qt.ReadBytes))
	qt.Usage.WriteBytesPerSecond = rate(float64(qt.WriteBytes))
	for name, h := range hosts {
		qt.Hosts = append(qt.Hosts, &gpotelv1.SessionHostUsage{Hostname: name, Usage: &gpotelv1.Usage{
			CpuCores: rate(h.cpu), ReadBytesPerSecond: rate(h.read), WriteBytesPerSecond: rate(h.write),
		}})
	}
	slices.SortFunc(qt.Hosts, func(a, b *gpotelv1.SessionHostUsage) int { return strings.Compare(a.GetHostname(), b.GetHostname()) })
	return qt, true
}

// topQueries ranks queries by key, largest first, and keeps limit of them.
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
		case gpotelv1.TopKey_TOP_KEY_SKEW:
			if u.GetCpuCores() < skewMinCores {
				return 0
			}
			return q.GetCpuSkew()
		}
		return u.GetCpuCores()
	}
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b *gpotelv1.QueryTop) int {
		return cmp.Or(cmp.Compare(value(b), value(a)),
			cmp.Compare(a.GetTmId(), b.GetTmId()),
			cmp.Compare(a.GetSessId(), b.GetSessId()),
			cmp.Compare(a.GetStartUnixNano(), b.GetStartUnixNano()))
	})
	return sorted[:min(limit, len(sorted))]
}
