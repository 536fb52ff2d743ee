// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package clustertop

import (
	"math"
	"slices"
	"strings"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/view"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// linesOf are v's lines for GetClusterTop: its live sessions' and its
// queries'.
func linesOf(v *view.View) Lines {
	lines := Lines{Time: v.Time, Queries: make([]*gpotelv1.QueryTop, 0, len(v.Queries))}
	for _, s := range v.Sessions {
		if v.Live(s) {
			lines.Sessions = append(lines.Sessions, sessionTop(s))
		}
	}
	for _, q := range v.Queries {
		lines.Queries = append(lines.Queries, queryTop(q))
	}
	return lines
}

// sessionTop is one session's line: rates from its last_metrics window.
func sessionTop(ss *view.Session) *gpotelv1.SessionTop {
	st := ss.State
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
		Query:  CutText(st.GetRunningQueryInfo().GetQueryText()),
		System: ss.System, Own: ss.Own, Partial: last.GetPartial(),
		CpuSkew: last.GetCpuSkew(), CpuMaxOverAvg: last.GetCpuMaxOverAvg(),
		IoSkew: last.GetIoSkew(), IoMaxOverAvg: last.GetIoMaxOverAvg(),
		Hosts: ss.Hosts,
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
	addGreenplum(top, ss.Greenplum)
	return top
}

// addGreenplum puts the server's own figures of a session on its line.
func addGreenplum(top *gpotelv1.SessionTop, g *snapshot.GreenplumSession) {
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

// queryTop is one query's GetClusterTop line from the store's query record.
func queryTop(q *view.QueryRecord) *gpotelv1.QueryTop {
	st := q.Stat
	qt := &gpotelv1.QueryTop{
		TmId: q.ID.Session.TmID, SessId: q.ID.Session.ID, StartUnixNano: q.Start.UnixNano(),
		Query: CutText(q.Text), Completed: q.Completed, Partial: st.GetPartial(),
		DurationSeconds: max(q.Duration, 0), CpuSeconds: st.GetRunningTimeSeconds(),
		ReadBytes: st.GetReadBytes(), WriteBytes: st.GetWriteBytes(),
		CpuSkew: st.GetCpuSkew(), CpuMaxOverAvg: st.GetCpuMaxOverAvg(), CpuHottestSegment: st.CpuHottestSegment,
		IoSkew: st.GetIoSkew(), IoMaxOverAvg: st.GetIoMaxOverAvg(), IoHottestSegment: st.IoHottestSegment,
	}
	if q.ID.Ccnt != 0 {
		qt.CommandCount = &q.ID.Ccnt
	}
	if sp := q.Spill; sp != nil {
		qt.SpillBytes = uint64(max(sp.Bytes, 0))                      // #nosec G115 -- clamped
		qt.SpillFiles = uint32(min(max(sp.Files, 0), math.MaxUint32)) // #nosec G115 -- clamped
		qt.SpillBytesMax = uint64(max(sp.MaxBytes, 0))                // #nosec G115 -- clamped
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
	for _, sm := range q.Segments {
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
