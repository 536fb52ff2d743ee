package segmentagent

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/segmentagent/internal/proctest"
	"github.com/gpotel/gpotel/segmentagent/procfixture"
)

// BenchmarkGetPidProcStat is the cost of one 1000-pid call, in-process and
// over loopback gRPC, on real processes and on a fixture tree. One b.N
// iteration makes several calls of each kind, interleaved.
func BenchmarkGetPidProcStat(b *testing.B) {
	// With CAP_NET_ADMIN the real-process calls read taskstats plus status,
	// stat and cmdline; real-1000-procfs turns taskstats off for the same pids.
	b.Run("real-1000", func(b *testing.B) {
		pids := proctest.SpawnSleepers(b, 1000)
		benchGetPidProcStat(b, "/proc", strconv.Itoa(os.Getuid()), proctest.SelfAsPostmaster(b), pids, true)
	})
	b.Run("real-1000-procfs", func(b *testing.B) {
		pids := proctest.SpawnSleepers(b, 1000)
		benchGetPidProcStat(b, "/proc", strconv.Itoa(os.Getuid()), proctest.SelfAsPostmaster(b), pids, false)
	})
	b.Run("fixture-1000", func(b *testing.B) {
		root := procfixture.TempRoot(b)
		pids := make([]int, 1000)
		p64 := make([]int64, len(pids))
		for i := range pids {
			pids[i] = 200000 + i
			p64[i] = int64(pids[i])
		}
		if err := procfixture.Write(root, pids, 101); err != nil {
			b.Fatal(err)
		}
		benchGetPidProcStat(b, root, "101", procfixture.PostmasterPidFile(root), p64, false)
	})
}

func benchGetPidProcStat(b *testing.B, root, user, postmasterPidFile string, pids []int64, useTaskstats bool) {
	const calls = 10
	cfg := NewDefaultConfig()
	cfg.Taskstats.Enabled = useTaskstats
	cfg.ListenAddress = "127.0.0.1:0"
	cfg.ProcRoot = root
	cfg.AllowedUsers = []string{user}
	cfg.PostmasterPidFiles = []string{postmasterPidFile}
	agent := startAgent(b, cfg)
	client := yagpcc.NewGetQueryInfoClient(dial(b, agent.Addr(), nil))
	req := request(pids...)
	ctx := context.Background()

	var grpcTime, localTime time.Duration
	var size int
	b.ResetTimer()
	for range b.N {
		for range calls {
			start := time.Now()
			resp, err := client.GetPidProcStat(ctx, req)
			grpcTime += time.Since(start)
			if err != nil || resp.Summary.Answered != int64(len(pids)) {
				b.Fatalf("gRPC: %v, %v", err, resp.GetSummary())
			}
			size = proto.Size(resp)

			start = time.Now()
			resp, err = agent.Service().GetPidProcStat(ctx, req)
			localTime += time.Since(start)
			if err != nil || resp.Summary.Answered != int64(len(pids)) {
				b.Fatalf("in-process: %v, %v", err, resp.GetSummary())
			}
		}
	}
	b.StopTimer()
	n := float64(b.N * calls)
	b.ReportMetric(float64(grpcTime.Microseconds())/1000/n, "grpc-ms/call")
	b.ReportMetric(float64(localTime.Microseconds())/1000/n, "inproc-ms/call")
	b.ReportMetric(float64(grpcTime.Nanoseconds())/n/float64(len(pids)), "grpc-ns/pid")
	b.ReportMetric(float64(size)/float64(len(pids)), "answer-B/pid")
	b.Logf("%s: %d pids, %d calls each: gRPC %.2f ms/call, in-process %.2f ms/call, answer %d bytes",
		agent.Service().TaskStats().Accounting().GetTaskstats(), len(pids), calls, float64(grpcTime.Microseconds())/1000/n, float64(localTime.Microseconds())/1000/n, size)
}
