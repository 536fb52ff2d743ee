// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
)

// skewedAndEven runs two sessions over 10 s on four segments (0, 1 on sdw1;
// 2, 3 on sdw2) and a coordinator backend each: session 7 burns 2 s of CPU
// on segment 2 only, session 8 one second on every segment; both
// coordinator backends burn 5 s, which must not count.
func skewedAndEven(sec float64) []pipelinetest.Process {
	host := func(seg int64) string { return []string{"sdw1", "sdw1", "sdw2", "sdw2"}[seg] }
	procs := []pipelinetest.Process{
		proc("mdw", -1, 7, 100, 0, sec/2, 0),
		proc("mdw", -1, 8, 200, 0, sec/2, 0),
	}
	for seg := range int64(4) {
		hot := 0.0
		if seg == 2 {
			hot = sec / 5
		}
		procs = append(procs,
			proc(host(seg), seg, 7, 110+seg, 0, hot, int64(sec*1e6)),
			proc(host(seg), seg, 8, 210+seg, 0, sec/10, 0))
	}
	return procs
}

func skewedSnapshots() (first, last pipelinetest.Snapshot) {
	return snap(0, nil, []int64{7, 8}, skewedAndEven(0)...), snap(10, nil, []int64{7, 8}, skewedAndEven(10)...)
}

func TestSessionSkewNamesTheHotSegment(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	s0, s1 := skewedSnapshots()
	md := feed(t, p, sink, s0, s1)
	cpu := []string{pipeline.AttrWindow, "1m", pipeline.AttrSkewFigure, pipeline.SkewFigureCPU}
	assert.InDelta(t, 0.75, figure(t, md, 7, pipeline.MetricSessionSkewRatio, cpu...), 1e-9)
	assert.InDelta(t, 4, figure(t, md, 7, pipeline.MetricSessionSkewMaxOverAvg, cpu...), 1e-9)
	assert.Equal(t, 2.0, figure(t, md, 7, pipeline.MetricSessionSkewHottestSegment, cpu...))
	assert.Equal(t, 4.0, figure(t, md, 7, pipeline.MetricSessionSkewSegments, cpu...))
	// Its reads are even: the I/O figure is not skewed.
	io := []string{pipeline.AttrWindow, "1m", pipeline.AttrSkewFigure, pipeline.SkewFigureIO}
	assert.InDelta(t, 0, figure(t, md, 7, pipeline.MetricSessionSkewRatio, io...), 1e-9)
	// Lifetime counts every live process's totals the same way.
	assert.InDelta(t, 0.75, figure(t, md, 7, pipeline.MetricSessionSkewRatio, pipeline.AttrWindow, pipeline.WindowLifetime, pipeline.AttrSkewFigure, pipeline.SkewFigureCPU), 1e-9)
}

func TestSessionSkewOfAnEvenSpreadIsZero(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	s0, s1 := skewedSnapshots()
	md := feed(t, p, sink, s0, s1)
	cpu := []string{pipeline.AttrWindow, "1m", pipeline.AttrSkewFigure, pipeline.SkewFigureCPU}
	assert.InDelta(t, 0, figure(t, md, 8, pipeline.MetricSessionSkewRatio, cpu...), 1e-9)
	assert.InDelta(t, 1, figure(t, md, 8, pipeline.MetricSessionSkewMaxOverAvg, cpu...), 1e-9)
	assert.Equal(t, 0.0, figure(t, md, 8, pipeline.MetricSessionSkewHottestSegment, cpu...), "a tie goes to the lowest content id")
}

func TestSessionSkewIsAbsentWithoutSegmentWork(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	s0, s1 := skewedSnapshots()
	md := feed(t, p, sink, s0, s1)
	// Session 8 reads nothing anywhere: no I/O skew, not a zero one.
	_, err := lookupFigure(md, 8, pipeline.MetricSessionSkewRatio, pipeline.AttrWindow, "1m", pipeline.AttrSkewFigure, pipeline.SkewFigureIO)
	assert.Error(t, err)
}

func TestSessionSkewIgnoresProcessesWithoutSegmentID(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	noSeg := func(sec float64) pipelinetest.Process {
		pr := proc("sdw1", 0, 9, 300, 0, sec, 0)
		pr.NoSegment = true
		return pr
	}
	even := func(sec float64) []pipelinetest.Process {
		return []pipelinetest.Process{noSeg(sec), proc("sdw1", 0, 9, 301, 0, sec/10, 0), proc("sdw2", 1, 9, 302, 0, sec/10, 0)}
	}
	md := feed(t, p, sink, snap(0, nil, []int64{9}, even(0)...), snap(10, nil, []int64{9}, even(10)...))
	cpu := []string{pipeline.AttrWindow, "1m", pipeline.AttrSkewFigure, pipeline.SkewFigureCPU}
	assert.InDelta(t, 0, figure(t, md, 9, pipeline.MetricSessionSkewRatio, cpu...), 1e-9, "a process without a segment id is not segment 0")
}

