// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/kernelunits"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadata"
	"github.com/gpotel/gpotel/segmentagent"
	"github.com/gpotel/gpotel/testbed/groundtruth"
)

// startNobody starts cmd as user nobody, a child of this test binary (which
// plays the postmaster), and ends it with the test.
func startNobody(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	// Its own process group, killed whole: a shell's children go with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	return cmd
}

// startTaskstatsAgent starts a real agent on sdw1 that reads processes of
// user nobody whose parent is this test binary or one of postmasters (each
// named by a postmaster.pid, as a database's are), and skips the test where
// taskstats does not answer.
func startTaskstatsAgent(t *testing.T, postmasters ...int) *segmentagent.Agent {
	t.Helper()
	acfg := segmentagent.NewDefaultConfig()
	acfg.ListenAddress = "127.0.0.1:0"
	acfg.AllowedUsers = []string{"nobody"}
	for i, pid := range append([]int{os.Getpid()}, postmasters...) {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("postmaster-%d.pid", i))
		if err := os.WriteFile(path, fmt.Appendf(nil, "%d\n", pid), 0o600); err != nil {
			t.Fatal(err)
		}
		acfg.PostmasterPidFiles = append(acfg.PostmasterPidFiles, path)
	}
	acfg.Hostname = "sdw1"
	agent, err := segmentagent.New(acfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := agent.Service().TaskStats().Accounting(); a.GetTaskstats() != gpotelv1.TaskStatsAvailability_TASK_STATS_AVAILABILITY_AVAILABLE {
		t.Skipf("taskstats unavailable here: %s", a.GetTaskstatsReason())
	}
	if err := agent.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Shutdown(context.Background()) })
	return agent
}

// processView is one process of a process or exited resource.
type processView struct {
	resource pcommon.Map // the resource's attributes
	start    pcommon.Timestamp
	segment  int64
}

// processesOf returns the processes of the resources of one kind, by pid,
// from their gpotel.process.info points.
func processesOf(mds []pmetric.Metrics, kind pipeline.ResourceKind) map[int64]processView {
	out := map[int64]processView{}
	for _, md := range mds {
		pipelinetest.Points(md, pipeline.MetricProcessInfo, func(a pcommon.Map, dp pmetric.NumberDataPoint) {
			if k, _ := a.Get(pipeline.AttrResourceKind); k.Str() != kind.String() {
				return
			}
			pid, _ := dp.Attributes().Get(pipeline.AttrProcessPID)
			seg, _ := dp.Attributes().Get(pipeline.AttrSegmentID)
			out[pid.Int()] = processView{resource: a, start: dp.StartTimestamp(), segment: seg.Int()}
		})
	}
	return out
}

// TestExitRecordsAreAttributedToWhatEarlierScrapesSaw runs a real agent with
// taskstats: a process a scrape saw and that then exited comes back as an
// exited resource with that scrape's identity and session; one no scrape saw
// comes back unattributed, on the segment of its parent (the "postmaster",
// here this test binary, whose children the scrapes saw).
func TestExitRecordsAreAttributedToWhatEarlierScrapesSaw(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("starting processes as nobody needs root")
	}
	agent := startTaskstatsAgent(t)

	stays := startNobody(t, "sleep", "600")
	goes := startNobody(t, "sleep", "600")
	src := &memorySource{state: &ClusterState{Dialect: dialect.GP7, TmID: 1_700_000_000, Backends: []Backend{
		{SegmentID: 0, PID: int64(stays.Process.Pid), SessionID: 7, BackendType: "client backend"},
		{SegmentID: 0, PID: int64(goes.Process.Pid), SessionID: 8, BackendType: "client backend"},
	}}, rows: []SegmentConfigRow{{Content: -1, Role: "p", Status: "u", Hostname: "mdw"}, {Content: 0, Role: "p", Status: "u", Hostname: "sdw1"}}}
	cfg := validConfig()
	cfg.Agents = map[string]string{"sdw1": agent.Addr().String()}
	cfg.HostTimeout = 10 * time.Second
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	s := unitScraper(t, cfg, src, nil, tt)

	sink := s.next.(*consumertest.MetricsSink) // the process batches
	_, _ = s.scrape(context.Background())
	seen, ok := processesOf(sink.AllMetrics(), pipeline.KindProcess)[int64(goes.Process.Pid)]
	if !ok {
		t.Fatalf("the first scrape did not see pid %d", goes.Process.Pid)
	}

	_ = goes.Process.Kill()
	_ = goes.Wait()
	src.state.Backends = src.state.Backends[:1]
	ghost := startNobody(t, "sh", "-c", "i=0; while [ $i -lt 50000 ]; do i=$((i+1)); done")
	_ = ghost.Wait()

	var attributed, unattributed *processView
	await.Until(t, "exit records of the seen and the unseen process", func() bool {
		md, _ := s.scrape(context.Background())
		for pid, v := range processesOf([]pmetric.Metrics{md}, pipeline.KindExited) {
			switch pid {
			case int64(goes.Process.Pid):
				attributed = &v
			case int64(ghost.Process.Pid):
				unattributed = &v
			}
		}
		return attributed != nil && unattributed != nil
	})
	if sess, _ := attributed.resource.Get(pipeline.AttrSessionID); sess.Int() != 8 {
		t.Errorf("the exited process a scrape saw belongs to session 8: %v", attributed.resource.AsRaw())
	}
	if attributed.start != seen.start {
		t.Errorf("creation time %v, want the scrape's %v: the processor must continue the same process", attributed.start, seen.start)
	}
	if _, ok := unattributed.resource.Get(pipeline.AttrSessionID); ok {
		t.Errorf("a process no scrape saw has no session: %v", unattributed.resource.AsRaw())
	}
	if unattributed.segment != 0 {
		t.Errorf("unattributed exit on segment %d, want 0 (its parent's)", unattributed.segment)
	}
}

