// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/output"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor/internal/metadata"
)

const testTmID = 1700000000

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return epoch.Add(time.Duration(sec * float64(time.Second))) }

// proc is a process with only CPU user time and read bytes growing.
func proc(host string, seg, sess, pid int64, createdSec float64, cpuUser float64, readBytes int64) pipelinetest.Process {
	return pipelinetest.Process{
		Host: host, Segment: seg, Session: sess, PID: pid, Created: at(createdSec),
		CPUUser: cpuUser, ReadBytes: readBytes,
	}
}

// snap builds a snapshot at sec; every host that runs a process answers
// unless listed in down; sessions get a session resource each.
func snap(sec float64, down []string, sessions []int64, procs ...pipelinetest.Process) pipelinetest.Snapshot {
	s := pipelinetest.Snapshot{Time: at(sec), TmID: testTmID, Coordinator: "mdw"}
	hosts := map[string]bool{}
	for _, p := range procs {
		hosts[p.Host] = true
	}
	for _, h := range down {
		hosts[h] = true
	}
	names := make([]string, 0, len(hosts))
	for h := range hosts {
		names = append(names, h)
	}
	sort.Strings(names)
	isDown := map[string]bool{}
	for _, h := range down {
		isDown[h] = true
	}
	for _, h := range names {
		s.Hosts = append(s.Hosts, pipelinetest.Host{Name: h, Up: !isDown[h]})
	}
	for _, id := range sessions {
		s.Sessions = append(s.Sessions, pipelinetest.Session{ID: id, PID: 1000 + id, DB: "postgres", User: "gpadmin", State: "active"})
	}
	s.Processes = procs
	return s
}

func newTestProcessor(t testing.TB, cfg *Config) (processor.Metrics, *consumertest.MetricsSink) {
	t.Helper()
	sink := new(consumertest.MetricsSink)
	p, err := NewFactory().CreateMetrics(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	return p, sink
}

// newTestProcessorOpenedAt is a processor whose collector started at opened.
func newTestProcessorOpenedAt(t testing.TB, cfg *Config, opened time.Time) (processor.Metrics, *consumertest.MetricsSink) {
	t.Helper()
	sink := new(consumertest.MetricsSink)
	p, err := createMetricsOpenedAt(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, sink, opened)
	if err != nil {
		t.Fatal(err)
	}
	return p, sink
}

// feed consumes the snapshots in order, each as the receiver hands it on
// (process batches per host, then the closing batch), and returns the last
// output.
func feed(t testing.TB, p processor.Metrics, sink *consumertest.MetricsSink, snaps ...pipelinetest.Snapshot) pmetric.Metrics {
	t.Helper()
	for _, s := range snaps {
		for _, md := range s.Batches() {
			if err := p.ConsumeMetrics(context.Background(), md); err != nil {
				t.Fatal(err)
			}
		}
	}
	all := sink.AllMetrics()
	if len(all) == 0 {
		t.Fatal("nothing reached the next consumer")
	}
	return all[len(all)-1]
}

// figure reads one session figure; attrs are key, value pairs that must all
// match the data point's attributes, which must have no others.
func figure(t testing.TB, md pmetric.Metrics, session int64, metric string, attrs ...string) float64 {
	t.Helper()
	v, err := lookupFigure(md, session, metric, attrs...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func lookupFigure(md pmetric.Metrics, session int64, metric string, attrs ...string) (float64, error) {
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		ra := rms.At(i).Resource().Attributes()
		kind, _ := ra.Get(pipeline.AttrResourceKind)
		id, _ := ra.Get(pipeline.AttrSessionID)
		if kind.Str() != pipeline.KindSession.String() || id.Int() != session {
			continue
		}
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			if sms.At(j).Scope().Name() != output.ProcessorScope {
				continue
			}
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				m := ms.At(k)
				if m.Name() != metric {
					continue
				}
				dps := m.Gauge().DataPoints()
				for d := range dps.Len() {
					dp := dps.At(d)
					if !attrsEqual(dp.Attributes(), attrs) {
						continue
					}
					if dp.ValueType() == pmetric.NumberDataPointValueTypeDouble {
						return dp.DoubleValue(), nil
					}
					return float64(dp.IntValue()), nil
				}
				return 0, fmt.Errorf("session %d %s: no point with %v", session, metric, attrs)
			}
			return 0, fmt.Errorf("session %d: no metric %s", session, metric)
		}
		return 0, fmt.Errorf("session %d: no %s scope", session, output.ProcessorScope)
	}
	return 0, fmt.Errorf("no session resource %d", session)
}

func attrsEqual(m pcommon.Map, kv []string) bool {
	if m.Len() != len(kv)/2 {
		return false
	}
	for i := 0; i+1 < len(kv); i += 2 {
		v, ok := m.Get(kv[i])
		if !ok || v.AsString() != kv[i+1] {
			return false
		}
	}
	return true
}

func countKind(md pmetric.Metrics, kind pipeline.ResourceKind) int {
	n := 0
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		if k, ok := rms.At(i).Resource().Attributes().Get(pipeline.AttrResourceKind); ok && k.Str() == kind.String() {
			n++
		}
	}
	return n
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func forEachPoint(m pmetric.Metric, fn func(pmetric.NumberDataPoint)) {
	dps := pipeline.NumberPoints(m)
	for i := range dps.Len() {
		fn(dps.At(i))
	}
}

// everyPoint is every number data point of mds by its resource's
// attributes, its metric's name and its own attributes: two outputs with
// equal maps say the same, whatever their order and batching.
func everyPoint(mds ...pmetric.Metrics) map[string]float64 {
	out := map[string]float64{}
	for _, md := range mds {
		addPoints(out, md)
	}
	return out
}

func addPoints(out map[string]float64, md pmetric.Metrics) {
	attrs := func(m pcommon.Map) string {
		var kv []string
		for k, v := range m.All() {
			kv = append(kv, k+"="+v.AsString())
		}
		slices.Sort(kv)
		return strings.Join(kv, ",")
	}
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		res := attrs(rms.At(i).Resource().Attributes())
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				m := ms.At(k)
				var dps pmetric.NumberDataPointSlice
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					dps = m.Gauge().DataPoints()
				case pmetric.MetricTypeSum:
					dps = m.Sum().DataPoints()
				default:
					out[res+"|"+m.Name()+"|type"] = float64(m.Type())
					continue
				}
				for l := range dps.Len() {
					dp := dps.At(l)
					v := dp.DoubleValue()
					if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
						v = float64(dp.IntValue())
					}
					out[res+"|"+m.Name()+"|"+attrs(dp.Attributes())] = v
				}
			}
		}
	}
}
