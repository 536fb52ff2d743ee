// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"google.golang.org/protobuf/proto"

	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// receiverProcess is one process as the gpsession receiver reports it.
type receiverProcess struct {
	session          int64 // 0: session 7
	host             string
	segment, pid     int64
	created          time.Time
	cpuUser, cpuSys  float64
	readBytes, rchar int64
	writeBytes       int64
	rss              int64
}

// receiverScrape is the receiver's snapshot (docs/pipeline.md) with a
// session resource for each of sessions (user alice, query "select <id>",
// active) and their processes.
func receiverScrape(at time.Time, sessions []int64, procs []receiverProcess) pipelinetest.Snapshot {
	s := pipelinetest.Snapshot{Time: at, TmID: testTmID, Coordinator: testCoordinator}
	hosts := []string{testCoordinator, "sdw1"}
	for _, p := range procs {
		if !slices.Contains(hosts, p.host) {
			hosts = append(hosts, p.host)
		}
	}
	for _, h := range hosts {
		n := 0
		for _, p := range procs {
			if p.host == h {
				n++
			}
		}
		s.Hosts = append(s.Hosts, pipelinetest.Host{Name: h, Up: true, Processes: int64(n)})
	}
	for _, id := range sessions {
		s.Sessions = append(s.Sessions, pipelinetest.Session{ID: id, PID: 7000 + id, DB: "sales", User: "alice", State: "active",
			Query: fmt.Sprintf("select %d", id)})
	}
	for _, p := range procs {
		s.Processes = append(s.Processes, pipelinetest.Process{Host: p.host, Segment: p.segment, Session: cmp.Or(p.session, 7),
			PID: p.pid, Created: p.created, CPUUser: p.cpuUser, CPUSystem: p.cpuSys, ReadBytes: p.readBytes,
			WriteBytes: p.writeBytes, RChar: p.rchar, RSS: p.rss})
	}
	return s
}

// receiverSnapshot is session 7's receiverScrape as one batch.
func receiverSnapshot(at time.Time, procs []receiverProcess) pmetric.Metrics {
	return receiverScrape(at, []int64{7}, procs).Metrics()
}

// receiverSnapshotOf is receiverScrape as one batch.
func receiverSnapshotOf(at time.Time, sessions []int64, procs []receiverProcess) pmetric.Metrics {
	return receiverScrape(at, sessions, procs).Metrics()
}

// processorInFront is the real snapshotdiff processor, default settings,
// started, handing its output to srv's exporter.
func processorInFront(t *testing.T, srv *testServer) processor.Metrics {
	t.Helper()
	factory := snapshotdiffprocessor.NewFactory()
	proc, err := factory.CreateMetrics(context.Background(), processortest.NewNopSettings(factory.Type()),
		factory.CreateDefaultConfig(), srv.exp)
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Start(context.Background(), nopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proc.Shutdown(context.Background()) })
	return proc
}

// feederInFront hands each snapshot through the real snapshotdiff
// processor to srv's exporter.
func feederInFront(t *testing.T, srv *testServer) func(pipelinetest.Snapshot) {
	proc := processorInFront(t, srv)
	return func(s pipelinetest.Snapshot) {
		t.Helper()
		if err := proc.ConsumeMetrics(context.Background(), s.Metrics()); err != nil {
			t.Fatal(err)
		}
	}
}

// The real snapshotdiff processor in front of the exporter: what it emits is
// what GetGPSessions reports.
func TestBehindTheSnapshotdiffProcessor(t *testing.T) {
	srv := startDefault(t)
	proc := processorInFront(t, srv)

	born := t0.Add(-time.Hour)
	first := []receiverProcess{
		{host: testCoordinator, segment: -1, pid: 7007, created: born, cpuUser: 10, cpuSys: 1, readBytes: 1000, rchar: 5000, rss: 10 << 20},
		{host: "sdw1", segment: 0, pid: 300, created: born, cpuUser: 20, cpuSys: 2, readBytes: 2000, rchar: 6000, rss: 20 << 20},
	}
	second := []receiverProcess{
		{host: testCoordinator, segment: -1, pid: 7007, created: born, cpuUser: 13, cpuSys: 1.5, readBytes: 1500, rchar: 9000, rss: 12 << 20},
		{host: "sdw1", segment: 0, pid: 300, created: born, cpuUser: 26, cpuSys: 2.5, readBytes: 4000, rchar: 8000, rss: 30 << 20},
	}
	for i, procs := range [][]receiverProcess{first, second} {
		if err := proc.ConsumeMetrics(context.Background(), receiverSnapshot(t0.Add(time.Duration(i)*time.Minute), procs)); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := srv.client.GetGPSession(ctxTimeout(t), &yagpcc.GetGPSessionReq{SessionKey: &yagpcc.SessionKey{SessId: 7, TmId: testTmID}})
	if err != nil {
		t.Fatal(err)
	}
	st := resp.SessionsState
	if !st.Time.AsTime().Equal(t0.Add(time.Minute)) || st.SessionInfo.User != "alice" || st.RunningQueryInfo.GetQueryText() != "select 7" {
		t.Fatalf("session state not carried through: %v", st)
	}
	last := st.GetLastMetrics().GetSystemStat()
	assertProtoEqual(t, last, &yagpcc.SystemStat{
		UserTimeSeconds: 9, KernelTimeSeconds: 1, RunningTimeSeconds: 10,
		ReadBytes: 2500, Rchar: 6000, Rss: 42 << 20, RssMaxHost: 30 << 20,
		WindowSeconds: 60, Processes: 2, Hosts: 2,
		// The processes reported their waits, as 0: measured, so set.
		RunDelaySeconds: proto.Float64(0), BlkioDelaySeconds: proto.Float64(0),
		// One segment took part (the coordinator does not count): nothing uneven.
		CpuMaxOverAvg: 1, CpuHottestSegment: proto.Int32(0), IoMaxOverAvg: 1, IoHottestSegment: proto.Int32(0), SkewSegments: 1,
	})
	total := st.GetTotalMetrics().GetSystemStat()
	assertProtoEqual(t, total, &yagpcc.SystemStat{
		UserTimeSeconds: 39, KernelTimeSeconds: 4, RunningTimeSeconds: 43,
		ReadBytes: 5500, Rchar: 17000, Rss: 42 << 20, RssMaxHost: 30 << 20,
		Processes: 2, Hosts: 2, RunDelaySeconds: proto.Float64(0), BlkioDelaySeconds: proto.Float64(0),
		CpuMaxOverAvg: 1, CpuHottestSegment: proto.Int32(0), IoMaxOverAvg: 1, IoHottestSegment: proto.Int32(0), SkewSegments: 1,
	})
}