// Every delay type of a process gets its point, in the table's order.
func TestEveryDelayTypeIsCollected(t *testing.T) {
	p := snapshot.Process{PID: 7, CreationTime: time.Unix(1_700_000_000, 0), HasStat: true}
	delays := pipeline.ProcessDelay.Figures()
	for i, f := range delays {
		p.Set(f, float64(i+1), 0)
	}
	md := pmetric.NewMetrics()
	e := newTestEmitter(t, metadata.NewDefaultMetricsBuilderConfig())
	e.procs.Append(md.ResourceMetrics(), &snapshot.ProcessBatch{Kind: pipeline.KindProcess, Host: "sdw1",
		Entries: []snapshot.ProcessEntry{{Session: 7, Process: p}}}, nil)
	m, ok := metricNamed(md.ResourceMetrics().At(0), pipeline.MetricProcessDelay)
	if !ok || m.Sum().DataPoints().Len() != len(delays) {
		t.Fatalf("delay points %v, want %d", m.Sum().DataPoints().Len(), len(delays))
	}
	for i, f := range delays {
		dp := m.Sum().DataPoints().At(i)
		if v, _ := dp.Attributes().Get(pipeline.AttrDelayType); v.Str() != pipeline.Figures[f].Value || dp.DoubleValue() != float64(i+1) {
			t.Errorf("point %d: %v = %v", i, dp.Attributes().AsRaw(), dp.DoubleValue())
		}
	}
}

// TestPostmasterUnrecordedCPU runs a real "postmaster" (a shell of user
// nobody) that keeps one child the scrapes see and reaps short CPU burners
// no scrape sees. Its unrecorded resource names it on its segment, and
// unrecorded plus its children's exit records account for exactly what its
// own cutime+cstime grew by, read by the test from /proc: never more, and
// never less than it had grown before the last scrape read it.
func TestPostmasterUnrecordedCPU(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("starting processes as nobody needs root")
	}
	pm := startNobody(t, "sh", "-c", `sleep 600 & while :; do sh -c 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done'; done`)
	agent := startTaskstatsAgent(t, pm.Process.Pid)
	var backend int
	await.Until(t, "the postmaster's long-lived child", func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pm.Process.Pid, pm.Process.Pid))
		if err != nil {
			return false
		}
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "sleep" {
				backend = pid
				return true
			}
		}
		return false
	})
	src := &memorySource{state: &ClusterState{Dialect: dialect.GP7, TmID: 1_700_000_000, Backends: []Backend{
		{SegmentID: 0, PID: int64(backend), SessionID: 7, BackendType: "client backend"},
	}}, rows: []SegmentConfigRow{{Content: -1, Role: "p", Status: "u", Hostname: "mdw"}, {Content: 0, Role: "p", Status: "u", Hostname: "sdw1"}}}
	cfg := validConfig()
	cfg.Agents = map[string]string{"sdw1": agent.Addr().String()}
	cfg.HostTimeout = 10 * time.Second
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	s := unitScraper(t, cfg, src, nil, tt)

	_, _ = s.scrape(context.Background()) // learns the postmaster from its child's ppid
	_, _ = s.scrape(context.Background()) // reads it: the account begins
	before := childCPU(t, pm.Process.Pid)
	var records, unrecorded, beforeLastScrape float64
	var view processView
	await.Until(t, "unrecorded CPU of the postmaster after a few scrapes of churn", func() bool {
		beforeLastScrape = childCPU(t, pm.Process.Pid)
		md, _ := s.scrape(context.Background())
		for pid := range processesOf([]pmetric.Metrics{md}, pipeline.KindExited) {
			records += cpuOf(md, pipeline.KindExited, pid)
		}
		u, ok := processesOf([]pmetric.Metrics{md}, pipeline.KindUnrecorded)[int64(pm.Process.Pid)]
		if ok {
			view, unrecorded = u, cpuOf(md, pipeline.KindUnrecorded, int64(pm.Process.Pid))
		}
		return ok && records > 0.5
	})
	after := childCPU(t, pm.Process.Pid)
	t.Logf("postmaster's reaped children: %.3f s (%.3f s before the last scrape); exit records %.3f s; unrecorded %.3f s",
		after-before, beforeLastScrape-before, records, unrecorded)
	if _, ok := view.resource.Get(pipeline.AttrSessionID); ok {
		t.Errorf("an unrecorded resource has no session: %v", view.resource.AsRaw())
	}
	if view.segment != 0 {
		t.Errorf("unrecorded CPU on segment %d, want 0 (the postmaster's)", view.segment)
	}
	// Records fetched since the account began belong to children reaped
	// after its first reading, so with the unrecorded share they cannot
	// exceed the parent's growth by more than a clock tick per read.
	if slack := 0.05; records+unrecorded > after-before+slack {
		t.Errorf("exit records %.3f s + unrecorded %.3f s exceed the postmaster's reaped %.3f s", records, unrecorded, after-before)
	}
	// The last scrape read the postmaster after this test's reading before
	// it: the account holds at least that growth (the unrecorded share is
	// Δcutime less the records, or more), to the rounding of a clock tick.
	if tick := 1 / float64(groundtruth.ClockTicks()); records+unrecorded < beforeLastScrape-before-tick {
		t.Errorf("exit records %.3f s + unrecorded %.3f s fall short of the %.3f s the postmaster had reaped before the last scrape read it",
			records, unrecorded, beforeLastScrape-before)
	}
	if unrecorded <= 0 {
		t.Errorf("no unrecorded CPU: the kernel's teardown after each exit record is never free")
	}
}

