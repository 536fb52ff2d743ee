// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/kernelunits"
	"github.com/gpotel/gpotel/internal/pipeline/sparse"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadata"
	"github.com/gpotel/gpotel/segmentagent"
	"github.com/gpotel/gpotel/segmentagent/procfixture"
)

// memorySource is a cluster without a database: hosts sdw1..sdwN with one
// segment each, every segment holding the same fixture pids.
type memorySource struct {
	state *ClusterState
	rows  []SegmentConfigRow
}

func (m *memorySource) Discover(context.Context) (*ClusterState, error) { return m.state, nil }
func (m *memorySource) SegmentConfiguration(context.Context) ([]SegmentConfigRow, error) {
	return m.rows, nil
}
func (m *memorySource) Close() {}

func newMemorySource(hosts int, pids []int) *memorySource {
	m := &memorySource{state: &ClusterState{Dialect: dialect.GP7, TmID: 1_700_000_000}}
	m.rows = append(m.rows, SegmentConfigRow{Content: -1, Role: "p", Status: "u", Hostname: "mdw"})
	for h := 0; h < hosts; h++ {
		m.rows = append(m.rows, SegmentConfigRow{Content: int64(h), Role: "p", Status: "u", Hostname: fmt.Sprintf("sdw%d", h+1)})
		for i, pid := range pids {
			sess := int64(1000 + i%50) // 50 sessions spread over every host
			m.state.Backends = append(m.state.Backends, Backend{SegmentID: int64(h), PID: int64(pid), SessionID: sess, BackendType: "client backend"})
		}
	}
	for s := 0; s < 50; s++ {
		m.state.Sessions = append(m.state.Sessions, SessionRow{PID: int64(900_000 + s), SessionID: int64(1000 + s), Datname: strp("tpch"),
			Usename: strp("gpadmin"), State: strp("active"), Query: strp("SELECT count(*) FROM lineitem")})
	}
	return m
}

// benchAgents serves one fixture procfs through n real agent services, each
// on its own loopback listener, as n emulated hosts.
func benchAgents(b *testing.B, n int, procRoot string) map[string]string {
	b.Helper()
	cfg := segmentagent.NewDefaultServiceConfig()
	cfg.ProcRoot = procRoot
	cfg.AllowedUsers = []string{strconv.Itoa(os.Getuid())}
	endpoints := map[string]string{}
	for h := 1; h <= n; h++ {
		svc, err := segmentagent.NewService(cfg, zap.NewNop(), nil)
		if err != nil {
			b.Fatal(err)
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := grpc.NewServer(grpc.MaxSendMsgSize(64 << 20))
		yagpcc.RegisterGetQueryInfoServer(srv, svc)
		go func() { _ = srv.Serve(lis) }()
		b.Cleanup(srv.Stop)
		endpoints[fmt.Sprintf("sdw%d", h)] = lis.Addr().String()
	}
	return endpoints
}

// BenchmarkScrape is one full scrape (routing, fan-out over gRPC to every
// host, conversion, pdata emission) over N hosts with P processes each.
func BenchmarkScrape(b *testing.B) {
	for _, size := range []struct{ hosts, pids int }{{10, 1000}, {100, 2000}} {
		b.Run(fmt.Sprintf("hosts=%d/pids=%d", size.hosts, size.pids), func(b *testing.B) {
			root := b.TempDir()
			pids := make([]int, size.pids)
			for i := range pids {
				pids[i] = 10_000 + i
			}
			if err := procfixture.Write(root, pids, os.Getuid()); err != nil {
				b.Fatal(err)
			}
			cfg := createDefaultConfig()
			cfg.DSN = "host=unused"
			cfg.Agents = benchAgents(b, size.hosts, root)
			cfg.Timeout = 5 * time.Minute
			cfg.HostTimeout = 4 * time.Minute
			counted := &countingConsumer{}
			s, err := newSessionScraper(cfg, receivertest.NewNopSettings(metadata.Type), newMemorySource(size.hosts, pids), counted)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.start(context.Background(), componenttest.NewNopHost()); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.shutdown(context.Background()) })
			// A first scrape opens the connections; the timed ones are steady state.
			if _, err := s.scrape(context.Background()); err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			b.ReportAllocs()
			before := memStats()
			b.ResetTimer()
			var points, resources int
			for i := 0; i < b.N; i++ {
				counted.points.Store(0)
				counted.resources.Store(0)
				md, err := s.scrape(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				points = md.DataPointCount() + int(counted.points.Load())
				resources = md.ResourceMetrics().Len() + int(counted.resources.Load())
			}
			b.StopTimer()
			reportPerProcess(b, before, size.hosts*size.pids)
			// The fixture never changes, so after the first scrape an agent
			// answer is its batch resource alone (docs/pipeline.md, sparse batches);
			// then every session, the snapshot.
			want := size.hosts*(size.pids/cfg.MaxPidsPerCall) + 50 + 1
			if resources != want {
				b.Fatalf("%d resources, want %d", resources, want)
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/scrape")
			b.ReportMetric(float64(size.hosts*size.pids), "processes/scrape")
			b.ReportMetric(float64(points), "datapoints/scrape")
		})
	}
}

// countingConsumer counts the process batches a scrape hands on.
type countingConsumer struct {
	points, resources atomic.Int64
}

func (c *countingConsumer) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }
func (c *countingConsumer) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	c.points.Add(int64(md.DataPointCount()))
	c.resources.Add(int64(md.ResourceMetrics().Len()))
	return nil
}

