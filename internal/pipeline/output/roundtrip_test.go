// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package output

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gpotel/gpotel/internal/kernelunits"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// exactNanos is how far a figure in seconds round-trips to the
// nanosecond below 2^50 ns (13 days of CPU); beyond, a double rounds it.
const exactNanos = 1 << 50

// figureValues derives a value for every figure from seed: seconds as
// whole nanoseconds below exactNanos, counts and bytes as any int64.
func figureValues(seed []byte) [pipeline.NumFigures]int64 {
	var v [pipeline.NumFigures]int64
	for f := range pipeline.NumFigures {
		var x uint64
		if len(seed) > 0 {
			buf := make([]byte, 8)
			copy(buf, seed[(int(f)*8)%len(seed):])
			x = binary.LittleEndian.Uint64(buf)
		}
		x ^= uint64(f+1) * 0x9e3779b97f4a7c15 // distinct even for an empty seed
		if pipeline.Figures[f].Metric.Double {
			v[f] = int64(x % exactNanos)
		} else {
			v[f] = int64(x >> 1)
		}
	}
	return v
}

// processOf is a process that read every figure, with these values.
func processOf(v [pipeline.NumFigures]int64) snapshot.Process {
	p := snapshot.Process{PID: 4242, CreationTime: time.Unix(1_700_000_000, 123).UTC(), HasStat: true}
	for f := range pipeline.NumFigures {
		p.Set(f, float64(v[f])/1e9, v[f])
	}
	return p
}

// checkRoundTrip writes the values as the receiver does, reads them back
// as the processor does, and carries the processor's figures of them to
// SystemStat as the exporter does.
func checkRoundTrip(t *testing.T, v [pipeline.NumFigures]int64) {
	t.Helper()
	ts := pcommon.NewTimestampFromTime(time.Unix(1_700_000_500, 0))
	md := pmetric.NewMetrics()
	batch := snapshot.ProcessBatch{Time: ts, TmID: 7, Host: "sdw1", Kind: pipeline.KindProcess,
		Entries: []snapshot.ProcessEntry{{Session: 42, Segment: 3, BackendType: "client backend", Process: processOf(v)}}}
	if n, _ := snapshot.NewProcessEncoder(snapshot.Scope{}, snapshot.Switches{}).Append(md.ResourceMetrics(), &batch, nil); n != 1 {
		t.Fatalf("%d processes written, want 1", n)
	}
	b := snapshot.ReadBatch(md)
	if b.Kind != snapshot.BatchProcesses {
		t.Fatalf("a process batch framed as %d", b.Kind)
	}
	var d snapshot.ProcessDecoder
	d.Decode(md.ResourceMetrics(), b.Kinds, b.Time)
	if d.Err != nil || len(d.Samples) != 1 {
		t.Fatalf("decoded %d samples, error %v", len(d.Samples), d.Err)
	}
	s := d.Samples[0]
	if s.Host != "sdw1" || s.TmID != 7 || s.Session != 42 || s.PID != 4242 || s.Segment != 3 || s.Kind != pipeline.KindProcess ||
		s.Creation != time.Unix(1_700_000_000, 123).UnixNano() {
		t.Errorf("identity %+v", s)
	}
	for f := range pipeline.NumFigures {
		if !s.Has(f) {
			t.Errorf("%s %q was not read back", pipeline.Figures[f].Metric.Name, pipeline.Figures[f].Value)
		} else if s.Values[f] != v[f] {
			t.Errorf("%s %q: wrote %d, read %d", pipeline.Figures[f].Metric.Name, pipeline.Figures[f].Value, v[f], s.Values[f])
		}
	}

	// The processor's figures of these counters reach SystemStat.
	var counters pipeline.Counters
	copy(counters[:], v[:pipeline.NumCounters])
	var mem [pipeline.NumMemory]int64
	for mt := range pipeline.MemoryTypes {
		mem[mt] = int64(mt+1) << 20
	}
	rm := pmetric.NewResourceMetrics()
	enc := NewEncoder([]time.Duration{5 * time.Minute}, nil)
	enc.AppendSession(rm, ts, &SessionFigures{Windows: []WindowFigures{{Span: 300e9, Deltas: counters}}, Lifetime: counters,
		Known: pipeline.EveryCounter, MemoryCluster: mem, MemoryMaxHost: mem})
	out := DecodeSessionFigures(rm, &WindowMatcher{Last: 5 * time.Minute})
	if out.Last == nil || out.Total == nil {
		t.Fatal("the window's or the lifetime figures were not read")
	}
	for f := range pipeline.Figure(pipeline.NumCounters) {
		checkStat(t, pipeline.Figures[f].Stat, out.Last, v[f], pipeline.Figures[f].Metric.Double)
		checkStat(t, pipeline.Figures[f].Stat, out.Total, v[f], pipeline.Figures[f].Metric.Double)
	}
	for mt := range pipeline.MemoryTypes {
		checkStat(t, pipeline.MemoryTypes[mt].Cluster, out.Last, mem[mt], false)
		checkStat(t, pipeline.MemoryTypes[mt].MaxHost, out.Total, mem[mt], false)
	}

	// And a query's totals, the same way.
	rms := pmetric.NewResourceMetricsSlice()
	enc.AppendQuery(rms, ts, &QueryFigures{Session: pipeline.SessionKey{TmID: 7, ID: 42}, CommandCount: 3, Start: 1_700_000_400e9, Totals: counters,
		Known: pipeline.EveryCounter})
	q, ok := DecodeQuery(rms.At(0))
	if !ok || q.Session != (pipeline.SessionKey{TmID: 7, ID: 42}) || q.CommandCount != 3 {
		t.Fatalf("query identity %+v", q)
	}
	for f := range pipeline.Figure(pipeline.NumCounters) {
		checkStat(t, pipeline.Figures[f].Stat, q.Stat, v[f], pipeline.Figures[f].Metric.Double)
	}
}

