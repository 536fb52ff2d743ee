// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

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
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// exactNanos is how far a figure in seconds round-trips to the
// nanosecond below 2^50 ns (13 days of CPU); beyond, a double rounds it.
const exactNanos = 1 << 50

// figureValues derives a value for every figure from seed: seconds as
// whole nanoseconds below exactNanos, counts and bytes as any int64.
func figureValues(seed []byte) [NumFigures]int64 {
	var v [NumFigures]int64
	for f := range NumFigures {
		var x uint64
		if len(seed) > 0 {
			buf := make([]byte, 8)
			copy(buf, seed[(int(f)*8)%len(seed):])
			x = binary.LittleEndian.Uint64(buf)
		}
		x ^= uint64(f+1) * 0x9e3779b97f4a7c15 // distinct even for an empty seed
		if Figures[f].Metric.Double {
			v[f] = int64(x % exactNanos)
		} else {
			v[f] = int64(x >> 1)
		}
	}
	return v
}

// processOf is a process that read every figure, with these values.
func processOf(v [NumFigures]int64) Process {
	p := Process{PID: 4242, CreationTime: time.Unix(1_700_000_000, 123).UTC(), HasStat: true}
	for f := range NumFigures {
		p.Set(f, float64(v[f])/1e9, v[f])
	}
	return p
}

// checkRoundTrip writes the values as the receiver does, reads them back
// as the processor does, and carries the processor's figures of them to
// SystemStat as the exporter does.
func checkRoundTrip(t *testing.T, v [NumFigures]int64) {
	t.Helper()
	ts := pcommon.NewTimestampFromTime(time.Unix(1_700_000_500, 0))
	md := pmetric.NewMetrics()
	batch := ProcessBatch{Time: ts, TmID: 7, Host: "sdw1", Kind: KindProcess,
		Entries: []ProcessEntry{{Session: 42, Segment: 3, BackendType: "client backend", Process: processOf(v)}}}
	if n, _ := NewProcessEncoder(Scope{}, Switches{}).Append(md.ResourceMetrics(), &batch, nil); n != 1 {
		t.Fatalf("%d processes written, want 1", n)
	}
	b := ReadBatch(md)
	if b.Kind != BatchProcesses {
		t.Fatalf("a process batch framed as %d", b.Kind)
	}
	var d ProcessDecoder
	d.Decode(md.ResourceMetrics(), b.Kinds, b.Time)
	if d.Err != nil || len(d.Samples) != 1 {
		t.Fatalf("decoded %d samples, error %v", len(d.Samples), d.Err)
	}
	s := d.Samples[0]
	if s.Host != "sdw1" || s.TmID != 7 || s.Session != 42 || s.PID != 4242 || s.Segment != 3 || s.Kind != KindProcess ||
		s.Creation != time.Unix(1_700_000_000, 123).UnixNano() {
		t.Errorf("identity %+v", s)
	}
	for f := range NumFigures {
		if !s.Has(f) {
			t.Errorf("%s %q was not read back", Figures[f].Metric.Name, Figures[f].Value)
		} else if s.Values[f] != v[f] {
			t.Errorf("%s %q: wrote %d, read %d", Figures[f].Metric.Name, Figures[f].Value, v[f], s.Values[f])
		}
	}

	// The processor's figures of these counters reach SystemStat.
	var counters Counters
	copy(counters[:], v[:NumCounters])
	var mem [NumMemory]int64
	for mt := range MemoryTypes {
		mem[mt] = int64(mt+1) << 20
	}
	rm := pmetric.NewResourceMetrics()
	enc := NewOutputEncoder([]time.Duration{5 * time.Minute}, nil)
	enc.AppendSession(rm, ts, &SessionFigures{Windows: []WindowFigures{{Span: 300e9, Deltas: counters}}, Lifetime: counters,
		Known: EveryCounter, MemoryCluster: mem, MemoryMaxHost: mem})
	out := DecodeSessionFigures(rm, &WindowMatcher{Last: 5 * time.Minute})
	if out.Last == nil || out.Total == nil {
		t.Fatal("the window's or the lifetime figures were not read")
	}
	for f := range Figure(NumCounters) {
		checkStat(t, Figures[f].Stat, out.Last, v[f], Figures[f].Metric.Double)
		checkStat(t, Figures[f].Stat, out.Total, v[f], Figures[f].Metric.Double)
	}
	for mt := range MemoryTypes {
		checkStat(t, MemoryTypes[mt].Cluster, out.Last, mem[mt], false)
		checkStat(t, MemoryTypes[mt].MaxHost, out.Total, mem[mt], false)
	}

	// And a query's totals, the same way.
	rms := pmetric.NewResourceMetricsSlice()
	enc.AppendQuery(rms, ts, &QueryFigures{Session: SessionKey{TmID: 7, ID: 42}, CommandCount: 3, Start: 1_700_000_400e9, Totals: counters,
		Known: EveryCounter})
	q, ok := DecodeQuery(rms.At(0))
	if !ok || q.Session != (SessionKey{TmID: 7, ID: 42}) || q.CommandCount != 3 {
		t.Fatalf("query identity %+v", q)
	}
	for f := range Figure(NumCounters) {
		checkStat(t, Figures[f].Stat, q.Stat, v[f], Figures[f].Metric.Double)
	}
}

