// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shirou/gopsutil/v4/process"
	"google.golang.org/protobuf/proto"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/segmentagent/internal/proctest"
	"github.com/gpotel/gpotel/segmentagent/procfixture"
	"github.com/gpotel/gpotel/segmentagent/procfs"
)

// callsPerIteration is how many 1000-pid calls of each kind one b.N iteration makes.
const callsPerIteration = 10

// BenchmarkGetPidProcStat is the cost of one 1000-pid call, in-process and
// over loopback gRPC. real-1000 puts the agent's two read paths side by side
// on the same 1000 real processes: an agent with taskstats (the kernel's
// record plus status, stat and cmdline) and one without (the five /proc
// files), called in pairs whose order alternates so both meet the same load.
func BenchmarkGetPidProcStat(b *testing.B) {
	b.Run("real-1000", func(b *testing.B) {
		pids := proctest.SpawnSleepers(b, 1000)
		user, postmaster := strconv.Itoa(os.Getuid()), proctest.SelfAsPostmaster(b)
		kernel := newBenchedAgent(b, "/proc", user, postmaster, true)
		procfsOnly := newBenchedAgent(b, "/proc", user, postmaster, false)
		if a := kernel.agent.Service().TaskStats().Accounting(); a.GetTaskstats() != gpotelv1.TaskStatsAvailability_TASK_STATS_AVAILABILITY_AVAILABLE {
			b.Logf("taskstats unavailable here (%s: %s): the procfs path only", a.GetTaskstats(), a.GetTaskstatsReason())
			b.ResetTimer()
			for range b.N {
				for range callsPerIteration {
					procfsOnly.call(b, pids)
				}
			}
			procfsOnly.report(b, "")
			return
		}
		var ratios []float64
		b.ResetTimer()
		for i := range b.N {
			for c := range callsPerIteration {
				var ts, pf time.Duration
				if (i*callsPerIteration+c)%2 == 0 {
					ts, pf = kernel.call(b, pids), procfsOnly.call(b, pids)
				} else {
					pf, ts = procfsOnly.call(b, pids), kernel.call(b, pids)
				}
				ratios = append(ratios, float64(ts)/float64(pf))
			}
		}
		b.StopTimer()
		kernel.report(b, "taskstats-")
		procfsOnly.report(b, "procfs-")
		slices.Sort(ratios)
		ratio, median := float64(kernel.inproc)/float64(procfsOnly.inproc), ratios[len(ratios)/2]
		b.ReportMetric(ratio, "taskstats/procfs")
		b.ReportMetric(median, "taskstats/procfs-median")
		b.Logf("%d real pids, %d call pairs: in-process taskstats %.2f ms/call, procfs %.2f ms/call: %.3fx (median pair %.3fx)",
			len(pids), len(ratios), kernel.msPerCall(kernel.inproc), procfsOnly.msPerCall(procfsOnly.inproc), ratio, median)
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
		a := newBenchedAgent(b, root, "101", procfixture.PostmasterPidFile(root), false)
		b.ResetTimer()
		for range b.N {
			for range callsPerIteration {
				a.call(b, p64)
			}
		}
		a.report(b, "")
	})
}

// benchedAgent is one agent called in-process and over gRPC, with the totals.
type benchedAgent struct {
	agent        *Agent
	client       yagpcc.GetQueryInfoClient
	inproc, grpc time.Duration
	calls, pids  int
	answerBytes  int
}

func newBenchedAgent(b *testing.B, root, user, postmasterPidFile string, taskstats bool) *benchedAgent {
	cfg := NewDefaultConfig()
	cfg.Taskstats.Enabled = taskstats
	cfg.ListenAddress = "127.0.0.1:0"
	cfg.ProcRoot = root
	cfg.AllowedUsers = []string{user}
	cfg.PostmasterPidFiles = []string{postmasterPidFile}
	a := startAgent(b, cfg)
	return &benchedAgent{agent: a, client: yagpcc.NewGetQueryInfoClient(dial(b, a.Addr(), nil))}
}