// checkStat checks that a SystemStat field holds the figure's value.
func checkStat(t *testing.T, field pipeline.StatField, stat *yagpcc.SystemStat, v int64, seconds bool) {
	t.Helper()
	if fd := stat.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(field.Name)); fd != nil && fd.HasPresence() &&
		!field.IsZero() && !stat.ProtoReflect().Has(fd) {
		t.Errorf("%s unset, want %v", field.Name, float64(v)/1e9)
	}
	switch {
	case field.IsZero():
	case seconds || field.IsSeconds():
		if got := field.Seconds(stat); got != float64(v)/1e9 {
			t.Errorf("%s = %v, want %v", field.Name, got, float64(v)/1e9)
		}
	case field.InKiB():
		if got := field.Count(stat); got != uint64(v)/1024 {
			t.Errorf("%s = %d, want %d", field.Name, got, v/1024)
		}
	default:
		if got := field.Count(stat); got != uint64(v) {
			t.Errorf("%s = %d, want %d", field.Name, got, v)
		}
	}
}

func TestEveryFigureRoundTrips(t *testing.T) {
	for _, seed := range [][]byte{nil, {1}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, []byte("gpotel contract")} {
		checkRoundTrip(t, figureValues(seed))
	}
	var zeros [pipeline.NumFigures]int64
	checkRoundTrip(t, zeros)
	var largest [pipeline.NumFigures]int64
	for f := range pipeline.NumFigures {
		largest[f] = math.MaxInt64
		if pipeline.Figures[f].Metric.Double {
			largest[f] = exactNanos - 1
		}
	}
	checkRoundTrip(t, largest)
}

func FuzzEveryFigureRoundTrips(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("gpotel contract"))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, seed []byte) {
		checkRoundTrip(t, figureValues(seed))
	})
}