// childCPU is a process's cutime+cstime in seconds, from /proc.
func childCPU(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])) // f[0] is field 3
	cu, _ := strconv.ParseFloat(f[13], 64)
	cs, _ := strconv.ParseFloat(f[14], 64)
	return (cu + cs) / float64(groundtruth.ClockTicks())
}

// cpuOf sums process.cpu.time over the modes of one pid in the resources of one kind.
func cpuOf(md pmetric.Metrics, kind pipeline.ResourceKind, pid int64) float64 {
	var total float64
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		if k, _ := rms.At(i).Resource().Attributes().Get(pipeline.AttrResourceKind); k.Str() != kind.String() {
			continue
		}
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				if ms.At(k).Name() != pipeline.MetricProcessCPUTime {
					continue
				}
				dps := ms.At(k).Sum().DataPoints()
				for d := range dps.Len() {
					if p, _ := dps.At(d).Attributes().Get(pipeline.AttrProcessPID); p.Int() == pid {
						total += dps.At(d).DoubleValue()
					}
				}
			}
		}
	}
	return total
}

// TestAPostmasterAccountOutlivesAFailedRead: a host whose exit records or
// postmasters could not be read in one scrape (an agent slow under load)
// keeps its postmasters' reaped accounts, and the unrecorded counter goes on
// from where it was; only a complete answer without a postmaster forgets it.
func TestAPostmasterAccountOutlivesAFailedRead(t *testing.T) {
	tr := newExitTracker(zap.NewNop())
	pm := hostPID{"sdw1", 100}
	born := time.Unix(1_700_000_000, 0)
	tr.postmasters[pm] = 0
	reading := func(user float64) []parentReading {
		return []parentReading{{pid: pm.pid, segment: 0, creation: born, childUser: user}}
	}
	unrecordedUser := func(h hostExits) (float64, bool) {
		t.Helper()
		tr.beginTick()
		b := tr.unrecorded(h)
		for _, e := range b.Entries {
			if e.Process.PID == pm.pid {
				return e.Process.Values[pipeline.CPUUser].Float, true
			}
		}
		return 0, false
	}

	unrecordedUser(hostExits{host: "sdw1", parents: reading(10), parentsComplete: true}) // the account begins
	if got, ok := unrecordedUser(hostExits{host: "sdw1", parents: reading(12), parentsComplete: true}); !ok || got != 2 {
		t.Fatalf("unrecorded after the second reading = %v (present %v), want 2", got, ok)
	}
	for _, failed := range []hostExits{
		{host: "sdw1", err: context.DeadlineExceeded},        // the records timed out: postmasters not asked
		{host: "sdw1", parentsErr: context.DeadlineExceeded}, // the postmasters timed out
		{host: "sdw1", parents: nil, parentsComplete: false}, // the agent failed to read it
	} {
		if got, ok := unrecordedUser(failed); !ok || got != 2 {
			t.Errorf("after a failed read (%+v) unrecorded = %v (present %v), want the last value 2", failed, got, ok)
		}
	}
	if got, ok := unrecordedUser(hostExits{host: "sdw1", parents: reading(15), parentsComplete: true}); !ok || got != 5 {
		t.Errorf("unrecorded after the failed reads = %v (present %v), want 5: the account goes on", got, ok)
	}
	if _, ok := unrecordedUser(hostExits{host: "sdw1", parentsComplete: true}); ok {
		t.Error("a complete answer without the postmaster should forget it (restarted or moved)")
	}
	if _, ok := tr.reaped[pm]; ok {
		t.Error("the forgotten postmaster's account is still kept")
	}
}

