// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/viewtest"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/output"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// testFigures are one window's session figures as the processor emits them.
type testFigures struct {
	user, sys, diskDelay, runDelay, span float64
	readBytes, writeBytes, rchar, wchar  int64
	syscr, syscw, cancelled              int64
	major, minor, vol, invol             int64
	partial                              bool
}

// counters are the figures as the processor holds them.
func (f *testFigures) counters() pipeline.Counters {
	ns := func(s float64) int64 { return int64(s * 1e9) }
	return pipeline.Counters{
		pipeline.CPUUser: ns(f.user), pipeline.CPUSystem: ns(f.sys), pipeline.DiskDelay: ns(f.diskDelay), pipeline.RunDelay: ns(f.runDelay),
		pipeline.DiskRead: f.readBytes, pipeline.DiskWrite: f.writeBytes, pipeline.CharsRead: f.rchar, pipeline.CharsWrite: f.wchar,
		pipeline.SyscallsRead: f.syscr, pipeline.SyscallsWrite: f.syscw, pipeline.CancelledWrite: f.cancelled,
		pipeline.FaultsMajor: f.major, pipeline.FaultsMinor: f.minor, pipeline.SwitchesVoluntary: f.vol, pipeline.SwitchesInvoluntary: f.invol,
	}
}

// testMemory are the memory gauges (no window).
type testMemory struct {
	rss, rssAnon, rssShared, virtual, peak, virtualPeak int64
	rssMaxHost, rssAnonMaxHost                          int64
}

// testSession is one session resource of a snapshot.
type testSession struct {
	sessID, tmID, pid int64
	system            bool
	db, user          string
	// meta is gpotel.session.info's state by Metadata key; values string,
	// int64, bool or []string (backends), times as RFC 3339 strings.
	meta            map[string]any
	last            *testFigures // the exporter's window; nil: absent
	total           *testFigures // lifetime; nil: absent
	other           *testFigures // another window the exporter must ignore
	memory          testMemory
	processes, host int64
	pressure        []snapshot.GroupPressure // its groups' pressure (avg10 in percent)
	greenplum       *snapshot.GreenplumSession
	// unreported are the counters none of its processes reported (bit
	// per Figure): the processor leaves them out.
	unreported uint32
}

const (
	testCoordinator = viewtest.Coordinator
	testWindow      = 5 * time.Minute
	testOtherWindow = 15 * time.Minute
)

// buildSnapshot makes one snapshot the way snapshotdiff outputs it
// (docs/pipeline.md), through the pipeline contract's encoders: a
// snapshot resource, then one resource per session with the receiver's
// gpotel.session.info and the processor's figures. A session without
// last, other or total figures lacks that window's points: input the
// processor never writes, for the exporter's tests of it.
func buildSnapshot(at time.Time, sessions []testSession) pmetric.Metrics {
	ts := pcommon.NewTimestampFromTime(at)
	md := viewtest.Snapshot(at)
	for _, s := range sessions {
		one := snapshot.NewClosingEncoder(pipelinetest.Scope, at, snapshot.Switches{}).Encode(&snapshot.Closing{
			Time: at, TmID: s.tmID, Coordinator: testCoordinator,
			Sessions: []snapshot.Session{{ID: s.sessID, PID: s.pid, System: s.system, Database: &s.db, User: &s.user,
				State: stateOf(s.meta), CgroupPressure: s.pressure, Greenplum: s.greenplum}},
		})
		rm := one.ResourceMetrics().At(1) // after its snapshot resource
		var windows []time.Duration
		figs := &output.SessionFigures{Processes: s.processes, Hosts: s.host, Known: pipeline.EveryCounter &^ s.unreported}
		for _, w := range []struct {
			d time.Duration
			f *testFigures
		}{{testWindow, s.last}, {testOtherWindow, s.other}} {
			if w.f != nil {
				windows = append(windows, w.d)
				figs.Windows = append(figs.Windows, output.WindowFigures{Span: int64(w.f.span * 1e9), Deltas: w.f.counters(), Partial: w.f.partial})
			}
		}
		if s.total != nil {
			figs.Lifetime, figs.LifetimePartial = s.total.counters(), s.total.partial
		}
		m := s.memory
		figs.MemoryCluster = [pipeline.NumMemory]int64{pipeline.MemRSS: m.rss, pipeline.MemRSSAnon: m.rssAnon, pipeline.MemRSSShared: m.rssShared,
			pipeline.MemVirtual: m.virtual, pipeline.MemPeak: m.peak, pipeline.MemVirtualPeak: m.virtualPeak}
		figs.MemoryMaxHost = [pipeline.NumMemory]int64{pipeline.MemRSS: m.rssMaxHost, pipeline.MemRSSAnon: m.rssAnonMaxHost}
		output.NewEncoder(windows, nil).AppendSession(rm, ts, figs)
		if s.total == nil {
			dropWindow(rm, pipeline.WindowLifetime)
		}
		rm.MoveTo(md.ResourceMetrics().AppendEmpty())
	}
	return md
}