// A counter no process of a session (or query) reported is absent from its
// figures, in every window and the lifetime, never a 0: with
// kernel.task_delayacct off its block I/O and memory waits are unmeasured,
// and SystemStat leaves them unset. A counter reported as 0 stays a 0.
func TestCountersNoProcessReportedAreAbsent(t *testing.T) {
	known := pipeline.EveryCounter &^ (1<<pipeline.DiskDelay | 1<<pipeline.DelaySwapin | 1<<pipeline.DelayFreepages)
	var zeros pipeline.Counters
	ts := pcommon.NewTimestampFromTime(time.Unix(1_700_000_500, 0))
	enc := NewEncoder([]time.Duration{10 * time.Second, time.Minute}, nil)
	rm := pmetric.NewResourceMetrics()
	enc.AppendSession(rm, ts, &SessionFigures{Windows: []WindowFigures{{Span: 10e9}, {Span: 60e9}}, Known: known})
	pipeline.EachPoint(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
		c, ok := pipeline.CounterMetricOfSession(strings.TrimSuffix(m.Name(), pipeline.RateSuffix))
		if !ok {
			return
		}
		f := c.Figures()[0]
		if c.Attr != "" {
			v, _ := dp.Attributes().Get(c.Attr)
			f, _ = c.FigureOf(v.AsString())
		}
		if known&(1<<f) == 0 {
			t.Errorf("%s has a point %v, yet no process reported it", m.Name(), dp.Attributes().AsRaw())
		}
	})
	rms := pmetric.NewResourceMetricsSlice()
	enc.AppendQuery(rms, ts, &QueryFigures{Session: pipeline.SessionKey{TmID: 7, ID: 42}, Start: 1_700_000_400e9, Totals: zeros, Known: known})
	q, _ := DecodeQuery(rms.At(0))
	out := DecodeSessionFigures(rm, &WindowMatcher{Last: 10 * time.Second})
	for what, stat := range map[string]*yagpcc.SystemStat{"window": out.Last, "lifetime": out.Total, "query": q.Stat} {
		if stat.BlkioDelaySeconds != nil || stat.SwapinDelaySeconds != nil || stat.FreepagesDelaySeconds != nil {
			t.Errorf("%s: unreported waits are set: blkio %v, swapin %v, freepages %v", what, stat.BlkioDelaySeconds, stat.SwapinDelaySeconds, stat.FreepagesDelaySeconds)
		}
		if stat.RunDelaySeconds == nil || stat.ThrashingDelaySeconds == nil {
			t.Errorf("%s: waits reported as 0 are absent: run %v, thrashing %v", what, stat.RunDelaySeconds, stat.ThrashingDelaySeconds)
		}
	}
}

// Each host's online CPUs reach the processor and, on the snapshot
// resource, the exporter's HostTop; a host without them stays without
// (absent, not 0), and a hostile count (0, negative, above any kernel's)
// reads as absent.
func TestHostCPUsRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	c := snapshot.Closing{Time: at, TmID: 1, Coordinator: "mdw", Hosts: []snapshot.HostAnswer{
		{Host: "sdw1", Up: true, CPUs: 64},
		{Host: "sdw2", Up: true},
	}}
	md := snapshot.NewClosingEncoder(snapshot.Scope{}, at, snapshot.Switches{}).Encode(&c)
	rm := md.ResourceMetrics().At(0)
	h := snapshot.DecodeSnapshot(rm)
	require.Len(t, h.Hosts, 2)
	assert.Equal(t, uint32(64), h.Hosts[0].CPUs)
	assert.Zero(t, h.Hosts[1].CPUs)
	tops := DecodeHostTops(rm)
	if assert.NotNil(t, tops.Hosts["sdw1"].Cpus) {
		assert.Equal(t, uint32(64), tops.Hosts["sdw1"].GetCpus())
	}
	assert.Nil(t, tops.Hosts["sdw2"].Cpus)

	ms := rm.ScopeMetrics().At(0).Metrics()
	for _, hostile := range []int64{0, -4, kernelunits.MaxCPUs + 1} {
		for i := range ms.Len() {
			if ms.At(i).Name() == pipeline.MetricHostCPUs {
				ms.At(i).Gauge().DataPoints().At(0).SetIntValue(hostile)
			}
		}
		assert.Zero(t, snapshot.DecodeSnapshot(rm).Hosts[0].CPUs, hostile)
		assert.Nil(t, DecodeHostTops(rm).Hosts["sdw1"].Cpus, hostile)
	}
}
