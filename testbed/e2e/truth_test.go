// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/testbed/groundtruth"
)

// truthSample is one ground-truth reading of every watched pid at one moment.
type truthSample struct {
	at    time.Time
	procs map[int]groundtruth.Process
}

// truthSeries reads /proc for a fixed set of pids every period, independently
// of gpotel, so a figure for a snapshot at time T can be checked against the
// kernel's counters interpolated at T.
type truthSeries struct {
	pids []int

	mu      sync.Mutex
	samples []truthSample
	err     error

	stop chan struct{}
	done chan struct{}
}

func sampleTruth(pids []int, period time.Duration) *truthSeries {
	ts := &truthSeries{pids: pids, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(ts.done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			ts.readOnce()
			select {
			case <-ts.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return ts
}

func (ts *truthSeries) readOnce() {
	s := truthSample{procs: make(map[int]groundtruth.Process, len(ts.pids))}
	var errs []error
	for _, pid := range ts.pids {
		p, err := groundtruth.Read(pid)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue // exited: its last reading stands
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.procs[pid] = p
	}
	// The reading moment is the middle of the pass.
	s.at = time.Now()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.samples = append(ts.samples, s)
	if len(errs) > 0 && ts.err == nil {
		ts.err = errors.Join(errs...)
	}
}

func (ts *truthSeries) Stop() error {
	close(ts.stop)
	<-ts.done
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.err
}

func (ts *truthSeries) span() (first, last time.Time) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.samples) == 0 {
		return time.Time{}, time.Time{}
	}
	return ts.samples[0].at, ts.samples[len(ts.samples)-1].at
}

// cumulativeAt interpolates a cumulative counter, summed over pids, at t.
// A pid not yet born counts zero; one that has exited keeps its last value.
func (ts *truthSeries) cumulativeAt(t time.Time, pids []int, f func(groundtruth.Process) float64) (float64, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	i := sort.Search(len(ts.samples), func(i int) bool { return !ts.samples[i].at.Before(t) })
	if i == 0 || i == len(ts.samples) {
		return 0, fmt.Errorf("no ground truth around %s", t.Format(time.RFC3339Nano))
	}
	a, b := ts.samples[i-1], ts.samples[i]
	frac := float64(t.Sub(a.at)) / float64(b.at.Sub(a.at))
	total := 0.0
	for _, pid := range pids {
		va, vb := ts.lastValue(i-1, pid, f), ts.lastValue(i, pid, f)
		total += va + (vb-va)*frac
	}
	return total, nil
}

// lastValue is the pid's value in sample i, or in the newest earlier sample that has it.
func (ts *truthSeries) lastValue(i, pid int, f func(groundtruth.Process) float64) float64 {
	for ; i >= 0; i-- {
		if p, ok := ts.samples[i].procs[pid]; ok {
			return f(p)
		}
	}
	return 0
}

// gaugeRange is the smallest and largest value of a gauge summed over pids
// (and of its largest per-group sum) among the samples taken in [from, to].
func (ts *truthSeries) gaugeRange(from, to time.Time, groups map[string][]int, f func(groundtruth.Process) float64) (sumMin, sumMax, groupMin, groupMax float64, n int) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, s := range ts.samples {
		if s.at.Before(from) || s.at.After(to) {
			continue
		}
		sum, top := 0.0, 0.0
		for _, pids := range groups {
			g := 0.0
			for _, pid := range pids {
				if p, ok := s.procs[pid]; ok {
					g += f(p)
				}
			}
			sum += g
			top = max(top, g)
		}
		if n == 0 {
			sumMin, sumMax, groupMin, groupMax = sum, sum, top, top
		}
		sumMin, sumMax = min(sumMin, sum), max(sumMax, sum)
		groupMin, groupMax = min(groupMin, top), max(groupMax, top)
		n++
	}
	return
}

// apiPoller records every distinct SessionState the API serves, per sess_id.
type apiPoller struct {
	api yagpcc.GetGPInfoClient

	mu     sync.Mutex
	states map[int64][]*yagpcc.SessionState
	errs   int
	lastEr error
}

func dialAPI(t *testing.T, addr string) yagpcc.GetGPInfoClient {
	t.Helper()
	client, closeFn, err := DialAPI(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeFn)
	return client
}