// stateOf turns a test's Metadata map into the contract's session state.
func stateOf(meta map[string]any) snapshot.SessionState {
	var st snapshot.SessionState
	str := map[string]*pipeline.Null[string]{
		pipeline.MetaApplicationName: &st.ApplicationName, pipeline.MetaClientAddr: &st.ClientAddr,
		pipeline.MetaClientHostname: &st.ClientHostname, pipeline.MetaState: &st.State, pipeline.MetaWaitingReason: &st.WaitingReason,
		pipeline.MetaWaitEventType: &st.WaitEventType, pipeline.MetaWaitEvent: &st.WaitEvent, pipeline.MetaBackendType: &st.BackendType,
		pipeline.MetaBackendXID: &st.BackendXID, pipeline.MetaBackendXmin: &st.BackendXmin, pipeline.MetaRsgName: &st.RsgName,
		pipeline.MetaRsgQueueDuration: &st.RsgQueueDuration, pipeline.MetaQuery: &st.Query,
	}
	times := map[string]*pipeline.Null[time.Time]{pipeline.MetaBackendStart: &st.BackendStart, pipeline.MetaXactStart: &st.XactStart,
		pipeline.MetaQueryStart: &st.QueryStart, pipeline.MetaStateChange: &st.StateChange}
	ints := map[string]*pipeline.Null[int64]{pipeline.MetaClientPort: &st.ClientPort, pipeline.MetaRsgID: &st.RsgID}
	for k, v := range meta {
		switch {
		case str[k] != nil:
			*str[k] = pipeline.Null[string]{V: v.(string), Valid: true}
		case times[k] != nil:
			t, err := time.Parse(time.RFC3339Nano, v.(string))
			if err != nil {
				panic(err)
			}
			*times[k] = pipeline.Null[time.Time]{V: t, Valid: true}
		case ints[k] != nil:
			*ints[k] = pipeline.Null[int64]{V: v.(int64), Valid: true}
		case k == pipeline.MetaWaiting:
			st.Waiting = pipeline.Null[bool]{V: v.(bool), Valid: true}
		case k == pipeline.MetaQueryTruncated:
			st.QueryTruncated = v.(bool)
		case k == pipeline.MetaBackends:
			for _, ref := range v.([]string) {
				b, err := pipeline.ParseBackendRef(ref)
				if err != nil {
					panic(err)
				}
				st.Backends = append(st.Backends, b)
			}
		default:
			panic(fmt.Sprintf("test session metadata %q is no gpotel.session.info key", k))
		}
	}
	return st
}

// dropWindow takes the points of one gpotel.window off a resource.
func dropWindow(rm pmetric.ResourceMetrics, window string) {
	sms := rm.ScopeMetrics()
	for i := range sms.Len() {
		ms := sms.At(i).Metrics()
		for j := range ms.Len() {
			if ms.At(j).Type() != pmetric.MetricTypeGauge {
				continue
			}
			ms.At(j).Gauge().DataPoints().RemoveIf(func(dp pmetric.NumberDataPoint) bool {
				w, ok := dp.Attributes().Get(pipeline.AttrWindow)
				return ok && w.Str() == window
			})
		}
	}
}