// call makes one call over gRPC and one in-process and returns the latter's time.
func (a *benchedAgent) call(b *testing.B, pids []int64) time.Duration {
	req, ctx := request(pids...), context.Background()
	start := time.Now()
	resp, err := a.client.GetPidProcStat(ctx, req)
	a.grpc += time.Since(start)
	if err != nil || resp.Summary.Answered != int64(len(pids)) {
		b.Fatalf("gRPC: %v, %v", err, resp.GetSummary())
	}
	a.answerBytes = proto.Size(resp)

	start = time.Now()
	resp, err = a.agent.Service().GetPidProcStat(ctx, req)
	took := time.Since(start)
	a.inproc += took
	if err != nil || resp.Summary.Answered != int64(len(pids)) {
		b.Fatalf("in-process: %v, %v", err, resp.GetSummary())
	}
	a.calls++
	a.pids = len(pids)
	return took
}

func (a *benchedAgent) msPerCall(d time.Duration) float64 {
	return float64(d.Nanoseconds()) / 1e6 / float64(a.calls)
}

func (a *benchedAgent) report(b *testing.B, prefix string) {
	b.ReportMetric(a.msPerCall(a.inproc), prefix+"inproc-ms/call")
	b.ReportMetric(a.msPerCall(a.grpc), prefix+"grpc-ms/call")
	b.ReportMetric(float64(a.answerBytes)/float64(a.pids), prefix+"answer-B/pid")
	b.Logf("%s%s: %d pids, %d calls: gRPC %.2f ms/call, in-process %.2f ms/call, answer %d bytes",
		prefix, a.agent.Service().TaskStats().Accounting().GetTaskstats(), a.pids, a.calls, a.msPerCall(a.grpc), a.msPerCall(a.inproc), a.answerBytes)
}

// stretchPids is how many pids one reader reads before the next takes over:
// one block of the agent's read stage.
const stretchPids = pidsPerWorker

// BenchmarkAgentVsGopsutil reads the same 1000 real processes with the
// agent's read stage (Service.readAll on one goroutine, cgroups off: with
// taskstats, and with the five /proc files) and with gopsutil's process
// package as the contrib hostmetrics process scraper reads a process with its
// default metrics. The readers take turns in stretches of stretchPids pids,
// the first of each stretch rotating, so all meet the same machine load.
// Reports µs and allocations per pid of each, and gopsutil's ratio to each
// agent path: of the totals, and the median of the stretch ratios.
func BenchmarkAgentVsGopsutil(b *testing.B) {
	pids := proctest.SpawnSleepers(b, 1000)
	user, postmaster := strconv.Itoa(os.Getuid()), proctest.SelfAsPostmaster(b)
	var stretches [][]int64
	for from := 0; from < len(pids); from += stretchPids {
		stretches = append(stretches, pids[from:min(from+stretchPids, len(pids))])
	}
	readers := []*benchedReader{
		agentReader(b, "agent-taskstats", user, postmaster, true, stretches),
		agentReader(b, "agent-procfs", user, postmaster, false, stretches),
		{name: "gopsutil", read: func(b *testing.B, s int) { readWithGopsutil(b, stretches[s]) }},
	}
	for _, r := range readers { // warm up: dial taskstats sockets, fill pools and caches
		r.count(b, stretches)
	}
	const rounds = 3
	ratios := make([][]float64, 2) // gopsutil's time over each agent path's, per stretch
	b.ResetTimer()
	for i := range b.N {
		for round := range rounds {
			for s, stretch := range stretches {
				first := (i*rounds*len(stretches) + round*len(stretches) + s) % len(readers)
				var took [3]time.Duration
				for k := range readers {
					took[(first+k)%len(readers)] = readers[(first+k)%len(readers)].timed(b, s, len(stretch))
				}
				for a := range ratios {
					ratios[a] = append(ratios[a], float64(took[2])/float64(took[a]))
				}
			}
		}
	}
	b.StopTimer()
	for _, r := range readers {
		r.allocsPerPid = r.count(b, stretches)
		b.ReportMetric(r.usPerPid(), r.name+"-us/pid")
		b.ReportMetric(r.allocsPerPid, r.name+"-allocs/pid")
	}
	gops := readers[2]
	var log strings.Builder
	for a, agent := range readers[:2] {
		ratio := gops.usPerPid() / agent.usPerPid()
		slices.Sort(ratios[a])
		median := ratios[a][len(ratios[a])/2]
		b.ReportMetric(ratio, "gopsutil/"+agent.name)
		b.ReportMetric(median, "gopsutil/"+agent.name+"-median")
		fmt.Fprintf(&log, "; %.2fx %s (median stretch %.2fx; %.1f µs, %.1f allocs/pid)", ratio, agent.name, median, agent.usPerPid(), agent.allocsPerPid)
	}
	b.Logf("%d real pids, stretches of %d: gopsutil %.1f µs, %.1f allocs/pid%s", len(pids), stretchPids, gops.usPerPid(), gops.allocsPerPid, log.String())
}

