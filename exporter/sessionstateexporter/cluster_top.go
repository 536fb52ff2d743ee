// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"math"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/clustertop"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// TopLines are the newest view's lines for GetClusterTop: its live
// sessions' and its queries'.
func (st *sessionStore) TopLines() clustertop.Lines {
	v := st.load()
	lines := clustertop.Lines{Time: v.time, Queries: make([]*gpotelv1.QueryTop, 0, len(v.queries))}
	for _, s := range v.sessions {
		if v.live(s) {
			lines.Sessions = append(lines.Sessions, sessionTop(s))
		}
	}
	for _, q := range v.queries {
		lines.Queries = append(lines.Queries, queryTop(q))
	}
	return lines
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
		Query:  clustertop.CutText(st.GetRunningQueryInfo().GetQueryText()),
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
