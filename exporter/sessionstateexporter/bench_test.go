// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/gpinfo"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// benchSessions are n sessions shaped like a busy cluster's: full state, a
// 200-byte query, both windows.
func benchSessions(n int, gen int) []testSession {
	out := make([]testSession, 0, n)
	for i := 0; i < n; i++ {
		s := fullSession()
		s.sessID = int64(i + 1)
		s.pid = int64(10000 + i)
		s.user = fmt.Sprintf("user%d", i%50)
		s.meta[pipeline.MetaQuery] = fmt.Sprintf("select %d, ", i) + strings.Repeat("x", 190)
		s.meta[pipeline.MetaApplicationName] = fmt.Sprintf("app%d", i%20)
		last := *s.last
		last.user = float64((i*7919+gen*31)%10007) / 10
		s.last = &last
		out = append(out, s)
	}
	return out
}

// BenchmarkGetGPSessions: 10k sessions sorted by LAST_USERTIMESECONDS, pages
// of 100 over loopback gRPC. One iteration is a fresh snapshot followed by
// 200 page requests walking the order. The store sorts a new view in the
// orders clients asked of the previous one, so the first request after a
// snapshot (first_ms) is warm too; server_cold_ms is a sort nobody asked
// for before, measured on the service without gRPC.
func BenchmarkGetGPSessions(b *testing.B) {
	const sessions, requests = 10000, 200
	srv := startServer(b, testConfig(), nopHost())
	ctx := ctxTimeout(b)
	// Warm up the connection and the code paths once, untimed: -benchtime 1x
	// would otherwise measure process start-up.
	srv.consume(b, buildSnapshot(t0.Add(-time.Hour), benchSessions(sessions, -1)))
	for r := 0; r < 20; r++ {
		if _, err := srv.client.GetGPSessions(ctx, &yagpcc.GetGPSessionsReq{Field: byUserTimeDesc, PageSize: 100}); err != nil {
			b.Fatal(err)
		}
	}
	var latencies []time.Duration
	var colds []time.Duration
	var mallocs uint64
	var ms runtime.MemStats
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		srv.consume(b, buildSnapshot(t0.Add(time.Duration(i)*time.Second), benchSessions(sessions, i)))
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		b.StartTimer()
		req := &yagpcc.GetGPSessionsReq{Field: byUserTimeDesc, PageSize: 100}
		for r := 0; r < requests; r++ {
			start := time.Now()
			resp, err := srv.client.GetGPSessions(ctx, req)
			elapsed := time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			if len(resp.SessionsState) != 100 {
				b.Fatalf("request %d: %d sessions", r, len(resp.SessionsState))
			}
			if r == 0 {
				colds = append(colds, elapsed)
			}
			latencies = append(latencies, elapsed)
			req.PageToken = resp.NextPageToken // wraps to the first page after the last
		}
		b.StopTimer()
		runtime.ReadMemStats(&ms)
		mallocs += ms.Mallocs - before
		b.StartTimer()
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50_ms")
	b.ReportMetric(pct(0.99), "p99_ms")
	b.ReportMetric(float64(latencies[len(latencies)-1].Microseconds())/1000, "max_ms")
	slices.Sort(colds)
	b.ReportMetric(float64(colds[len(colds)-1].Microseconds())/1000, "first_ms")
	b.ReportMetric(float64(mallocs)/float64(len(latencies)), "allocs/req")

	// The server's own share, without gRPC and the client's decoding.
	b.StopTimer()
	cfg := testConfig()
	store := newStore(cfg, "", zap.NewNop(), nil)
	store.Consume(decoded(buildSnapshot(t0, benchSessions(sessions, 0))))
	svc := gpinfo.NewService(store, nil, gpinfo.Limits{DefaultPageSize: 100, MaxPageSize: 10000, MaxResponseBytes: cfg.MaxResponseBytes})
	req := &yagpcc.GetGPSessionsReq{Field: byUserTimeDesc, PageSize: 100}
	serverLatencies := make([]time.Duration, 0, requests)
	for r := 0; r < requests; r++ {
		start := time.Now()
		resp, err := svc.GetGPSessions(ctx, req)
		serverLatencies = append(serverLatencies, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		req.PageToken = resp.NextPageToken
	}
	b.ReportMetric(float64(serverLatencies[0].Microseconds())/1000, "server_cold_ms")
	slices.Sort(serverLatencies)
	b.ReportMetric(float64(serverLatencies[requests/2].Microseconds())/1000, "server_p50_ms")
	b.ReportMetric(float64(serverLatencies[requests*99/100-1].Microseconds())/1000, "server_p99_ms")
	b.ReportMetric(testing.AllocsPerRun(50, func() {
		if _, err := svc.GetGPSessions(ctx, req); err != nil {
			b.Fatal(err)
		}
	}), "server_allocs/req")
}

// BenchmarkConsumeSnapshot: turning one processor snapshot of 10k sessions
// into a served view.
func BenchmarkConsumeSnapshot(b *testing.B) {
	const sessions = 10000
	srv := startServer(b, testConfig(), nopHost())
	mds := make([]pmetric.Metrics, 0, b.N)
	for i := 0; i < b.N; i++ {
		mds = append(mds, buildSnapshot(t0.Add(time.Duration(i)*time.Second), benchSessions(sessions, i)))
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		srv.consume(b, mds[i])
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/snapshot")
}
