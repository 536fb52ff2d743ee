// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"flag"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/filter"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/internal/pipeline/sparse"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadata"
)

var update = flag.Bool("update", false, "write the golden files from what the code produces")

// recordThroughBuilder records one figure through mdatagen's builder, the
// reference the contract's encoder is held to: its Record method of the
// figure's metric, found by the metric's name (process.cpu.time:
// RecordProcessCPUTimeDataPoint), so a new figure needs no line here. The
// method takes the time, the value, the pid and, where the metric has one,
// the figure's attribute value as mdatagen's enum of it.
func recordThroughBuilder(t *testing.T, mb *metadata.MetricsBuilder, ts pcommon.Timestamp, pid int64, f pipeline.Figure, v snapshot.Value) {
	t.Helper()
	row := &pipeline.Figures[f]
	name := "record" + strings.NewReplacer(".", "", "_", "").Replace(row.Metric.Name) + "datapoint"
	builder := reflect.ValueOf(mb)
	var record reflect.Value
	for i := range builder.NumMethod() {
		if strings.EqualFold(builder.Type().Method(i).Name, name) {
			record = builder.Method(i)
		}
	}
	if !record.IsValid() {
		t.Fatalf("mdatagen's builder has no Record method for %s", row.Metric.Name)
	}
	args := []reflect.Value{reflect.ValueOf(ts), reflect.ValueOf(v.Int), reflect.ValueOf(pid)}
	if record.Type().In(1).Kind() == reflect.Float64 {
		args[1] = reflect.ValueOf(v.Float)
	}
	if record.Type().NumIn() == 4 {
		args = append(args, enumValue(t, record.Type().In(3), row.Value))
	}
	record.Call(args)
}

// enumValue is the value of one of mdatagen's attribute enums whose String is s.
func enumValue(t *testing.T, enum reflect.Type, s string) reflect.Value {
	t.Helper()
	for n := range 64 {
		v := reflect.New(enum).Elem()
		v.SetInt(int64(n))
		if v.Interface().(fmt.Stringer).String() == s {
			return v
		}
	}
	t.Fatalf("%s has no value %q", enum, s)
	return reflect.Value{}
}

var (
	contractCreation = time.Unix(1_700_000_010, 0).UTC()
	contractTime     = pcommon.NewTimestampFromTime(time.Unix(1_700_000_500, 0))
)

// contractProcesses are two sessions' processes with every figure; pid
// 5001 read no io, schedstat, status RSS split or taskstats record.
func contractProcesses() []snapshot.ProcessEntry {
	var out []snapshot.ProcessEntry
	for i, e := range []struct {
		session, pid int64
		partial      bool
	}{{78, 5000, false}, {77, 5001, true}, {77, 5002, false}} {
		p := snapshot.Process{PID: e.pid, CreationTime: contractCreation, HasStat: true}
		for f := range pipeline.NumFigures {
			if e.partial && (pipeline.Figures[f].Metric == pipeline.ProcessDiskIO || pipeline.Figures[f].Metric == pipeline.ProcessMemoryRSS ||
				pipeline.Figures[f].Metric == pipeline.ProcessDelay || f == pipeline.RunDelay) {
				continue
			}
			n := int64(i*1000+int(f)*10) + 1
			p.Set(f, float64(n)/8, n)
		}
		out = append(out, snapshot.ProcessEntry{Session: e.session, Segment: int64(i), BackendType: "client backend", Process: p})
	}
	return out
}

// builderProcessBatch writes the processes through mdatagen's builder, one
// resource per session in id order.
func builderProcessBatch(t *testing.T, mbc metadata.MetricsBuilderConfig, entries []snapshot.ProcessEntry) pmetric.Metrics {
	t.Helper()
	mb := metadata.NewMetricsBuilder(mbc, receivertest.NewNopSettings(metadata.Type), metadata.WithStartTime(pcommon.NewTimestampFromTime(contractCreation)))
	for _, session := range []int64{77, 78} {
		for _, e := range entries {
			if e.Session != session {
				continue
			}
			mb.RecordGpotelProcessInfoDataPoint(contractTime, 1, e.Process.PID, e.Segment, e.BackendType, e.System, e.Sparse)
			for f := range pipeline.NumFigures {
				if v := e.Process.Values[f]; v.OK {
					recordThroughBuilder(t, mb, contractTime, e.Process.PID, f, v)
				}
			}
		}
		rb := mb.NewResourceBuilder()
		rb.SetGpotelResourceKindProcess()
		rb.SetGpotelTmID(42)
		rb.SetHostName("sdw1")
		rb.SetGpotelSessionID(session)
		mb.EmitForResource(metadata.WithResource(rb.Emit()))
	}
	return mb.Emit()
}