// benchedReader reads stretches of pids and keeps its time and pid count.
type benchedReader struct {
	name         string
	read         func(b *testing.B, stretch int)
	took         time.Duration
	pids         int
	allocsPerPid float64
}

// timed reads stretch s, of n pids, and returns how long it took.
func (r *benchedReader) timed(b *testing.B, s, n int) time.Duration {
	start := time.Now()
	r.read(b, s)
	took := time.Since(start)
	r.took += took
	r.pids += n
	return took
}

// count reads every stretch once, untimed, and returns the allocations per pid.
func (r *benchedReader) count(b *testing.B, stretches [][]int64) float64 {
	var before, after runtime.MemStats
	n := 0
	runtime.ReadMemStats(&before)
	for s := range stretches {
		r.read(b, s)
		n += len(stretches[s])
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(n)
}

func (r *benchedReader) usPerPid() float64 {
	return float64(r.took.Nanoseconds()) / 1e3 / float64(r.pids)
}

// agentReader is the service's read stage, as GetPidProcStat runs it after
// the request is decoded, on one goroutine.
func agentReader(b *testing.B, name, user, postmaster string, taskstats bool, stretches [][]int64) *benchedReader {
	cfg := NewDefaultServiceConfig()
	cfg.AllowedUsers, cfg.PostmasterPidFiles = []string{user}, []string{postmaster}
	cfg.ReadParallelism, cfg.Cgroups.Disabled, cfg.Taskstats.Enabled = 1, true, taskstats
	s, err := NewService(cfg, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	want := gpotelv1.ProcSource_PROC_SOURCE_PROCFS
	if taskstats {
		if a := s.TaskStats().Accounting(); a.GetTaskstats() != gpotelv1.TaskStatsAvailability_TASK_STATS_AVAILABILITY_AVAILABLE {
			b.Skipf("taskstats unavailable here: %s %s", a.GetTaskstats(), a.GetTaskstatsReason())
		}
		want = gpotelv1.ProcSource_PROC_SOURCE_TASKSTATS
	}
	works := make([][]*yagpcc.SegmentProcess, len(stretches))
	for i, pids := range stretches {
		works[i] = request(pids...).GetSegmentProcess()
	}
	return &benchedReader{name: name, read: func(b *testing.B, stretch int) {
		work := works[stretch]
		results := make([]readResult, len(work))
		if err := s.readAll(context.Background(), work, results); err != nil {
			b.Fatal(err)
		}
		for i := range results {
			if results[i].outcome != procfs.Answered || results[i].info.GetSource() != want {
				b.Fatalf("%s, pid %d: %v %v, source %v", name, work[i].GetPid(), results[i].outcome, results[i].err, results[i].info.GetSource())
			}
		}
	}}
}

// readWithGopsutil reads each process as the contrib hostmetrics process
// scraper does on Linux with its default metrics: the resource attributes
// (executable path and name, cgroup, command line, owner, start time,
// parent), then CPU times, memory and disk I/O.
func readWithGopsutil(b *testing.B, pids []int64) {
	ctx := context.Background()
	for _, pid := range pids {
		p, err := process.NewProcessWithContext(ctx, int32(pid)) // #nosec G115 -- pids fit in 22 bits
		if err != nil {
			b.Fatalf("gopsutil, pid %d: %v", pid, err)
		}
		_, exeErr := p.ExeWithContext(ctx)
		_, nameErr := p.NameWithContext(ctx)
		cgroup, cgroupErr := os.ReadFile(filepath.Join("/proc", strconv.Itoa(int(p.Pid)), "cgroup"))
		_ = strings.TrimSuffix(string(cgroup), "\n")
		_, cmdlineErr := p.CmdlineSliceWithContext(ctx)
		_, userErr := p.UsernameWithContext(ctx)
		_, createErr := p.CreateTimeWithContext(ctx)
		_, ppidErr := p.PpidWithContext(ctx)
		_, timesErr := p.TimesWithContext(ctx)
		_, memErr := p.MemoryInfoWithContext(ctx)
		_, ioErr := p.IOCountersWithContext(ctx)
		if err := errors.Join(exeErr, nameErr, cgroupErr, cmdlineErr, userErr, createErr, ppidErr, timesErr, memErr, ioErr); err != nil {
			b.Fatalf("gopsutil, pid %d: %v", pid, err)
		}
	}
}
