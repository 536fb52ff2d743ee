// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// clusterLoad is a synthetic Greenplum cluster: sessions with one backend
// per segment plus the coordinator's, a busy fifth and an idle rest, and a
// little process churn every scrape.
type clusterLoad struct {
	rng      *rand.Rand
	procs    []snapshot.ProcessSample
	busy     []bool
	nextPID  int32
	segments int
	hosts    []string
	now      int64
}

const benchInterval = 10 * time.Second

func newClusterLoad(processes int) *clusterLoad {
	l := &clusterLoad{rng: rand.New(rand.NewSource(1)), segments: 64, nextPID: 1000, now: epoch.UnixNano()}
	for h := 1; h <= 16; h++ {
		l.hosts = append(l.hosts, fmt.Sprintf("sdw%d", h))
	}
	l.hosts = append(l.hosts, "mdw")
	l.procs = make([]snapshot.ProcessSample, processes)
	l.busy = make([]bool, processes)
	for i := range l.procs {
		l.spawn(i)
		p := &l.procs[i]
		for c := range pipeline.NumCounters { // a history before the first scrape
			p.Values[c] = l.rng.Int63n(1 << 32)
		}
	}
	return l
}

// spawn puts a fresh process in slot i; slot i belongs to session
// i/(segments+1) and its segment i%(segments+1)-1.
func (l *clusterLoad) spawn(i int) {
	seg := i%(l.segments+1) - 1
	host := l.hosts[len(l.hosts)-1]
	if seg >= 0 {
		host = l.hosts[seg%(len(l.hosts)-1)]
	}
	l.nextPID++
	l.procs[i] = snapshot.ProcessSample{
		Kind: pipeline.KindProcess, Host: host, TmID: testTmID, Session: int64(i/(l.segments+1) + 1),
		PID: l.nextPID, Creation: l.now - int64(l.rng.Intn(1000))*int64(time.Millisecond),
		Present: 1<<pipeline.NumFigures - 1,
	}
	p := &l.procs[i]
	p.Values[pipeline.MemoryUsage], p.Values[pipeline.RSSAnon], p.Values[pipeline.RSSFile] = 64<<20, 16<<20, 48<<20
	p.Values[pipeline.MemoryVirtual], p.Values[pipeline.MemoryPeak], p.Values[pipeline.MemoryVirtualPeak] = 2<<30, 80<<20, 2<<30
	l.busy[i] = l.rng.Intn(5) == 0
}

// advance moves the cluster one scrape interval on.
func (l *clusterLoad) advance() {
	l.now += int64(benchInterval)
	for i := range l.procs {
		if l.rng.Intn(200) == 0 { // 0.5% exit and are replaced per scrape
			l.spawn(i)
		}
		p := &l.procs[i]
		if !l.busy[i] {
			p.Values[pipeline.SwitchesVoluntary] += int64(l.rng.Intn(4))
			continue
		}
		p.Values[pipeline.CPUUser] += l.rng.Int63n(int64(8 * time.Second))
		p.Values[pipeline.CPUSystem] += l.rng.Int63n(int64(time.Second))
		p.Values[pipeline.DiskRead] += l.rng.Int63n(64 << 20)
		p.Values[pipeline.DiskWrite] += l.rng.Int63n(8 << 20)
		p.Values[pipeline.DiskDelay] += l.rng.Int63n(int64(500 * time.Millisecond))
		p.Values[pipeline.CharsRead] += l.rng.Int63n(128 << 20)
		p.Values[pipeline.CharsWrite] += l.rng.Int63n(16 << 20)
		p.Values[pipeline.SyscallsRead] += l.rng.Int63n(20000)
		p.Values[pipeline.SyscallsWrite] += l.rng.Int63n(2000)
		p.Values[pipeline.FaultsMinor] += l.rng.Int63n(5000)
		p.Values[pipeline.SwitchesVoluntary] += l.rng.Int63n(2000)
		p.Values[pipeline.SwitchesInvoluntary] += l.rng.Int63n(500)
		p.Values[pipeline.RunDelay] += l.rng.Int63n(int64(2 * time.Second))
	}
}