// checkStat checks that a SystemStat field holds the figure's value.
func checkStat(t *testing.T, field StatField, st *yagpcc.SystemStat, v int64, seconds bool) {
	t.Helper()
	switch {
	case field.IsZero():
	case field.optional != nil:
		if got := *field.optional(st); got == nil || *got != float64(v)/1e9 {
			t.Errorf("%s = %v, want %v", field.Name, got, float64(v)/1e9)
		}
	case seconds:
		if got := *field.seconds(st); got != float64(v)/1e9 {
			t.Errorf("%s = %v, want %v", field.Name, got, float64(v)/1e9)
		}
	case field.perKiB:
		if got := *field.count(st); got != uint64(v)/1024 {
			t.Errorf("%s = %d, want %d", field.Name, got, v/1024)
		}
	default:
		if got := *field.count(st); got != uint64(v) {
			t.Errorf("%s = %d, want %d", field.Name, got, v)
		}
	}
}

func TestEveryFigureRoundTrips(t *testing.T) {
	for _, seed := range [][]byte{nil, {1}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, []byte("gpotel contract")} {
		checkRoundTrip(t, figureValues(seed))
	}
	var zeros [NumFigures]int64
	checkRoundTrip(t, zeros)
	var largest [NumFigures]int64
	for f := range NumFigures {
		largest[f] = math.MaxInt64
		if Figures[f].Metric.Double {
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
	known := EveryCounter &^ (1<<DiskDelay | 1<<DelaySwapin | 1<<DelayFreepages)
	var zeros Counters
	ts := pcommon.NewTimestampFromTime(time.Unix(1_700_000_500, 0))
	enc := NewOutputEncoder([]time.Duration{10 * time.Second, time.Minute}, nil)
	rm := pmetric.NewResourceMetrics()
	enc.AppendSession(rm, ts, &SessionFigures{Windows: []WindowFigures{{Span: 10e9}, {Span: 60e9}}, Known: known})
	eachPoint(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
		c, ok := counterMetricBySession[strings.TrimSuffix(m.Name(), RateSuffix)]
		if !ok {
			return
		}
		f := c.figures[0]
		if c.Attr != "" {
			v, _ := dp.Attributes().Get(c.Attr)
			f, _ = c.figureOf(v.AsString())
		}
		if known&(1<<f) == 0 {
			t.Errorf("%s has a point %v, yet no process reported it", m.Name(), dp.Attributes().AsRaw())
		}
	})
	rms := pmetric.NewResourceMetricsSlice()
	enc.AppendQuery(rms, ts, &QueryFigures{Session: SessionKey{TmID: 7, ID: 42}, Start: 1_700_000_400e9, Totals: zeros, Known: known})
	q, _ := DecodeQuery(rms.At(0))
	out := DecodeSessionFigures(rm, &WindowMatcher{Last: 10 * time.Second})
	for what, st := range map[string]*yagpcc.SystemStat{"window": out.Last, "lifetime": out.Total, "query": q.Stat} {
		if st.BlkioDelaySeconds != nil || st.SwapinDelaySeconds != nil || st.FreepagesDelaySeconds != nil {
			t.Errorf("%s: unreported waits are set: blkio %v, swapin %v, freepages %v", what, st.BlkioDelaySeconds, st.SwapinDelaySeconds, st.FreepagesDelaySeconds)
		}
		if st.RunDelaySeconds == nil || st.ThrashingDelaySeconds == nil {
			t.Errorf("%s: waits reported as 0 are absent: run %v, thrashing %v", what, st.RunDelaySeconds, st.ThrashingDelaySeconds)
		}
	}
}

// Every row of the table is complete: a metric, an attribute value exactly
// when the metric has an attribute, a source, a unit that converts to the
// metric's type, and a SystemStat field for every counter.
func TestEveryFigureRowIsComplete(t *testing.T) {
	seen := map[string]bool{}
	for f := range NumFigures {
		row := &Figures[f]
		if row.Metric == nil {
			t.Fatalf("figure %d has no row", f)
		}
		name := row.Metric.Name + " " + row.Value
		if seen[name] {
			t.Errorf("%s is two rows", name)
		}
		seen[name] = true
		if (row.Value == "") != (row.Metric.Attr == "") {
			t.Errorf("%s: attribute value %q for attribute %q", name, row.Value, row.Metric.Attr)
		}
		if len(row.Live) == 0 {
			t.Errorf("%s has no agent field", name)
		}
		for _, src := range append(append([]Source[*yagpcc.GpPidProcInfo](nil), row.Live...), exitAsLive(row)...) {
			if src.Unit.IsTime() != row.Metric.Double {
				t.Errorf("%s: %s is in unit %d, the metric in %s", name, src.Field, src.Unit, row.Metric.Unit)
			}
		}
		if isCounter(f) != (row.Metric.Session != "") {
			t.Errorf("%s: a counter needs a session figure and only a counter has one", name)
		}
		if isCounter(f) && row.Stat.IsZero() {
			t.Errorf("%s: no SystemStat field", name)
		}
	}
}

// exitAsLive lists a row's exit sources as live ones, for their units.
func exitAsLive(row *FigureRow) []Source[*yagpcc.GpPidProcInfo] {
	var out []Source[*yagpcc.GpPidProcInfo]
	for _, s := range row.Exit {
		out = append(out, Source[*yagpcc.GpPidProcInfo]{Field: s.Field, Unit: s.Unit})
	}
	return out
}

// A StatField's name is the metrics.proto field its accessor fills.
func TestEveryStatFieldIsNamedAfterItsProtoField(t *testing.T) {
	fields := []StatField{}
	for f := range Figure(NumCounters) {
		fields = append(fields, Figures[f].Stat)
	}
	for _, mt := range MemoryTypes {
		fields = append(fields, mt.Cluster, mt.MaxHost)
	}
	for _, field := range fields {
		if field.IsZero() {
			continue
		}
		var st yagpcc.SystemStat
		switch {
		case field.seconds != nil:
			*field.seconds(&st) = 1
		case field.optional != nil:
			one := 1.0
			*field.optional(&st) = &one
		default:
			*field.count(&st) = 1
		}
		var set []string
		st.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
			set = append(set, string(fd.Name()))
			return true
		})
		if len(set) != 1 || set[0] != field.Name {
			t.Errorf("StatField %q fills %v", field.Name, set)
		}
	}
}

