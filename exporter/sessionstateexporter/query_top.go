// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"cmp"
	"math"
	"slices"
	"strings"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// queryTop is one query's GetClusterTop line from the store's query record.
func queryTop(q *queryRecord) *gpotelv1.QueryTop {
	st := q.stat
	qt := &gpotelv1.QueryTop{
		TmId: q.id.session.TmID, SessId: q.id.session.ID, StartUnixNano: q.start.UnixNano(),
		Query: cutText(q.text), Completed: q.completed, Partial: st.GetPartial(),
		DurationSeconds: max(q.duration, 0), CpuSeconds: st.GetRunningTimeSeconds(),
		ReadBytes: st.GetReadBytes(), WriteBytes: st.GetWriteBytes(),
		CpuSkew: st.GetCpuSkew(), CpuMaxOverAvg: st.GetCpuMaxOverAvg(), CpuHottestSegment: st.CpuHottestSegment,
		IoSkew: st.GetIoSkew(), IoMaxOverAvg: st.GetIoMaxOverAvg(), IoHottestSegment: st.IoHottestSegment,
	}
	if q.id.ccnt != 0 {
		qt.CommandCount = &q.id.ccnt
	}
	if sp := q.spill; sp != nil {
		qt.SpillBytes, qt.SpillFiles, qt.SpillBytesMax = uint64(max(sp.Bytes, 0)), uint32(min(max(sp.Files, 0), math.MaxUint32)), uint64(max(sp.MaxBytes, 0)) // #nosec G115 -- clamped
	}
	// Averages over the query's duration; 0 for a query of no duration.
	rate := func(v float64) float64 {
		if qt.DurationSeconds > 0 {
			return v / qt.DurationSeconds
		}
		return 0
	}
	qt.Usage = &gpotelv1.Usage{
		CpuCores: rate(qt.CpuSeconds), ReadBytesPerSecond: rate(float64(qt.ReadBytes)), WriteBytesPerSecond: rate(float64(qt.WriteBytes)),
	}
	byHost := map[string]*gpotelv1.SessionHostUsage{}
	for _, sm := range q.segments {
		seg := sm.GetSegmentMetrics().GetSystemStat()
		h := byHost[sm.GetHostname()]
		if h == nil {
			h = &gpotelv1.SessionHostUsage{Hostname: sm.GetHostname(), Usage: &gpotelv1.Usage{}}
			byHost[sm.GetHostname()] = h
			qt.Hosts = append(qt.Hosts, h)
		}
		h.Usage.CpuCores += rate(seg.GetRunningTimeSeconds())
		h.Usage.ReadBytesPerSecond += rate(float64(seg.GetReadBytes()))
		h.Usage.WriteBytesPerSecond += rate(float64(seg.GetWriteBytes()))
	}
	slices.SortFunc(qt.Hosts, func(a, b *gpotelv1.SessionHostUsage) int { return strings.Compare(a.GetHostname(), b.GetHostname()) })
	return qt
}

// topQueries ranks the view's queries by key, largest first, and keeps limit of them.
func topQueries(v *view, key gpotelv1.TopKey, limit int) []*gpotelv1.QueryTop {
	all := make([]*gpotelv1.QueryTop, 0, len(v.queries))
	for _, q := range v.queries {
		all = append(all, queryTop(q))
	}
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
