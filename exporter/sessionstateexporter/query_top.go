// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"math"
	"slices"
	"strings"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/clustertop"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// queryTop is one query's GetClusterTop line from the store's query record.
func queryTop(q *queryRecord) *gpotelv1.QueryTop {
	st := q.stat
	qt := &gpotelv1.QueryTop{
		TmId: q.id.session.TmID, SessId: q.id.session.ID, StartUnixNano: q.start.UnixNano(),
		Query: clustertop.CutText(q.text), Completed: q.completed, Partial: st.GetPartial(),
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