// TestASegmentPostmasterIsLearntWithoutALiveBackend: a segment whose
// backends all live for milliseconds (connection churn; on the testbed, the
// discovery's own segment backends) never has one that a scrape reads
// alive. Its postmaster is learnt from the exit record of a backend the
// catalog listed on it, so that its children's records count from then on
// (on that segment, unattributed) instead of being dropped as no database
// process's.
func TestASegmentPostmasterIsLearntWithoutALiveBackend(t *testing.T) {
	tr := newExitTracker(zap.NewNop())
	e := newTestEmitter(t, metadata.NewDefaultMetricsBuilderConfig())
	consts := kernelunits.Host{ClkTck: 100, PageSize: 4096, BootTime: time.Unix(1_600_000_000, 0)}
	const postmaster, listed, churned = 100, 200, 300
	born := time.Now().Add(-time.Second)
	record := func(pid int64, start time.Time) *gpotelv1.ExitRecord {
		return &gpotelv1.ExitRecord{StartTimeUnixNano: start.UnixNano(), ExitTimeUnixNano: time.Now().UnixNano(),
			Stats: &gpotelv1.TaskStatsRecord{Pid: pid, Ppid: postmaster, CpuRunVirtualNs: 5e7, CpuRunRealNs: 5e7}}
	}
	// A scrape lists a backend on segment 2 that is gone before the agent is
	// asked: the agent answers nothing for it.
	tr.beginTick()
	tr.rememberAnswer("sdw2", consts, nil, map[int64]*Backend{listed: {SegmentID: 2, PID: listed, SessionID: 9, BackendType: "client backend"}})
	tr.endTick()

	// The next scrape fetches its record and one of a backend no scrape listed.
	tr.beginTick()
	md := pmetric.NewMetrics()
	st := tr.emitExits(e.procs, md.ResourceMetrics(), pcommon.NewTimestampFromTime(time.Now()), 1,
		[]hostExits{{host: "sdw2", records: []*gpotelv1.ExitRecord{record(churned, born), record(listed, born)}}})
	tr.endTick()
	if st.foreign != 0 || st.unattributed != 2 {
		t.Errorf("exit records: %d unattributed, %d not a database process's; want 2 and 0", st.unattributed, st.foreign)
	}
	exited := processesOf([]pmetric.Metrics{md}, pipeline.KindExited)
	for _, pid := range []int64{listed, churned} {
		if v, ok := exited[pid]; !ok || v.segment != 2 {
			t.Errorf("pid %d: exited %v on segment %d, want on segment 2 (its postmaster's)", pid, ok, v.segment)
		}
	}
	if seg, ok := tr.postmasters[hostPID{"sdw2", postmaster}]; !ok || seg != 2 {
		t.Errorf("postmaster %d known %v on segment %d, want segment 2: its reaped account must begin", postmaster, ok, seg)
	}

	// A pid the catalog listed and that was then reused by a process born
	// after the listing is not that backend: its parent is learnt from nothing.
	tr2 := newExitTracker(zap.NewNop())
	tr2.beginTick()
	tr2.rememberAnswer("sdw2", consts, nil, map[int64]*Backend{listed: {SegmentID: 2, PID: listed, SessionID: 9, BackendType: "client backend"}})
	tr2.endTick()
	tr2.beginTick()
	st = tr2.emitExits(e.procs, pmetric.NewMetrics().ResourceMetrics(), pcommon.NewTimestampFromTime(time.Now()), 1,
		[]hostExits{{host: "sdw2", records: []*gpotelv1.ExitRecord{record(listed, time.Now().Add(time.Minute))}}})
	if st.foreign != 1 {
		t.Errorf("a record of a pid reused after the listing: %+v, want it left out as no database process's", st)
	}
}

// exitTrackerWorld drives an exitTracker scrape by scrape with synthetic
// agent answers and exit records, on host sdw1 whose postmaster 100 serves
// segment 1 (boot time and CLK_TCK chosen so that start ticks are exact).
type exitTrackerWorld struct {
	t      *testing.T
	tr     *exitTracker
	e      *snapshotEmitter
	consts kernelunits.Host
}

const worldPostmaster = 100

func newExitTrackerWorld(t *testing.T) *exitTrackerWorld {
	return &exitTrackerWorld{t: t, tr: newExitTracker(zap.NewNop()), e: newTestEmitter(t, metadata.NewDefaultMetricsBuilderConfig()),
		consts: kernelunits.Host{ClkTck: 100, PageSize: 4096, BootTime: time.Unix(1_600_000_000, 0)}}
}

// born is boot time plus sec seconds.
func (w *exitTrackerWorld) born(sec int64) time.Time {
	return w.consts.BootTime.Add(time.Duration(sec) * time.Second)
}

// scrape runs one scrape: the agent answers for the live processes (pid →
// birth second, all children of the postmaster, session 9) and then the
// host's exit records and postmaster reading (cutime in s; < 0: not read)
// are emitted. It returns the closing batch's resources.
func (w *exitTrackerWorld) scrape(live map[int64]int64, records []*gpotelv1.ExitRecord, cutime float64) (pmetric.Metrics, exitStats) {
	w.t.Helper()
	w.tr.beginTick()
	var infos []*yagpcc.GpPidProcInfo
	asked := map[int64]*Backend{}
	for pid, sec := range live {
		infos = append(infos, &yagpcc.GpPidProcInfo{Pid: pid, ProcStat: &yagpcc.ProcStat{Ppid: worldPostmaster, Starttime: sec * w.consts.ClkTck}})
		asked[pid] = &Backend{SegmentID: 1, PID: pid, SessionID: 9, BackendType: "client backend"}
	}
	w.tr.rememberAnswer("sdw1", w.consts, infos, asked)
	h := hostExits{host: "sdw1", records: records, parentsComplete: true}
	if cutime >= 0 {
		h.parents = []parentReading{{pid: worldPostmaster, segment: 1, creation: w.born(0), childUser: cutime}}
	}
	md := pmetric.NewMetrics()
	st := w.tr.emitExits(w.e.procs, md.ResourceMetrics(), pcommon.NewTimestampFromTime(time.Now()), 1, []hostExits{h})
	w.tr.endTick()
	return md, st
}