// The receiver's read delay of each host reaches the processor; a hostile
// value (negative, an hour or more) reads as not measured.
func TestHostReadDelayRoundTrips(t *testing.T) {
	at := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	c := Closing{Time: at, TmID: 1, Coordinator: "mdw", Hosts: []HostAnswer{
		{Host: "sdw1", Up: true, ReadDelay: int64(250 * time.Millisecond)},
		{Host: "sdw2", Up: true},
	}}
	md := NewClosingEncoder(Scope{}, at, Switches{}).Encode(&c)
	h := DecodeSnapshot(md.ResourceMetrics().At(0))
	require.Len(t, h.Hosts, 2)
	assert.Equal(t, int64(250*time.Millisecond), h.Hosts[0].ReadDelay)
	assert.Zero(t, h.Hosts[1].ReadDelay)

	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := range ms.Len() {
		if ms.At(i).Name() == MetricHostReadDelay {
			ms.At(i).Gauge().DataPoints().At(0).SetDoubleValue(-1)
		}
	}
	assert.Zero(t, DecodeSnapshot(md.ResourceMetrics().At(0)).Hosts[0].ReadDelay)
}

// Each host's online CPUs reach the processor and, on the snapshot
// resource, the exporter's HostTop; a host without them stays without
// (absent, not 0), and a hostile count (0, negative, above any kernel's)
// reads as absent.
func TestHostCPUsRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	c := Closing{Time: at, TmID: 1, Coordinator: "mdw", Hosts: []HostAnswer{
		{Host: "sdw1", Up: true, CPUs: 64},
		{Host: "sdw2", Up: true},
	}}
	md := NewClosingEncoder(Scope{}, at, Switches{}).Encode(&c)
	rm := md.ResourceMetrics().At(0)
	h := DecodeSnapshot(rm)
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
			if ms.At(i).Name() == MetricHostCPUs {
				ms.At(i).Gauge().DataPoints().At(0).SetIntValue(hostile)
			}
		}
		assert.Zero(t, DecodeSnapshot(rm).Hosts[0].CPUs, hostile)
		assert.Nil(t, DecodeHostTops(rm).Hosts["sdw1"].Cpus, hostile)
	}
}

// isCounter tells the cumulative counters from the gauges.
func isCounter(f Figure) bool { return int(f) < NumCounters }
