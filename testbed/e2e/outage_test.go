// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/workload"
)

// envDuration reads a drill's duration from the environment, else def.
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", name, v)
	}
	return d
}

// snapshotLog records every snapshot time the API shows for a live session:
// what the pipeline produced, seen through the exporter beside the OTLP one.
type snapshotLog struct {
	mu    sync.Mutex
	times map[time.Time]bool
	errs  int
}

func (l *snapshotLog) poll(ctx context.Context, api yagpcc.GetGPInfoClient, sessID int, every time.Duration) {
	for {
		st, err := stateOf(ctx, api, sessID)
		l.mu.Lock()
		if err != nil {
			l.errs++
		} else if st != nil {
			l.times[st.GetTime().AsTime()] = true
		}
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

func (l *snapshotLog) between(from, to time.Time) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Time
	for at := range l.times {
		if !at.Before(from) && !at.After(to) {
			out = append(out, at)
		}
	}
	return out
}

// receivedPoints counts distinct data points (metric, resource, attributes,
// time) per snapshot time: a retry that delivers twice counts once.
func receivedPoints(reqs []pmetric.Metrics) (perSnapshot map[time.Time]int, total int) {
	seen := map[string]bool{}
	perSnapshot = map[time.Time]int{}
	for _, md := range reqs {
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			rm := rms.At(i)
			res := fmt.Sprint(rm.Resource().Attributes().AsRaw())
			sms := rm.ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				ms := sms.At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					m := ms.At(k)
					var pts pmetric.NumberDataPointSlice
					switch m.Type() {
					case pmetric.MetricTypeGauge:
						pts = m.Gauge().DataPoints()
					case pmetric.MetricTypeSum:
						pts = m.Sum().DataPoints()
					default:
						continue
					}
					for p := 0; p < pts.Len(); p++ {
						dp := pts.At(p)
						key := fmt.Sprint(m.Name(), res, dp.Attributes().AsRaw(), dp.Timestamp())
						if !seen[key] {
							seen[key] = true
							perSnapshot[dp.Timestamp().AsTime()]++
							total++
						}
					}
				}
			}
		}
	}
	return perSnapshot, total
}

// TestOTLPBackendOutageLosesNothing takes the OTLP backend down for
// GPOTEL_E2E_OUTAGE (default 30s: 15 ticks of config/testbed.yaml; set it to
// minutes for the full drill) while the exporter's sending queue lives on
// file_storage, brings it back, and checks that every snapshot the pipeline
// produced arrives: produced (seen through the API) against received.
func TestOTLPBackendOutageLosesNothing(t *testing.T) {
	needBinaries(t)
	outage := envDuration(t, "GPOTEL_E2E_OUTAGE", 30*time.Second)
	c := cluster.Start(t, cluster.Options{Hosts: 2, SegmentsPerHost: 2, Dialect: dialect.GP6})
	ctx := await.Context(t)
	queueDir := t.TempDir()
	s := launch(ctx, t, c, StackOptions{
		Binaries: bins,
		Config:   configPath("testbed.yaml"),
		Dir:      t.TempDir(),
		OTLPKeep: 1 << 20,
		CollectorArgs: []string{
			"--set=extensions::file_storage::directory=" + queueDir,
			"--set=service::extensions=[health_check, file_storage]",
			"--set=exporters::otlp_grpc::sending_queue::storage=file_storage",
			// Never give a batch up: the queue holds it until the backend answers.
			"--set=exporters::otlp_grpc::retry_on_failure::max_elapsed_time=0",
			"--set=exporters::otlp_grpc::retry_on_failure::max_interval=2s",
			"--set=exporters::otlp_grpc::timeout=2s",
		},
	})
	w, err := workload.Start(context.Background(), c, workload.Spec{Name: "outage-cpu", Kind: workload.CPU, Duration: outage + 3*time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop() })

	api := dialAPI(t, s.API)
	produced := &snapshotLog{times: map[time.Time]bool{}}
	pollCtx, stopPolling := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() { produced.poll(pollCtx, api, w.SessID(), 250*time.Millisecond); close(polled) }()
	t.Cleanup(func() { stopPolling(); <-polled })

	waitFor(t, "OTLP data arrives before the outage", func() (bool, string) {
		return len(sinkSnapshots(snapshotsOf(s.Sink))) >= 3, fmt.Sprintf("%d requests", s.Sink.Requests())
	})
	first := s.Sink
	addr := first.Addr()
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	downAt := time.Now()
	time.Sleep(outage)
	upAt := time.Now()
	if s.Sink, err = StartOTLPSink(addr, "", 1<<20); err != nil {
		t.Fatalf("the backend could not come back on %s: %v", addr, err)
	}
	t.Logf("injected: the OTLP backend on %s down from %s to %s (%s)", addr, downAt.Format("15:04:05"), upAt.Format("15:04:05"), upAt.Sub(downAt).Round(time.Second))

	// Produced: every snapshot the API showed from before the outage to a tick after it.
	var want []time.Time
	waitFor(t, "the API shows a snapshot after the backend is back", func() (bool, string) {
		want = produced.between(downAt.Add(-10*time.Second), upAt.Add(testbedInterval))
		last := produced.between(upAt.Add(testbedInterval), time.Now().Add(time.Hour))
		return len(last) > 0, fmt.Sprintf("%d produced so far", len(want))
	})
	duringOutage := produced.between(downAt, upAt)
	received := func() map[time.Time]bool {
		got := map[time.Time]bool{}
		for _, sn := range sinkSnapshots(append(snapshotsOf(first), snapshotsOf(s.Sink)...)) {
			got[sn.at] = true
		}
		return got
	}
	var lost []time.Time
	waitFor(t, "every produced snapshot reaches the backend", func() (bool, string) {
		got := received()
		lost = lost[:0]
		for _, at := range want {
			if !got[at] {
				lost = append(lost, at)
			}
		}
		return len(lost) == 0, fmt.Sprintf("%d of %d produced snapshots not received yet", len(lost), len(want))
	})
	perSnapshot, total := receivedPoints(append(first.Received(), s.Sink.Received()...))
	duringPoints := 0
	for _, at := range duringOutage {
		duringPoints += perSnapshot[at]
	}
	t.Logf("counts: %d snapshots produced during the outage (%d in the checked span, API polls failed %d times), all %d received; "+
		"%d data points of outage snapshots received, %d distinct data points in all; %d requests after the backend came back",
		len(duringOutage), len(want), produced.errs, len(want), duringPoints, total, s.Sink.Requests())
	if len(duringOutage) < int(outage/testbedInterval)/2 {
		t.Errorf("only %d snapshots produced during a %s outage: the drill did not cover many ticks", len(duringOutage), outage)
	}
	for _, at := range duringOutage {
		if perSnapshot[at] == 0 {
			t.Errorf("snapshot %s arrived without data points", at.Format("15:04:05.000"))
		}
	}
}