// record is an exit record of a child of ppid born at start that ran cpu seconds, all user time.
func worldRecord(pid, ppid int64, start time.Time, cpu float64) *gpotelv1.ExitRecord {
	return &gpotelv1.ExitRecord{StartTimeUnixNano: start.UnixNano(), ExitTimeUnixNano: time.Now().UnixNano(),
		Stats: &gpotelv1.TaskStatsRecord{Pid: pid, Ppid: ppid, CpuRunVirtualNs: uint64(cpu * 1e9), UserUs: uint64(cpu * 1e6)}}
}

// An exit record goes to the process it is of: to the session of the
// backend a scrape saw only when pid and start time both match (a reused
// pid's record is unattributed, on its parent's segment); a process this
// very scrape read (a zombie) is left out, its reading holds the same
// totals; a child of no postmaster (a shell of the database user) is left out.
func TestAnExitRecordGoesToTheProcessItIsOf(t *testing.T) {
	w := newExitTrackerWorld(t)
	w.scrape(map[int64]int64{200: 1000}, nil, 5) // sees 200; learns the postmaster; its account begins

	md, st := w.scrape(map[int64]int64{300: 1010}, []*gpotelv1.ExitRecord{
		worldRecord(200, worldPostmaster, w.born(1030), 0.5), // pid 200 again, born 30 s after the one seen
		worldRecord(300, worldPostmaster, w.born(1010), 0.5), // read in this very scrape
		worldRecord(400, 555, w.born(1020), 0.5),             // a shell's child
	}, 6.5)
	if st.attributed != 0 || st.unattributed != 1 || st.live != 1 || st.foreign != 1 {
		t.Errorf("exit records: %+v, want 1 unattributed (the reused pid), 1 read live, 1 not a database process's", st)
	}
	exited := processesOf([]pmetric.Metrics{md}, pipeline.KindExited)
	if v, ok := exited[200]; !ok {
		t.Error("the reused pid's record is missing")
	} else if sess, has := v.resource.Get(pipeline.AttrSessionID); has || v.segment != 1 {
		t.Errorf("the reused pid's record went to session %v (%v) on segment %d: want no session, segment 1", sess.AsRaw(), has, v.segment)
	}
	for _, pid := range []int64{300, 400} {
		if _, ok := exited[pid]; ok {
			t.Errorf("pid %d's record is in the snapshot: want it left out", pid)
		}
	}
}

// The unrecorded counter never goes down: a record fetched a scrape before
// its parent's cutime shows the reap makes Δcutime − records negative for a
// moment, and the counter holds its value instead.
func TestUnrecordedCPUNeverGoesDown(t *testing.T) {
	w := newExitTrackerWorld(t)
	w.scrape(map[int64]int64{200: 1000}, nil, -1) // learns the postmaster
	w.scrape(nil, nil, 10)                        // the account begins at cutime 10
	var got []float64
	for _, step := range []struct {
		records []*gpotelv1.ExitRecord
		cutime  float64
	}{
		{nil, 10.5}, // 0.5 s reaped without a record
		{[]*gpotelv1.ExitRecord{worldRecord(201, worldPostmaster, w.born(1100), 2)}, 10.5}, // a record before its reap shows
		{nil, 12.75}, // the reap shows, with 0.25 s of teardown
	} {
		md, _ := w.scrape(nil, step.records, step.cutime)
		got = append(got, cpuOf(md, pipeline.KindUnrecorded, worldPostmaster))
	}
	if want := []float64{0.5, 0.5, 0.75}; !slices.EqualFunc(got, want, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
		t.Errorf("unrecorded CPU scrape by scrape %v, want %v", got, want)
	}
}