// switchedConfigs are the user's switches the equality holds under.
func switchedConfigs() map[string]metadata.MetricsBuilderConfig {
	out := map[string]metadata.MetricsBuilderConfig{"defaults": metadata.NewDefaultMetricsBuilderConfig()}

	c := metadata.NewDefaultMetricsBuilderConfig()
	c.Metrics.ProcessCPUTime.EnabledAttributes = []metadata.ProcessCPUTimeMetricAttributeKey{metadata.ProcessCPUTimeMetricAttributeKeyProcessPid}
	c.Metrics.GpotelProcessMemoryRss.EnabledAttributes = []metadata.GpotelProcessMemoryRssMetricAttributeKey{metadata.GpotelProcessMemoryRssMetricAttributeKeyProcessPid}
	c.Metrics.GpotelProcessMemoryRss.AggregationStrategy = metadata.AggregationStrategyAvg
	c.Metrics.GpotelProcessDelay.EnabledAttributes = []metadata.GpotelProcessDelayMetricAttributeKey{metadata.GpotelProcessDelayMetricAttributeKeyProcessPid}
	c.Metrics.GpotelProcessDelay.AggregationStrategy = metadata.AggregationStrategyMax
	c.Metrics.ProcessPagingFaults.EnabledAttributes = []metadata.ProcessPagingFaultsMetricAttributeKey{metadata.ProcessPagingFaultsMetricAttributeKeyProcessPid}
	c.Metrics.ProcessPagingFaults.AggregationStrategy = metadata.AggregationStrategyMin
	c.Metrics.GpotelHostUp.EnabledAttributes = nil
	c.Metrics.GpotelPressureStallRatio.EnabledAttributes = []metadata.GpotelPressureStallRatioMetricAttributeKey{metadata.GpotelPressureStallRatioMetricAttributeKeyPressureResource}
	out["data-point attributes off"] = c

	c = metadata.NewDefaultMetricsBuilderConfig()
	c.Metrics.GpotelProcessMemorySwap.Enabled = false
	c.Metrics.ProcessThreadCount.Enabled = false
	c.Metrics.GpotelCgroupTasks.Enabled = false
	c.ResourceAttributes.GpotelSessionID.Enabled = false
	c.ResourceAttributes.GpotelDialect.Enabled = false
	out["metrics and resource attributes off"] = c

	c = metadata.NewDefaultMetricsBuilderConfig()
	c.ResourceAttributes.GpotelSessionID.MetricsExclude = []filter.Config{{Strict: "78"}}
	c.ResourceAttributes.HostName.MetricsInclude = []filter.Config{{Regex: "^(sdw1|mdw)$"}}
	out["resource filters"] = c
	return out
}