func TestSessionHostFiguresAreOptIn(t *testing.T) {
	s0, s1 := skewedSnapshots()
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	md := feed(t, p, sink, s0, s1)
	_, err := lookupFigure(md, 7, pipeline.MetricSessionHostCPUUsage, pipeline.AttrWindow, "1m", pipeline.AttrHostName, "sdw2")
	assert.Error(t, err)

	p, sink = newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}, EmitSessionHostFigures: true})
	md = feed(t, p, sink, s0, s1)
	// 2 s of CPU over the 10 s span on sdw2, nothing on sdw1, 5 s on mdw.
	for host, cores := range map[string]float64{"sdw1": 0, "sdw2": 0.2, "mdw": 0.5} {
		got := figure(t, md, 7, pipeline.MetricSessionHostCPUUsage, pipeline.AttrWindow, "1m", pipeline.AttrHostName, host)
		assert.InDelta(t, cores, got, 1e-9, host)
	}
	// 1 MB/s on each of the two segments of a host.
	got := figure(t, md, 7, pipeline.MetricSessionHostDiskIORate, pipeline.AttrWindow, "1m", pipeline.AttrHostName, "sdw1", pipeline.AttrDirection, pipeline.DirectionRead)
	assert.InDelta(t, 2e6, got, 1e-6)
	require.Equal(t, 2.0, figure(t, md, 7, pipeline.MetricSessionHostProcesses, pipeline.AttrHostName, "sdw2"))
	require.Equal(t, 1.0, figure(t, md, 7, pipeline.MetricSessionHostProcesses, pipeline.AttrHostName, "mdw"))
	_, err = lookupFigure(md, 7, pipeline.MetricSessionHostMemory, pipeline.AttrHostName, "sdw1")
	assert.NoError(t, err)
}

// A counter that went down over the window (the same process, so not pid
// reuse) counts 0 on its segment, never less, before it is added to the
// other counter of its figure: a segment whose user CPU went down by 2 s
// while its system CPU went up by 3 s used 3 s, not 1 s. Each of user CPU,
// system CPU, read and written bytes goes down on its own segment.
func TestACounterThatWentDownCountsZeroOnItsSegment(t *testing.T) {
	// worker's counters move by the given amounts from 0 s to 10 s.
	worker := func(seg, pid int64, sec, user, sys float64, read, written int64) pipelinetest.Process {
		frac := sec / 10
		p := proc("sdw1", seg, 7, pid, 0, 10+user*frac, 10e6+int64(float64(read)*frac))
		p.CPUSystem, p.WriteBytes = 10+sys*frac, 10e6+int64(float64(written)*frac)
		return p
	}
	snapshotAt := func(sec float64) pipelinetest.Snapshot {
		return snap(sec, nil, []int64{7},
			worker(0, 100, sec, 5, 0, 5e6, 0),
			worker(1, 101, sec, -2, 3, 0, 0),
			worker(2, 102, sec, 3, -2, 0, 0),
			worker(3, 103, sec, 0, 0, -2e6, 3e6),
			worker(4, 104, sec, 0, 0, 3e6, -2e6))
	}
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	md := feed(t, p, sink, snapshotAt(0), snapshotAt(10))
	// CPU by segment: 5, 3, 3, 0, 0 s; I/O: 5, 0, 0, 3, 3 MB. Either way
	// the average is 2.2 and the hottest is segment 0 with 5.
	for _, fig := range []string{pipeline.SkewFigureCPU, pipeline.SkewFigureIO} {
		attrs := []string{pipeline.AttrWindow, "1m", pipeline.AttrSkewFigure, fig}
		assert.InDelta(t, 1-2.2/5, figure(t, md, 7, pipeline.MetricSessionSkewRatio, attrs...), 1e-9, fig)
		assert.InDelta(t, 5/2.2, figure(t, md, 7, pipeline.MetricSessionSkewMaxOverAvg, attrs...), 1e-9, fig)
		assert.Equal(t, 0.0, figure(t, md, 7, pipeline.MetricSessionSkewHottestSegment, attrs...), fig)
	}
}