// TestCoordinatorBackendExitSaysHowItEnded: the exit record of a session's
// coordinator backend becomes an ending with its exit code, or the signal
// that killed it (docs/pipeline.md, endings resources).
func TestCoordinatorBackendExitSaysHowItEnded(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("starting processes as nobody needs root")
	}
	agent := startTaskstatsAgent(t)
	exits3 := startNobody(t, "sh", "-c", "sleep 3; exit 3")
	killed := startNobody(t, "sleep", "600")
	src := &memorySource{state: &ClusterState{Dialect: dialect.GP6, TmID: 1_700_000_000, Backends: []Backend{
		{SegmentID: -1, PID: int64(exits3.Process.Pid), SessionID: 7, BackendType: "client backend"},
		{SegmentID: -1, PID: int64(killed.Process.Pid), SessionID: 8, BackendType: "client backend"},
	}}, rows: []SegmentConfigRow{{Content: -1, Role: "p", Status: "u", Hostname: "sdw1"}}}
	cfg := validConfig()
	cfg.Agents = map[string]string{"sdw1": agent.Addr().String()}
	cfg.HostTimeout = 10 * time.Second
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	s := unitScraper(t, cfg, src, nil, tt)
	_, _ = s.scrape(context.Background())
	_ = killed.Process.Signal(syscall.SIGTERM)
	_ = killed.Wait()
	_ = exits3.Wait()
	src.state.Backends = nil

	got := map[int64]snapshot.Ending{}
	await.Until(t, "the endings of both backends", func() bool {
		md, _ := s.scrape(context.Background())
		rms := md.ResourceMetrics()
		for i := range rms.Len() {
			if pipeline.KindOf(rms.At(i).Resource().Attributes()) != pipeline.KindEndings {
				continue
			}
			h, _, _, err := snapshot.DecodeEndings(rms.At(i))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range h.Endings {
				got[e.Session] = e
			}
		}
		return len(got) == 2
	})
	if e := got[7]; !e.Exited || e.ExitCode != 3 || e.Signal != 0 || e.PID != int64(exits3.Process.Pid) || e.Time == 0 {
		t.Errorf("session 7's backend exited 3: %+v", e)
	}
	if e := got[8]; !e.Exited || e.Signal != int64(syscall.SIGTERM) {
		t.Errorf("session 8's backend was killed by SIGTERM: %+v", e)
	}
}

// A statement end's session is gp_session_id on Greenplum and the pid on
// PostgreSQL; one without a session (a connection refused at startup) is none.
func TestStatementEndNamesItsSession(t *testing.T) {
	e := &gpotelv1.StatementEnd{Pid: 300, SessionId: 14, CommandCount: 5, TimeUnixNano: 1e18, Severity: "ERROR", Sqlstate: "42703",
		Message: "column t1.b does not exist"}
	gp, ok := endingOf(e, dialect.GP6)
	if !ok || gp.Session != 14 || gp.CommandCount != 5 || gp.SQLState != "42703" {
		t.Errorf("gp6: %+v %v", gp, ok)
	}
	pg, ok := endingOf(&gpotelv1.StatementEnd{Pid: 300, TimeUnixNano: 1e18, Severity: "FATAL", Sqlstate: "57P01"}, dialect.PostgreSQL)
	if !ok || pg.Session != 300 {
		t.Errorf("postgresql: %+v %v", pg, ok)
	}
	if _, ok := endingOf(&gpotelv1.StatementEnd{Pid: 300, TimeUnixNano: 1e18, Severity: "FATAL", Sqlstate: "57P03"}, dialect.GP6); ok {
		t.Error("a Greenplum record without a session is none's")
	}
}

// A session that lives across one snapshot, as the churn workload's: its
// coordinator backend, listed by pg_stat_activity, exits before the agent
// reads /proc (no read finds it) or is read as a zombie after its record
// was fetched in the same scrape. Either way its exit record still says
// how the session ended; a record of a pid reused after the listing does not.
func TestShortSessionsTellHowTheyEnded(t *testing.T) {
	w := newExitTrackerWorld(t)
	w.scrape(map[int64]int64{200: 1000}, nil, 5) // learns the postmaster
	coordinator := func(pid int64) map[int64]*Backend {
		return map[int64]*Backend{pid: {SegmentID: -1, PID: pid, SessionID: 70 + pid, BackendType: "client backend"}}
	}
	scrape := func(infos []*yagpcc.GpPidProcInfo, asked map[int64]*Backend, records ...*gpotelv1.ExitRecord) []snapshot.Ending {
		w.tr.beginTick()
		w.tr.rememberAnswer("sdw1", w.consts, infos, asked)
		st := w.tr.emitExits(w.e.procs, pmetric.NewMetrics().ResourceMetrics(), pcommon.NewTimestampFromTime(time.Now()), 1,
			[]hostExits{{host: "sdw1", records: records, parentsComplete: true}})
		w.tr.endTick()
		return st.endings
	}
	listedSessions := func(es []snapshot.Ending) (sessions []int64) {
		for _, e := range es {
			sessions = append(sessions, e.Session)
		}
		return sessions
	}

	// Listed, gone before the read; its record comes with the next scrape.
	if got := scrape(nil, coordinator(1)); len(got) != 0 {
		t.Fatalf("endings before any record: %+v", got)
	}
	if got := scrape(nil, nil, worldRecord(1, worldPostmaster, w.born(1100), 0.01)); !slices.Equal(listedSessions(got), []int64{71}) {
		t.Errorf("a listed backend no read found exited: endings of sessions %v, want [71]", listedSessions(got))
	}
	// Listed and gone; the record, fetched before the read, in the same scrape.
	if got := scrape(nil, coordinator(2), worldRecord(2, worldPostmaster, w.born(1100), 0.01)); !slices.Equal(listedSessions(got), []int64{72}) {
		t.Errorf("a listed backend whose record came in the same scrape: endings of sessions %v, want [72]", listedSessions(got))
	}
	// Read as a zombie in the scrape that fetched its record.
	zombie := []*yagpcc.GpPidProcInfo{{Pid: 3, ProcStat: &yagpcc.ProcStat{Ppid: worldPostmaster, Starttime: 1100 * w.consts.ClkTck}}}
	if got := scrape(zombie, coordinator(3), worldRecord(3, worldPostmaster, w.born(1100), 0.01)); !slices.Equal(listedSessions(got), []int64{73}) {
		t.Errorf("a backend read as a zombie: endings of sessions %v, want [73]", listedSessions(got))
	}
	// Listed; the pid's record is of a process born after the listing.
	scrape(nil, coordinator(4))
	reused := worldRecord(4, worldPostmaster, time.Now().Add(time.Minute), 0.01)
	if got := scrape(nil, nil, reused); len(got) != 0 {
		t.Errorf("a reused pid's record ended sessions %v", listedSessions(got))
	}
}