// threadCPU is the CPU time of the calling OS thread (Linux RUSAGE_THREAD):
// unlike wall time it does not grow when other work on the machine takes
// the CPU away. 0 where unsupported.
func threadCPU() time.Duration {
	const rusageThread = 1
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkStore200kProcesses30Snapshots measures the ring buffer itself:
// each op ingests 30 snapshots of 200k processes (windows 1m and 5m, one
// scrape every 10 s) and computes the figures after each.
func BenchmarkStore200kProcesses30Snapshots(b *testing.B) {
	const processes, snapshots = 200_000, 30
	windows := []time.Duration{time.Minute, 5 * time.Minute}
	var ingestNS, figuresNS, ingestCPUNS, figuresCPUNS, bytesPer, recordBytesPer, heapInUse, storeHeap float64
	for range b.N {
		b.StopTimer()
		load := newClusterLoad(processes)
		hosts := make([]snapshot.HostAnswer, len(load.hosts))
		for i, h := range load.hosts {
			hosts[i] = snapshot.HostAnswer{Host: h, Up: true}
		}
		base := heapAlloc()
		s := newStore(windows, 0)
		var ingest, figs, ingestCPU, figsCPU time.Duration
		runtime.LockOSThread()
		for range snapshots {
			load.advance()
			b.StartTimer()
			start, startCPU := time.Now(), threadCPU()
			if err := s.begin(load.now); err != nil {
				b.Fatal(err)
			}
			for i := range load.procs {
				if err := s.add(&load.procs[i]); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.commit(hosts); err != nil {
				b.Fatal(err)
			}
			mid, midCPU := time.Now(), threadCPU()
			f := s.computeFigures()
			end, endCPU := time.Now(), threadCPU()
			b.StopTimer()
			runtime.KeepAlive(f)
			ingest += mid.Sub(start)
			figs += end.Sub(mid)
			ingestCPU += midCPU - startCPU
			figsCPU += endCPU - midCPU
		}
		runtime.UnlockOSThread()
		var retained, recordBytes int
		for _, sn := range s.windows.retained {
			retained += len(sn.rows)
			recordBytes += cap(sn.rows)*4 + cap(sn.steps) + cap(sn.bySession)*8
		}
		// Drop the reusable ingest scratch so only retained state is counted.
		s.records, s.scratch, s.memBySH, s.sortCounts = nil, nil, nil, nil
		clear(s.memIndex)
		after := heapAlloc()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		runtime.KeepAlive(s)
		runtime.KeepAlive(load)
		bytesPer = float64(after-base) / float64(retained)
		storeHeap = float64(after-base) / (1 << 20)
		recordBytesPer = float64(recordBytes) / float64(retained)
		heapInUse = float64(ms.HeapInuse) / (1 << 20)
		ingestNS = float64(ingest.Nanoseconds()) / snapshots
		figuresNS = float64(figs.Nanoseconds()) / snapshots
		ingestCPUNS = float64(ingestCPU.Nanoseconds()) / snapshots
		figuresCPUNS = float64(figsCPU.Nanoseconds()) / snapshots
	}
	b.ReportMetric(bytesPer, "B/process-snapshot")
	b.ReportMetric(recordBytesPer, "record-B/process-snapshot")
	b.ReportMetric(heapInUse, "heap-inuse-MiB")
	b.ReportMetric(storeHeap, "store-heap-MiB")
	b.ReportMetric(ingestNS, "ns/snapshot-ingest")
	b.ReportMetric(ingestNS/processes, "ns/process-ingest")
	b.ReportMetric(figuresNS, "ns/figures")
	b.ReportMetric(figuresNS/float64(len(windows)), "ns/window")
	b.ReportMetric(ingestCPUNS, "cpu-ns/snapshot-ingest")
	b.ReportMetric(figuresCPUNS, "cpu-ns/figures")
}

// BenchmarkConsumeSnapshot measures the whole ConsumeMetrics path (pdata
// decode, ingest, figures, output) for a 20k-process snapshot.
func BenchmarkConsumeSnapshot(b *testing.B) {
	const processes = 20_000
	load := newClusterLoad(processes)
	build := func() pmetric.Metrics {
		load.advance()
		s := pipelinetest.Snapshot{Time: time.Unix(0, load.now), TmID: testTmID, Coordinator: "mdw"}
		for _, h := range load.hosts {
			s.Hosts = append(s.Hosts, pipelinetest.Host{Name: h, Up: true})
		}
		sessions := map[int64]bool{}
		for i := range load.procs {
			p := &load.procs[i]
			if !sessions[p.Session] {
				sessions[p.Session] = true
				s.Sessions = append(s.Sessions, pipelinetest.Session{ID: p.Session, PID: p.Session, State: "active"})
			}
			c := &p.Values
			s.Processes = append(s.Processes, pipelinetest.Process{
				Host: p.Host, Session: p.Session, PID: int64(p.PID), Created: time.Unix(0, p.Creation),
				CPUUser: float64(c[pipeline.CPUUser]) / 1e9, CPUSystem: float64(c[pipeline.CPUSystem]) / 1e9,
				ReadBytes: c[pipeline.DiskRead], WriteBytes: c[pipeline.DiskWrite], CancelledWrite: c[pipeline.CancelledWrite],
				DiskDelay: float64(c[pipeline.DiskDelay]) / 1e9, RChar: c[pipeline.CharsRead], WChar: c[pipeline.CharsWrite],
				SyscR: c[pipeline.SyscallsRead], SyscW: c[pipeline.SyscallsWrite], MajorFaults: c[pipeline.FaultsMajor], MinorFault: c[pipeline.FaultsMinor],
				Voluntary: c[pipeline.SwitchesVoluntary], Involuntary: c[pipeline.SwitchesInvoluntary], RunDelay: float64(c[pipeline.RunDelay]) / 1e9,
				RSS: p.Values[pipeline.MemoryUsage], Virtual: p.Values[pipeline.MemoryVirtual],
			})
		}
		return s.Metrics()
	}
	p, _ := newTestProcessor(b, &Config{Windows: []time.Duration{time.Minute, 5 * time.Minute}})
	if err := p.ConsumeMetrics(context.Background(), build()); err != nil {
		b.Fatal(err)
	}
	var total, cpu time.Duration
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for range b.N {
		b.StopTimer()
		md := build()
		runtime.GC() // the build's garbage is not the processor's cost
		b.StartTimer()
		start, startCPU := time.Now(), threadCPU()
		if err := p.ConsumeMetrics(context.Background(), md); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		cpu += threadCPU() - startCPU
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/snapshot")
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N)/processes, "ns/process")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/processes, "cpu-ns/process")
}