// BenchmarkEmitAnswers is the receiver's own share of a scrape: turning the
// agents' answers into process batches (conversion and emission), without
// procfs reads or gRPC.
func BenchmarkEmitAnswers(b *testing.B) {
	for _, size := range []struct{ hosts, pids int }{{10, 1000}, {100, 2000}} {
		b.Run(fmt.Sprintf("hosts=%d/pids=%d", size.hosts, size.pids), func(b *testing.B) {
			root := b.TempDir()
			pids := make([]int, size.pids)
			for i := range pids {
				pids[i] = 10_000 + i
			}
			if err := procfixture.Write(root, pids, os.Getuid()); err != nil {
				b.Fatal(err)
			}
			cfg := segmentagent.NewDefaultServiceConfig()
			cfg.ProcRoot = root
			cfg.AllowedUsers = []string{strconv.Itoa(os.Getuid())}
			svc, err := segmentagent.NewService(cfg, zap.NewNop(), nil)
			if err != nil {
				b.Fatal(err)
			}
			src := newMemorySource(size.hosts, pids)
			topo, err := buildTopology(src.rows, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			queries, _ := groupByHost(src.state.Backends, topo, true)
			answers := make([]answerWrite, len(queries))
			for i, q := range queries {
				req := &yagpcc.GetPidProcInfoReq{}
				byPID := map[int64]*Backend{}
				for j, p := range q.procs {
					req.SegmentProcess = append(req.SegmentProcess, &yagpcc.SegmentProcess{GpSegmentId: p.SegmentID, SessId: p.SessionID, Pid: p.PID})
					byPID[p.PID] = &queries[i].procs[j]
				}
				resp, err := svc.GetPidProcStat(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				consts, err := kernelunits.HostFromProto(resp.GetHost())
				if err != nil {
					b.Fatal(err)
				}
				answers[i] = answerWrite{host: q.host, consts: consts, infos: resp.GetPidProcData(), byPID: byPID}
			}
			emitter, err := newSnapshotEmitter(createDefaultConfig().MetricsBuilderConfig, receivertest.NewNopSettings(metadata.Type), time.Now())
			if err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			b.ReportAllocs()
			before := memStats()
			b.ResetTimer()
			written := 0
			for i := 0; i < b.N; i++ {
				written = 0
				// A new sender each time: every answer is written in full.
				outgoing := sparse.NewSender(emitter.procs, consumertest.NewNop(), false).Snapshot(time.Now(), 1)
				for j := range answers {
					sent, _, _ := emitter.emitAnswer(context.Background(), outgoing, &answers[j])
					written += sent.Written
				}
			}
			b.StopTimer()
			if written != size.hosts*size.pids {
				b.Fatalf("%d processes emitted, want %d", written, size.hosts*size.pids)
			}
			reportPerProcess(b, before, written)
		})
	}
}

func memStats() runtime.MemStats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// reportPerProcess reports time, allocations and bytes of the timed loop per
// process of one scrape (every goroutine's allocations, as allocs/op counts).
func reportPerProcess(b *testing.B, before runtime.MemStats, processes int) {
	after := memStats()
	n := float64(b.N * processes)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/process")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/process")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/process")
}

// BenchmarkGroupByHost routes a 200k-backend discovery (100 hosts x 2000)
// to its hosts, as every tick does: the rows segment by segment, and
// interleaved (each row on another segment than the row before).
func BenchmarkGroupByHost(b *testing.B) {
	pids := make([]int, 2000)
	for i := range pids {
		pids[i] = 10_000 + i
	}
	src := newMemorySource(100, pids)
	topo, err := buildTopology(src.rows, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	bySegment := src.state.Backends
	interleaved := make([]Backend, 0, len(bySegment))
	for i := range pids {
		for h := range 100 {
			interleaved = append(interleaved, bySegment[h*len(pids)+i])
		}
	}
	for _, c := range []struct {
		name     string
		backends []Backend
	}{{"by-segment", bySegment}, {"interleaved", interleaved}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if queries, _ := groupByHost(c.backends, topo, false); len(queries) != 100 {
					b.Fatalf("%d hosts, want 100", len(queries))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(c.backends)), "ns/backend")
		})
	}
}