// A scrape's creation time is /proc's start ticks after btime, which the
// kernel writes in whole seconds, cut: it is early by up to a second. An
// exit record's start is the agent's receive time less the elapsed time:
// late by the receive lag. A backend born 0.99 s into btime's second and
// heard 20 ms late (1.01 s apart, as in make run, where 1 % of the churn
// workload's sessions ended unknown) is still the process read alive, its
// exit says how its session ended; a record of the pid born 3 s after is not.
func TestAnExitRecordIsOfTheProcessReadAliveWhateverBtimesCut(t *testing.T) {
	w := newExitTrackerWorld(t)
	trueBoot := w.consts.BootTime.Add(990 * time.Millisecond) // what btime cut
	coordinator := func(pid int64) map[int64]*Backend {
		return map[int64]*Backend{pid: {SegmentID: -1, PID: pid, SessionID: 70 + pid, BackendType: "client backend"}}
	}
	scrape := func(infos []*yagpcc.GpPidProcInfo, asked map[int64]*Backend, records ...*gpotelv1.ExitRecord) exitStats {
		w.tr.beginTick()
		w.tr.rememberAnswer("sdw1", w.consts, infos, asked)
		st := w.tr.emitExits(w.e.procs, pmetric.NewMetrics().ResourceMetrics(), pcommon.NewTimestampFromTime(time.Now()), 1,
			[]hostExits{{host: "sdw1", records: records, parentsComplete: true}})
		w.tr.endTick()
		return st
	}
	w.scrape(map[int64]int64{200: 1000}, nil, -1) // learns the postmaster
	for _, tc := range []struct {
		name      string
		pid       int64
		lateBy    time.Duration // the record's start after the true birth
		bornLater time.Duration // the kernel's begin second after the true birth
		attribute bool
	}{
		{"heard 20 ms late", 5, 20 * time.Millisecond, 0, true},
		{"a reused pid, born 3 s later", 6, 3 * time.Second, 3 * time.Second, false},
		// The agent's listener waited for a CPU: the kernel's begin second says when it was born.
		{"heard 4 s late by a busy agent", 7, 4 * time.Second, 0, true},
	} {
		born := int64(1100)*w.consts.ClkTck + 37 // ticks since boot
		alive := []*yagpcc.GpPidProcInfo{{Pid: tc.pid, ProcStat: &yagpcc.ProcStat{Ppid: worldPostmaster, Starttime: born}}}
		scrape(alive, coordinator(tc.pid))
		trueBirth := trueBoot.Add(time.Duration(born) * time.Second / time.Duration(w.consts.ClkTck))
		rec := worldRecord(tc.pid, worldPostmaster, trueBirth.Add(tc.lateBy), 0.01)
		rec.Stats.BeginTimeUnix = uint64(trueBirth.Add(tc.bornLater).Unix()) // whole seconds, as the kernel cuts them
		rec.Stats.ElapsedUs = 500_000
		st := scrape(nil, nil, rec)
		if got := st.attributed == 1 && len(st.endings) == 1 && st.endings[0].Session == 70+tc.pid; got != tc.attribute {
			t.Errorf("%s: %+v, want attributed with its session's ending: %v", tc.name, st, tc.attribute)
		}
		if latestExit := trueBirth.Add(tc.bornLater + 1500*time.Millisecond); tc.attribute && time.Unix(0, st.endings[0].Time).After(latestExit) {
			t.Errorf("%s: the session ended at %v, after its backend's latest possible exit %v", tc.name,
				time.Unix(0, st.endings[0].Time), latestExit)
		}
	}
}

