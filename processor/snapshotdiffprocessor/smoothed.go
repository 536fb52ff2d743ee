// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"math"
	"time"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/output"
)

// Smoothed quantities: rates over the last step and the memory level.
const (
	avgCPU    = iota // cores (CPU seconds per second)
	avgRead          // disk read bytes per second
	avgWrite         // disk write bytes per second
	avgMemory        // rss bytes
	numAvg
)

// averages are the smoothed quantities at one time constant.
type averages [numAvg]float64

// smoother keeps exponentially weighted averages per session, per host and,
// as the sum of the hosts', for the cluster. Each update weighs the new
// input by the time elapsed since the previous one (1 - e^(-dt/tau)), so a
// missed or late snapshot neither speeds up nor slows down the decay.
type smoother struct {
	constants []int64 // ns
	sessions  map[pipeline.SessionKey][]averages
	hosts     [][]averages // by host row
	// hostUpdated is the time of the host's last update; 0: not yet seen.
	// hostUpdatedBefore is the time of the update before that one.
	hostUpdated, hostUpdatedBefore []int64
}

// smoothedFigures are the smoothed averages after the newest snapshot, one
// []averages per entity, indexed like smoother.constants.
type smoothedFigures struct {
	sessions map[pipeline.SessionKey][]averages
	hosts    []hostAverages // in host-name order of first sighting
	cluster  []averages
}

type hostAverages struct {
	host string
	avgs []averages
}

func newSmoother(constants []time.Duration) *smoother {
	sm := &smoother{sessions: map[pipeline.SessionKey][]averages{}}
	for _, c := range constants {
		sm.constants = append(sm.constants, int64(c))
	}
	return sm
}

// restartClock keeps the averages and forgets when each host was last
// updated: after a clock step, the next snapshot is every host's baseline.
func (sm *smoother) restartClock() {
	clear(sm.hostUpdated)
}

// decay moves avgs towards in by the share dt/tau of each time constant.
func (sm *smoother) decay(avgs []averages, in *averages, dt int64) {
	for k, tau := range sm.constants {
		keep := math.Exp(-float64(dt) / float64(tau))
		a := &avgs[k]
		for q := range a {
			a[q] = a[q]*keep + in[q]*(1-keep)
		}
	}
}

// update takes in the newest committed snapshot of s and returns a copy of
// every average for output.
func (sm *smoother) update(s *store) *smoothedFigures {
	newest := s.windows.retained[len(s.windows.retained)-1]
	var prevTime int64
	if len(s.windows.retained) > 1 {
		prevTime = s.windows.retained[len(s.windows.retained)-2].time
	}
	for len(sm.hosts) < len(s.hosts.names) {
		sm.hosts = append(sm.hosts, make([]averages, len(sm.constants)))
		sm.hostUpdated = append(sm.hostUpdated, 0)
		sm.hostUpdatedBefore = append(sm.hostUpdatedBefore, 0)
	}

	// Per session and per host: what the newest snapshot's steps used.
	sessIn := make([]averages, len(s.sessions.keys))
	hostIn := make([]averages, len(s.hosts.names))
	buf := newest.steps
	for _, row := range newest.rows {
		var st pipeline.Counters
		buf, _ = nextStep(buf, &st)
		clampSteps(&st)
		key := &s.procs.keys[row]
		if s.procs.first[row] == newest.seq && !sm.countsFromBirth(s, row, prevTime) {
			continue
		}
		in := [numAvg]float64{
			avgCPU:   float64(st[pipeline.CPUUser] + st[pipeline.CPUSystem]),
			avgRead:  float64(st[pipeline.DiskRead]),
			avgWrite: float64(st[pipeline.DiskWrite]),
		}
		for q := range avgMemory {
			sessIn[key.session][q] += in[q]
			hostIn[key.host][q] += in[q]
		}
	}
	for i := range s.memBySH {
		m := &s.memBySH[i]
		rss := float64(m.memory[pipeline.MemRSS])
		sessIn[m.session][avgMemory] += rss
		hostIn[m.host][avgMemory] += rss
	}

	// Sessions share the snapshot's interval; a host that missed snapshots
	// is brought up to date over the whole time since it last answered.
	if dt := newest.time - prevTime; prevTime > 0 && dt > 0 {
		for key, row := range s.sessions.index {
			avgs, ok := sm.sessions[key]
			if !ok {
				avgs = make([]averages, len(sm.constants))
				sm.sessions[key] = avgs
			}
			in := sessIn[row]
			toRates(&in, dt)
			sm.decay(avgs, &in, dt)
		}
	}
	for key := range sm.sessions {
		if _, ok := s.sessions.index[key]; !ok {
			delete(sm.sessions, key)
		}
	}
	for h := range s.hosts.names {
		if s.hosts.down[h] {
			continue // not answering is not idle: hold its averages
		}
		since := sm.hostUpdated[h]
		sm.hostUpdatedBefore[h], sm.hostUpdated[h] = since, newest.time
		if since == 0 {
			continue // its first sighting is its baseline
		}
		in := hostIn[h]
		toRates(&in, newest.time-since)
		sm.decay(sm.hosts[h], &in, newest.time-since)
	}
	return sm.figures(s)
}

// countsFromBirth tells whether the first sighting of a process, which
// carries everything it used since its birth, belongs to the interval just
// ended, as it does in the windows. A live process born before its host's
// previous answer used part of that before any interval we saw: it counts
// from now on. An exit record of a process no scrape saw belongs to the
// interval if it was born after the host's answer before last: a scrape's
// snapshot time follows its catalog read, so a backend born between the two
// was in no snapshot, and exited after the previous scrape's records were
// fetched. The postmasters' unrecorded CPU starts at the receiver's first
// reading, a scrape before its first point.
func (sm *smoother) countsFromBirth(s *store, row uint32, prevTime int64) bool {
	key := &s.procs.keys[row]
	since, before := sm.hostUpdated[key.host], sm.hostUpdatedBefore[key.host]
	if since == 0 {
		since = prevTime
	}
	switch {
	case s.sessions.keys[key.session].ID == unrecordedSession:
		return true
	case s.procs.gone[row]:
		return key.creation >= before
	}
	return key.creation >= since
}

// toRates turns the step sums of an interval of dt ns into per-second rates.
func toRates(in *averages, dt int64) {
	for q := range avgMemory {
		in[q] /= float64(dt)
	}
	in[avgRead] *= 1e9
	in[avgWrite] *= 1e9
}

func (sm *smoother) figures(s *store) *smoothedFigures {
	f := &smoothedFigures{
		sessions: make(map[pipeline.SessionKey][]averages, len(sm.sessions)),
		cluster:  make([]averages, len(sm.constants)),
	}
	for key, avgs := range sm.sessions {
		f.sessions[key] = append([]averages(nil), avgs...)
	}
	for h, avgs := range sm.hosts {
		if sm.hostUpdated[h] == 0 {
			continue
		}
		f.hosts = append(f.hosts, hostAverages{host: s.hosts.names[h], avgs: append([]averages(nil), avgs...)})
		for k := range avgs {
			for q := range avgs[k] {
				f.cluster[k][q] += avgs[k][q]
			}
		}
	}
	return f
}

// outputAverages are the averages per time constant as the output writes them.
func outputAverages(avgs []averages) []output.Averages {
	out := make([]output.Averages, len(avgs))
	for k, a := range avgs {
		out[k] = output.Averages{CPU: a[avgCPU], Read: a[avgRead], Write: a[avgWrite], Memory: a[avgMemory]}
	}
	return out
}
