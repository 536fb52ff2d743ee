// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"slices"
	"strings"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/output"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor/internal/querylife"
)

// The figures of a snapshot as the output writes them: the cluster's,
// each session's and each query's.

// outputSession is one session's figures as the output writes them; a
// session with no process gets zeros.
func outputSession(f *figures, key pipeline.SessionKey) *output.SessionFigures {
	sf := f.session(key)
	out := &output.SessionFigures{Windows: make([]output.WindowFigures, len(f.windows))}
	for w := range f.windows {
		wf := &out.Windows[w]
		wf.Span = f.windows[w].span
		if sf.known {
			wf.Deltas, wf.Partial = f.windows[w].deltas[sf.row], f.windows[w].partial[sf.row]
		}
	}
	out.Known = pipeline.EveryCounter // a session no process has
	if sf.known {
		out.Known = f.known[sf.row]
		out.Lifetime, out.LifetimePartial = f.lifetime[sf.row], f.lifetimePartial[sf.row]
		out.Processes, out.Hosts = int64(f.processes[sf.row]), int64(f.hosts[sf.row])
		out.MemoryCluster, out.MemoryMaxHost = f.memoryCluster[sf.row], f.memoryMaxHost[sf.row]
	}
	if f.smoothed != nil {
		avgs := f.smoothed.sessions[key]
		if avgs == nil {
			avgs = make([]averages, len(f.smoothed.cluster)) // one per time constant
		}
		out.Smoothed = outputAverages(avgs)
	}
	if sf.known && f.segments != nil {
		sessionSegments(out, f, sf.row)
	}
	return out
}

// outputCluster is the snapshot resource's figures: per window the
// counters of every process, and of the unattributed exits and the
// postmasters' unrecorded CPU per segment; the smoothed ones.
func outputCluster(f *figures) *output.ClusterFigures {
	out := &output.ClusterFigures{}
	for w := range f.windows {
		wf := &f.windows[w]
		out.Windows = append(out.Windows, output.ClusterWindow{
			Span: wf.span, Cluster: wf.cluster,
			Unattributed: segmentCounters(wf.unattributed, f.hostNames),
			Unrecorded:   segmentCounters(wf.unrecorded, f.hostNames),
		})
	}
	if s := f.smoothed; s != nil {
		for _, h := range s.hosts {
			out.Hosts = append(out.Hosts, output.HostAverages{Host: h.host, Avgs: outputAverages(h.avgs)})
		}
		out.Cluster = outputAverages(s.cluster)
	}
	return out
}

// sessionSegments adds a session's skew figures and, with
// emit_session_host_figures, its per-host figures.
func sessionSegments(out *output.SessionFigures, f *figures, row uint32) {
	sf := f.segments
	for w := range f.windows {
		out.Skews = append(out.Skews, sessionSkews(sf.windows[w][row]))
	}
	out.Skews = append(out.Skews, sessionSkews(sf.lifetime[row]))
	if sf.hosts == nil {
		return
	}
	for w := range f.windows {
		span := float64(f.windows[w].span) / 1e9
		rate := func(v float64) float64 {
			if span <= 0 {
				return 0
			}
			return v / span
		}
		byHost := map[uint32]*segmentUse{}
		var hosts []uint32
		for _, u := range sf.windows[w][row] {
			h := byHost[u.At.Host]
			if h == nil {
				h = &segmentUse{}
				byHost[u.At.Host] = h
				hosts = append(hosts, u.At.Host)
			}
			h.CPU += u.CPU
			h.Read += u.Read
			h.Written += u.Written
		}
		slices.SortFunc(hosts, func(a, b uint32) int { return strings.Compare(sf.hostNames[a], sf.hostNames[b]) })
		rates := make([]output.HostRate, 0, len(hosts))
		for _, h := range hosts {
			u := byHost[h]
			rates = append(rates, output.HostRate{Host: sf.hostNames[h], CPU: rate(float64(u.CPU) / 1e9),
				Read: rate(float64(u.Read)), Write: rate(float64(u.Written))})
		}
		out.HostRates = append(out.HostRates, rates)
	}
	out.HostNow = []output.HostNow{}
	for _, h := range sf.hosts[row] {
		out.HostNow = append(out.HostNow, output.HostNow{Host: sf.hostNames[h.host], RSS: h.rss, Processes: int64(h.processes)})
	}
}

// outputQuery is one query as the output writes it; text is its text as
// written, nil: none (queries::text off).
func outputQuery(q *querylife.Figures, text func(string) *string) *output.QueryFigures {
	out := &output.QueryFigures{Session: q.Session, CommandCount: q.CommandCount, Start: q.Start, End: q.End,
		Totals: q.Totals, Known: q.Known, Partial: q.Partial, Skew: querySkews(q.Segments), Spill: q.Spill, Segments: q.Segments}
	if text != nil {
		out.Text = text(q.Text)
	}
	return out
}

// textCutter is a query's text as the output writes it: cut to
// queries::text_max_length (maxLen).
func textCutter(maxLen int) func(string) *string {
	return func(text string) *string {
		cut, _ := pipeline.CutUTF8(text, maxLen)
		return &cut
	}
}
