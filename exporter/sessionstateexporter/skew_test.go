package sessionstateexporter

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/gpotel/gpotel/proto/yagpcc"
)

// A session whose segment 1 did three times segment 0's CPU and all the
// reads: the API carries the processor's skew with that segment named.
func TestSkewReachesSystemStat(t *testing.T) {
	srv := startDefault(t)
	proc := processorInFront(t, srv)
	born := t0.Add(-time.Hour)
	for i, grow := range []float64{0, 1} {
		procs := []receiverProcess{
			{host: testCoordinator, segment: -1, pid: 7007, created: born, cpuUser: 100 * grow},
			{host: "sdw1", segment: 0, pid: 300, created: born, cpuUser: 1 * grow},
			{host: "sdw1", segment: 1, pid: 301, created: born, cpuUser: 3 * grow, readBytes: int64(1e6 * grow)},
		}
		if err := proc.ConsumeMetrics(context.Background(), receiverSnapshot(t0.Add(time.Duration(i)*time.Minute), procs)); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := srv.client.GetGPSession(ctxTimeout(t), &yagpcc.GetGPSessionReq{SessionKey: &yagpcc.SessionKey{SessId: 7, TmId: testTmID}})
	if err != nil {
		t.Fatal(err)
	}
	st := resp.GetSessionsState().GetLastMetrics().GetSystemStat()
	if math.Abs(st.GetCpuSkew()-1.0/3) > 1e-9 || st.GetCpuMaxOverAvg() != 1.5 || st.CpuHottestSegment == nil || st.GetCpuHottestSegment() != 1 || st.GetSkewSegments() != 2 {
		t.Errorf("cpu skew %.3f, max/avg %.3f, hottest %v of %d segments; want 1/3, 1.5, segment 1 of 2",
			st.GetCpuSkew(), st.GetCpuMaxOverAvg(), st.CpuHottestSegment, st.GetSkewSegments())
	}
	if st.GetIoSkew() != 0.5 || st.GetIoMaxOverAvg() != 2 || st.GetIoHottestSegment() != 1 {
		t.Errorf("io skew %.3f, max/avg %.3f, hottest %v; want 0.5, 2, segment 1", st.GetIoSkew(), st.GetIoMaxOverAvg(), st.IoHottestSegment)
	}
}