// beside is one part of the processor timed beside the window figures of
// the same snapshots of the synthetic 200k-process cluster.
type beside struct {
	begin   func(n int, now int64)          // before snapshot n's processes; may be nil
	process func(p *snapshot.ProcessSample) // per process added; may be nil
	run     func(s *store)                  // the part timed
}

// timeBesideWindowFigures feeds 10 snapshots per b.N of the 200k-process
// cluster into a store and returns, per snapshot, the thread CPU of part.run
// and of the window figures (the reference) on that snapshot.
func timeBesideWindowFigures(b *testing.B, part beside) (partNs, figuresNs float64) {
	const processes, snapshots = 200_000, 10
	load := newClusterLoad(processes)
	hosts := make([]snapshot.HostAnswer, len(load.hosts))
	for i, h := range load.hosts {
		hosts[i] = snapshot.HostAnswer{Host: h, Up: true}
	}
	s := newStore([]time.Duration{time.Minute, 5 * time.Minute}, 0)
	var partCPU, figuresCPU time.Duration
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	for range b.N {
		for n := range snapshots {
			load.advance()
			if err := s.begin(load.now); err != nil {
				b.Fatal(err)
			}
			if part.begin != nil {
				part.begin(n, load.now)
			}
			for i := range load.procs {
				if err := s.add(&load.procs[i]); err != nil {
					b.Fatal(err)
				}
				if part.process != nil {
					part.process(&load.procs[i])
				}
			}
			if err := s.commit(hosts); err != nil {
				b.Fatal(err)
			}
			start := threadCPU()
			runtime.KeepAlive(s.computeFigures())
			mid := threadCPU()
			part.run(s)
			end := threadCPU()
			figuresCPU += mid - start
			partCPU += end - mid
		}
	}
	n := float64(b.N * snapshots)
	return float64(partCPU.Nanoseconds()) / n, float64(figuresCPU.Nanoseconds()) / n
}
