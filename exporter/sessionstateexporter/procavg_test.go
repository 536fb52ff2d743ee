package sessionstateexporter

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/gpotel/gpotel/proto/yagpcc"
)

// The processor's smoothed figures reach SessionState.proc_avg, one ProcAvg
// per time constant, shortest first.
func TestProcAvgCarriesTheSmoothedFigures(t *testing.T) {
	srv := startDefault(t)
	proc := processorInFront(t, srv)

	born := t0.Add(-time.Hour)
	snaps := [][]receiverProcess{
		{{host: "sdw1", segment: 0, pid: 300, created: born, cpuUser: 20, readBytes: 2000, rss: 20 << 20}},
		{{host: "sdw1", segment: 0, pid: 300, created: born, cpuUser: 50, readBytes: 8000, rss: 20 << 20}},
	}
	for i, procs := range snaps {
		if err := proc.ConsumeMetrics(context.Background(), receiverSnapshot(t0.Add(time.Duration(i)*time.Minute), procs)); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := srv.client.GetGPSession(ctxTimeout(t), &yagpcc.GetGPSessionReq{SessionKey: &yagpcc.SessionKey{SessId: 7, TmId: testTmID}})
	if err != nil {
		t.Fatal(err)
	}
	avgs := resp.SessionsState.GetProcAvg()
	if len(avgs) != 3 {
		t.Fatalf("proc_avg has %d entries, want one per default time constant (1m, 5m, 15m): %v", len(avgs), avgs)
	}
	// One 60 s interval at 0.5 cores, 100 B/s and 20 MiB, from 0.
	for i, tau := range []float64{60, 300, 900} {
		a := avgs[i]
		share := 1 - math.Exp(-60/tau)
		if a.TimeConstantSeconds != tau {
			t.Errorf("proc_avg[%d].time_constant_seconds = %v, want %v", i, a.TimeConstantSeconds, tau)
		}
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"cpu_cores", a.CpuCores, 0.5 * share},
			{"read_bytes_per_second", a.ReadBytesPerSecond, 100 * share},
			{"write_bytes_per_second", a.WriteBytesPerSecond, 0},
			{"rss_bytes", a.RssBytes, float64(20<<20) * share},
		} {
			if math.Abs(c.got-c.want) > 1e-9*max(1, c.want) {
				t.Errorf("tau %vs: %s = %v, want %v", tau, c.name, c.got, c.want)
			}
		}
	}
}