// The receiver writes process batches with the contract's encoder; under
// every switch they are what mdatagen's builder would write for the same
// values (docs/pipeline.md says so).
func TestProcessBatchIsWhatTheBuilderWrites(t *testing.T) {
	for name, mbc := range switchedConfigs() {
		t.Run(name, func(t *testing.T) {
			e, err := newSnapshotEmitter(mbc, receivertest.NewNopSettings(metadata.Type), testStart)
			if err != nil {
				t.Fatal(err)
			}
			entries := contractProcesses()
			got := pmetric.NewMetrics()
			e.procs.Append(got.ResourceMetrics(), &snapshot.ProcessBatch{Time: contractTime, TmID: 42, Host: "sdw1",
				Kind: pipeline.KindProcess, Entries: entries}, nil)
			want := builderProcessBatch(t, mbc, entries)
			if err := pmetrictest.CompareMetrics(want, got); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// contractClosing is a closing batch with every kind of resource it holds.
func contractClosing() *snapshot.Closing {
	named := "default_group"
	stall := func(avg float64) *gpotelv1.PressureStall {
		return &gpotelv1.PressureStall{Avg10: avg, Avg60: avg / 2, Avg300: avg / 4, TotalUs: int64(avg * 1e6)}
	}
	db, user := "postgres", "gpadmin"
	state := "active"
	return &snapshot.Closing{
		Time: time.Unix(1_700_000_500, 0), TmID: 42, Dialect: string(dialect.GP7), Coordinator: "mdw",
		Hosts: []snapshot.HostAnswer{{Host: "mdw", Up: true, Processes: 1, CPUs: 8}, {Host: "sdw1", Up: true, Processes: 2, CPUs: 64}, {Host: "sdw2", Processes: 1}},
		Readings: []snapshot.HostReading{
			{Host: "sdw1", Pressure: &gpotelv1.Pressure{
				Cpu: &gpotelv1.ResourcePressure{Some: stall(10)}, Io: &gpotelv1.ResourcePressure{Some: stall(2), Full: stall(1)}},
				Groups: []snapshot.Cgroup{
					{Group: &gpotelv1.ControlGroup{Version: 2, Path: "/gpdb/6437", ResourceGroupOid: 6437,
						Pressure:   &gpotelv1.Pressure{Memory: &gpotelv1.ResourcePressure{Some: stall(4), Full: stall(3)}},
						TaskStates: &gpotelv1.TaskStates{Source: gpotelv1.TaskStates_SOURCE_PROC_STAT, Running: 2, Sleeping: 5, Other: 1}},
						ResourceGroupName: &named},
					{Group: &gpotelv1.ControlGroup{Version: 1, Hierarchy: "cpu,cpuacct", Path: "/gpdb/7000", ResourceGroupOid: 7000,
						TaskStates: &gpotelv1.TaskStates{Source: gpotelv1.TaskStates_SOURCE_CGROUPSTATS, Running: 1, IoWait: i64p(3)}}},
				}},
			{Host: "sdw2", Groups: []snapshot.Cgroup{{Group: &gpotelv1.ControlGroup{Version: 2, Path: "/system.slice",
				TaskStates: &gpotelv1.TaskStates{Source: gpotelv1.TaskStates_SOURCE_PROC_STAT, Uninterruptible: 1, Stopped: 1}}}}},
		},
		Sessions: []snapshot.Session{
			{ID: 77, PID: 4000, Database: &db, User: &user, State: snapshot.SessionState{State: pipeline.NullOf(&state)},
				CgroupPressure: []snapshot.GroupPressure{{Name: "default_group", Resource: "memory", Kind: "some", Avg10: 4}, {Name: "default_group", Resource: "memory", Kind: "full", Avg10: 3}},
				Greenplum: &snapshot.GreenplumSession{Spill: []snapshot.Spill{{Segment: 0, CommandCount: 5, Bytes: 1 << 30, Files: 3}, {Segment: 1, CommandCount: 5, Bytes: 1 << 20, Files: 1}},
					Wait:   &snapshot.LockWait{Segment: -1, Mode: "AccessShareLock", Object: "public.t", Blocker: 78, BlockerMode: "AccessExclusiveLock"},
					Memory: []snapshot.SegmentMemory{{Segment: 0, Bytes: 96 << 20, Runaway: true}}}},
			{ID: 78, PID: 4001, System: true},
		},
	}
}

// builderClosing writes the closing batch through mdatagen's builder.
func builderClosing(mbc metadata.MetricsBuilderConfig, c *snapshot.Closing) pmetric.Metrics {
	mb := metadata.NewMetricsBuilder(mbc, receivertest.NewNopSettings(metadata.Type), metadata.WithStartTime(pcommon.NewTimestampFromTime(testStart)))
	ts := pcommon.NewTimestampFromTime(c.Time)
	rb := mb.NewResourceBuilder()
	for _, h := range c.Hosts {
		up := int64(0)
		if h.Up {
			up = 1
		}
		mb.RecordGpotelHostUpDataPoint(ts, up, h.Host)
		mb.RecordGpotelHostProcessesDataPoint(ts, h.Processes, h.Host)
		if h.CPUs > 0 {
			mb.RecordGpotelHostCpusDataPoint(ts, int64(h.CPUs), h.Host)
		}
	}
	rb.SetGpotelResourceKindSnapshot()
	rb.SetGpotelTmID(c.TmID)
	rb.SetGpotelDialect(c.Dialect)
	rb.SetHostName(c.Coordinator)
	mb.EmitForResource(metadata.WithResource(rb.Emit()))
	pressure := func(p *gpotelv1.Pressure) {
		for _, l := range snapshot.PressureLines(p) {
			r, k := metadata.MapAttributePressureResource[l.Resource], metadata.MapAttributePressureKind[l.Kind]
			mb.RecordGpotelPressureStallTimeDataPoint(ts, float64(l.Stall.GetTotalUs())/1e6, r, k)
			mb.RecordGpotelPressureStallRatioDataPoint(ts, l.Stall.GetAvg10()/100, r, k, metadata.AttributePressureWindow10s)
			mb.RecordGpotelPressureStallRatioDataPoint(ts, l.Stall.GetAvg60()/100, r, k, metadata.AttributePressureWindow60s)
			mb.RecordGpotelPressureStallRatioDataPoint(ts, l.Stall.GetAvg300()/100, r, k, metadata.AttributePressureWindow300s)
		}
	}
	for _, r := range c.Readings {
		if r.Pressure != nil {
			pressure(r.Pressure)
			rb.SetGpotelResourceKindHost()
			rb.SetGpotelTmID(c.TmID)
			rb.SetHostName(r.Host)
			mb.EmitForResource(metadata.WithResource(rb.Emit()))
		}
		for _, cg := range r.Groups {
			g := cg.Group
			if g.GetPressure() != nil {
				pressure(g.GetPressure())
			}
			if ts0 := g.GetTaskStates(); ts0 != nil {
				mb.RecordGpotelCgroupTasksDataPoint(ts, ts0.GetRunning(), metadata.AttributeTaskStateRunning)
				mb.RecordGpotelCgroupTasksDataPoint(ts, ts0.GetSleeping(), metadata.AttributeTaskStateSleeping)
				mb.RecordGpotelCgroupTasksDataPoint(ts, ts0.GetUninterruptible(), metadata.AttributeTaskStateUninterruptible)
				mb.RecordGpotelCgroupTasksDataPoint(ts, ts0.GetStopped(), metadata.AttributeTaskStateStopped)
				if ts0.IoWait != nil {
					mb.RecordGpotelCgroupTasksDataPoint(ts, ts0.GetIoWait(), metadata.AttributeTaskStateIoWait)
				}
				if ts0.GetSource() == gpotelv1.TaskStates_SOURCE_PROC_STAT {
					mb.RecordGpotelCgroupTasksDataPoint(ts, ts0.GetOther(), metadata.AttributeTaskStateOther)
					rb.SetGpotelCgroupTasksSourceProcStat()
				} else {
					rb.SetGpotelCgroupTasksSourceCgroupstats()
				}
			}
			rb.SetGpotelResourceKindCgroup()
			rb.SetGpotelTmID(c.TmID)
			rb.SetHostName(r.Host)
			rb.SetGpotelCgroupPath(g.GetPath())
			rb.SetGpotelCgroupVersion(int64(g.GetVersion()))
			if g.GetHierarchy() != "" {
				rb.SetGpotelCgroupControllers(g.GetHierarchy())
			}
			if g.GetResourceGroupOid() != 0 {
				rb.SetGpotelResourceGroupOid(int64(g.GetResourceGroupOid()))
				if cg.ResourceGroupName != nil {
					rb.SetGpotelResourceGroupName(*cg.ResourceGroupName)
				}
			}
			mb.EmitForResource(metadata.WithResource(rb.Emit()))
		}
	}
	for _, s := range c.Sessions {
		mb.RecordGpotelSessionInfoDataPoint(ts, 1)
		for _, p := range s.CgroupPressure {
			mb.RecordGpotelSessionCgroupPressureDataPoint(ts, p.Avg10/100, p.Name,
				metadata.MapAttributePressureResource[p.Resource], metadata.MapAttributePressureKind[p.Kind])
		}
		if g := s.Greenplum; g != nil {
			for _, sp := range g.Spill {
				mb.RecordGpotelSessionSpillSizeDataPoint(ts, sp.Bytes, sp.Segment, sp.CommandCount)
				mb.RecordGpotelSessionSpillFilesDataPoint(ts, sp.Files, sp.Segment, sp.CommandCount)
			}
			if w := g.Wait; w != nil {
				mb.RecordGpotelSessionLockWaitDataPoint(ts, 1, w.Segment, w.Mode, w.BlockerMode)
			}
			for _, m := range g.Memory {
				runaway := int64(0)
				if m.Runaway {
					runaway = 1
				}
				mb.RecordGpotelSessionVmemUsageDataPoint(ts, m.Bytes, m.Segment)
				mb.RecordGpotelSessionVmemRunawayDataPoint(ts, runaway, m.Segment)
			}
		}
		rb.SetGpotelResourceKindSession()
		rb.SetGpotelTmID(c.TmID)
		rb.SetGpotelSessionID(s.ID)
		rb.SetGpotelSessionPid(s.PID)
		rb.SetGpotelSessionSystem(s.System)
		if s.Own {
			rb.SetGpotelSessionOwn(true)
		}
		if s.Database != nil {
			rb.SetDbNamespace(*s.Database)
		}
		if s.User != nil {
			rb.SetGpotelSessionUser(*s.User)
		}
		rb.SetHostName(c.Coordinator)
		mb.EmitForResource(metadata.WithResource(rb.Emit()))
	}
	return mb.Emit()
}

// copyMetadata gives want's metrics the Metadata got's carry, metric by
// metric of each name in order (gpotel.session.info's state, the lock
// wait's object and blocker): the builder writes none (the golden file
// checks it).
func copyMetadata(got, want pmetric.Metrics) {
	metas := map[string][]pcommon.Map{}
	eachMetric(got, func(m pmetric.Metric) { metas[m.Name()] = append(metas[m.Name()], m.Metadata()) })
	seen := map[string]int{}
	eachMetric(want, func(m pmetric.Metric) {
		if i := seen[m.Name()]; i < len(metas[m.Name()]) {
			metas[m.Name()][i].CopyTo(m.Metadata())
		}
		seen[m.Name()]++
	})
}

func eachMetric(md pmetric.Metrics, fn func(pmetric.Metric)) {
	for i := range md.ResourceMetrics().Len() {
		sms := md.ResourceMetrics().At(i).ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				fn(ms.At(k))
			}
		}
	}
}

// The closing batch, too, is what mdatagen's builder writes for the same
// values under every switch.
func TestClosingBatchIsWhatTheBuilderWrites(t *testing.T) {
	for name, mbc := range switchedConfigs() {
		t.Run(name, func(t *testing.T) {
			e, err := newSnapshotEmitter(mbc, receivertest.NewNopSettings(metadata.Type), testStart)
			if err != nil {
				t.Fatal(err)
			}
			got := e.closing.Encode(contractClosing())
			want := builderClosing(mbc, contractClosing())
			copyMetadata(got, want)
			if err := pmetrictest.CompareMetrics(want, got); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The receiver's output for a scrape (every process batch and the closing
// batch) is the golden file: what the contract looks like to a third-party
// component reading it. go test -run Golden -update writes it.
func TestReceiverOutputMatchesTheGoldenFile(t *testing.T) {
	em := testEmission(t)
	em.snap.results[1].cgroups.add(answerIn([]*gpotelv1.ControlGroup{{Version: 2, Path: "/gpdb/6437", ResourceGroupOid: 6437,
		Pressure: cpuPressure(12), TaskStates: &gpotelv1.TaskStates{Source: gpotelv1.TaskStates_SOURCE_PROC_STAT, Running: 1}}},
		cpuPressure(3), map[int64]uint32{5000: 0}), map[int64]*Backend{5000: {PID: 5000, SessionID: 77}})
	em.snap.resourceGroups = map[uint32]string{6437: "default_group"}
	md, _ := em.emit(t, newTestEmitter(t, metadata.NewDefaultMetricsBuilderConfig()))
	pipelinetest.CompareGolden(t, filepath.Join("testdata", "golden", "scrape.json"), md, *update)
}

// The next scrape, in which only the coordinator backend's user CPU moved,
// is the second golden file: sparse batches (docs/pipeline.md, rule 8),
// the coordinator's holding that process with its user CPU alone, sdw1's
// none, and sdw2, which did not answer before, in full.
func TestSparseReceiverOutputMatchesTheGoldenFile(t *testing.T) {
	em := testEmission(t)
	e := newTestEmitter(t, metadata.NewDefaultMetricsBuilderConfig())
	sink := new(consumertest.MetricsSink)
	s := sparse.NewSender(e.procs, sink, false)
	em.emitThrough(t, e, s, sink)
	em.snap.time = em.snap.time.Add(2 * time.Second)
	em.answers[0][0].ProcStat.Utime += 10
	md, _ := em.emitThrough(t, e, s, sink)
	pipelinetest.CompareGolden(t, filepath.Join("testdata", "golden", "scrape-sparse.json"), md, *update)
}