// A record's times are the agent's, late by however long it took to hear
// the exit; the kernel's begin second only ever brings them earlier, and a
// record without one (an old kernel) or with an unbelievable one (a broken
// agent) keeps the agent's.
func TestExitTimesAreBoundedByTheKernelsBeginSecond(t *testing.T) {
	birth := time.Unix(1_800_000_000, 300_000_000)
	heard := func(lag time.Duration, begin, elapsedUs uint64) *gpotelv1.ExitRecord {
		return &gpotelv1.ExitRecord{StartTimeUnixNano: birth.Add(lag).UnixNano(), ExitTimeUnixNano: birth.Add(lag + 2*time.Second).UnixNano(),
			Stats: &gpotelv1.TaskStatsRecord{BeginTimeUnix: begin, ElapsedUs: elapsedUs}}
	}
	for _, tc := range []struct {
		name        string
		rec         *gpotelv1.ExitRecord
		start, exit time.Time
	}{
		{"heard at once", heard(0, 1_800_000_000, 2_000_000), birth, birth.Add(2 * time.Second)},
		{"heard 5 s late", heard(5*time.Second, 1_800_000_000, 2_000_000), birth.Truncate(time.Second).Add(time.Second),
			birth.Truncate(time.Second).Add(3 * time.Second)},
		{"no begin second", heard(5*time.Second, 0, 2_000_000), birth.Add(5 * time.Second), birth.Add(7 * time.Second)},
		{"an unbelievable begin second", heard(5*time.Second, 1<<62, 2_000_000), birth.Add(5 * time.Second), birth.Add(7 * time.Second)},
		{"an unbelievable elapsed time", heard(5*time.Second, 1_800_000_000, 1<<62), birth.Add(5 * time.Second), birth.Add(7 * time.Second)},
	} {
		start, exit := exitTimes(tc.rec)
		if !start.Equal(tc.start) || !exit.Equal(tc.exit) {
			t.Errorf("%s: start %v exit %v, want %v and %v", tc.name, start, exit, tc.start, tc.exit)
		}
	}
}

// A host carried as a whole is not visited per process, yet each of its
// sightings ends exactly as if it were: a carried process is seen every
// tick, one gone is last seen the tick before, and each is forgotten
// sightingTicks after it was last seen; when the carry ends (the host is
// asked about other processes), by a delta or a full answer, each is seen
// one by one again.
func TestACarriedSightingIsLastSeenExactlyWhenItsProcessDeparts(t *testing.T) {
	asked := map[int64]*Backend{200: {SegmentID: 1, PID: 200, SessionID: 9}, 201: {SegmentID: 1, PID: 201, SessionID: 9}}
	read := func(w *exitTrackerWorld, pids ...int64) (infos []*yagpcc.GpPidProcInfo) {
		for _, pid := range pids {
			infos = append(infos, &yagpcc.GpPidProcInfo{Pid: pid, ProcStat: &yagpcc.ProcStat{Ppid: worldPostmaster, Starttime: 1000 * w.consts.ClkTck}})
		}
		return infos
	}
	for _, end := range []string{"delta", "full"} {
		w := newExitTrackerWorld(t)
		lastSeen := func(pid int64) (uint64, bool) {
			s, ok := w.tr.sighting(hostPID{"sdw1", pid})
			return s.tick, ok
		}
		tick := func(carried bool, gone []int64, unchanged []*Backend, infos []*yagpcc.GpPidProcInfo, asked map[int64]*Backend) {
			w.tr.beginTick()
			if carried {
				w.tr.rememberCarried("sdw1", gone, asked)
			} else {
				w.tr.rememberUnchanged("sdw1", unchanged)
			}
			w.tr.rememberAnswer("sdw1", w.consts, infos, asked)
			w.tr.endTick()
		}
		tick(false, nil, nil, read(w, 200, 201), asked) // tick 1: a full answer
		for range 11 {                                  // ticks 2-12: nothing moved
			tick(true, nil, nil, nil, asked)
		}
		if s200, _ := lastSeen(200); s200 != 12 {
			t.Fatalf("%s: carried through tick 12: pid 200 last seen at %d", end, s200)
		}
		// Tick 13, in two batches: 201 gone, in the second.
		w.tr.beginTick()
		for _, gone := range [][]int64{nil, {201}} {
			w.tr.rememberCarried("sdw1", gone, asked)
			w.tr.rememberAnswer("sdw1", w.consts, nil, asked)
		}
		w.tr.endTick()
		s200, _ := lastSeen(200)
		s201, _ := lastSeen(201)
		if s200 != 13 || s201 != 12 {
			t.Fatalf("%s: tick 13, pid 201 gone: last seen 200 at %d, 201 at %d; want 13 and 12", end, s200, s201)
		}
		for k := uint64(14); k <= 23; k++ {
			tick(true, []int64{201}, nil, nil, asked)
			if _, ok := lastSeen(201); ok != (k <= 12+sightingTicks) {
				t.Fatalf("%s: tick %d: pid 201's sighting kept %v, want it kept through tick %d only", end, k, ok, 12+sightingTicks)
			}
		}
		// Tick 24: 202 is asked about too, so the carry ends; 200 is seen.
		more := map[int64]*Backend{200: asked[200], 202: {SegmentID: 1, PID: 202, SessionID: 9}}
		if end == "delta" {
			tick(false, nil, []*Backend{more[200]}, read(w, 202), more)
		} else {
			tick(false, nil, nil, read(w, 200, 202), more)
		}
		if s, _ := lastSeen(200); s != 24 {
			t.Fatalf("%s: tick 24, the carry ended: pid 200 last seen at %d, want 24", end, s)
		}
		for k := uint64(25); k <= 35; k++ { // neither is asked about any more
			tick(false, nil, nil, nil, map[int64]*Backend{})
			if s, ok := lastSeen(200); ok != (k <= 24+sightingTicks) || (ok && s != 24) {
				t.Fatalf("%s: tick %d: pid 200's sighting kept %v (last seen %d), want it last seen at 24 and kept through tick %d only", end, k, ok, s, 24+sightingTicks)
			}
		}
	}
}