// allSessions pages through GetGPSessions.
func allSessions(ctx context.Context, api yagpcc.GetGPInfoClient) ([]*yagpcc.SessionState, error) {
	req := &yagpcc.GetGPSessionsReq{ShowSystem: true, PageSize: 1000}
	var out []*yagpcc.SessionState
	for range 100 {
		// One page is quick; the bound only keeps a wedged server from hanging the test.
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		resp, err := api.GetGPSessions(cctx, req)
		cancel()
		if err != nil {
			return nil, err
		}
		out = append(out, resp.GetSessionsState()...)
		if resp.GetNextPageToken() == "" {
			return out, nil
		}
		req.PageToken = resp.GetNextPageToken()
	}
	return nil, errors.New("GetGPSessions: more than 100 pages")
}

// poll records states every period until ctx ends.
func (p *apiPoller) poll(ctx context.Context, period time.Duration) {
	for ctx.Err() == nil {
		states, err := allSessions(ctx, p.api)
		p.mu.Lock()
		if err != nil {
			p.errs++
			p.lastEr = err
		}
		for _, s := range states {
			id := s.GetSessionKey().GetSessId()
			list := p.states[id]
			if n := len(list); n == 0 || s.GetTime().AsTime().After(list[n-1].GetTime().AsTime()) {
				p.states[id] = append(list, s)
			}
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(period):
		}
	}
}

func (p *apiPoller) of(sessID int) []*yagpcc.SessionState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*yagpcc.SessionState(nil), p.states[int64(sessID)]...)
}

// within says whether got is within frac of want.
func within(got, want, frac float64) bool {
	d := got - want
	if d < 0 {
		d = -d
	}
	return d <= frac*want
}

// readBounds are how long after each edge of a window its processes were
// read: the snapshot's time stamps the catalog read, and each host's agent
// reads /proc up to gpotel.host.read_delay later (the longest over the
// hosts is taken). On a loaded machine that is a good part of a second.
type readBounds struct{ from, at time.Duration }

// readBoundsOf waits until the OTLP sink holds both edge snapshots of st's
// last_metrics window and returns their longest read delays.
func readBoundsOf(t *testing.T, s *Stack, st *yagpcc.SessionState) readBounds {
	t.Helper()
	at := st.GetTime().AsTime()
	from := at.Add(-time.Duration(st.GetLastMetrics().GetSystemStat().GetWindowSeconds() * float64(time.Second)))
	var b readBounds
	waitFor(t, "the window's edge snapshots in the OTLP sink", func() (bool, string) {
		dFrom, okFrom := snapshotReadDelay(s.Sink.Received(), from)
		dAt, okAt := snapshotReadDelay(s.Sink.Received(), at)
		b = readBounds{from: dFrom, at: dAt}
		return okFrom && okAt, fmt.Sprintf("snapshot %s received %v, %s received %v", from.Format(time.TimeOnly), okFrom, at.Format(time.TimeOnly), okAt)
	})
	return b
}

// snapshotReadDelay is the longest gpotel.host.read_delay of the snapshot
// taken at t among mds, and whether that snapshot is there (its
// gpotel.host.up points, which every snapshot has).
func snapshotReadDelay(mds []pmetric.Metrics, t time.Time) (time.Duration, bool) {
	ts := pcommon.NewTimestampFromTime(t)
	var longest time.Duration
	found := false
	for _, md := range mds {
		pipelinetest.Points(md, pipeline.MetricHostUp, func(_ pcommon.Map, dp pmetric.NumberDataPoint) {
			found = found || dp.Timestamp() == ts
		})
		pipelinetest.Points(md, pipeline.MetricHostReadDelay, func(_ pcommon.Map, dp pmetric.NumberDataPoint) {
			if dp.Timestamp() == ts {
				longest = max(longest, time.Duration(dp.DoubleValue()*float64(time.Second)))
			}
		})
	}
	return longest, found
}

// windowTruthRange is what the kernel counted over st's last_metrics
// window as gpotel could have read it: at least from the latest reading of
// the window's start to the earliest of its end, at most from the earliest
// of its start to the latest of its end. A reading past the ground truth's
// last sample is taken at that sample.
func windowTruthRange(t *testing.T, truth *truthSeries, st *yagpcc.SessionState, reads readBounds, pids []int, f func(groundtruth.Process) float64) (lo, hi float64) {
	t.Helper()
	at := st.GetTime().AsTime()
	from := at.Add(-time.Duration(st.GetLastMetrics().GetSystemStat().GetWindowSeconds() * float64(time.Second)))
	_, last := truth.span()
	cum := func(when time.Time) float64 {
		if when.After(last) {
			when = last
		}
		v, err := truth.cumulativeAt(when, pids, f)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	return cum(at) - cum(from.Add(reads.from)), cum(at.Add(reads.at)) - cum(from)
}

// withinRange tells whether got lies in [lo, hi] widened by frac.
func withinRange(got, lo, hi, frac float64) bool {
	return got >= lo*(1-frac) && got <= hi*(1+frac)
}
