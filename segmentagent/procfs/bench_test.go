// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	prom "github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/gpotel/gpotel/segmentagent/internal/proctest"
	"github.com/gpotel/gpotel/segmentagent/procfixture"
)

const benchProcesses = 1000

var benchFiles = []string{"status", "stat", "io", "schedstat", "cmdline"}

// floorReader is the floor the Reader is measured against: a plain
// open/read/close of the same five files into one reused buffer, nothing parsed.
type floorReader struct {
	root string
	path []byte
	buf  []byte
}

func (f *floorReader) read(pid int64) (int, error) {
	total := 0
	for _, file := range benchFiles {
		f.path = append(f.path[:0], f.root...)
		f.path = append(f.path, '/')
		f.path = strconv.AppendInt(f.path, pid, 10)
		f.path = append(f.path, '/')
		f.path = append(f.path, file...)
		f.path = append(f.path, 0)
		fd, err := openat(unix.AT_FDCWD, f.path, unix.O_RDONLY)
		if err != nil {
			return total, err
		}
		n, err := read(fd, f.buf)
		closeFD(fd)
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

func readWithPrometheus(fs prom.FS, pid int64) error {
	p, err := fs.Proc(int(pid))
	if err != nil {
		return err
	}
	if _, err := p.NewStatus(); err != nil {
		return err
	}
	if _, err := p.Stat(); err != nil {
		return err
	}
	if _, err := p.IO(); err != nil {
		return err
	}
	if _, err := p.Schedstat(); err != nil {
		return err
	}
	_, err = p.CmdLine()
	return err
}

// BenchmarkReadProcesses reads the same pids with the Reader, with the floor,
// and with prometheus/procfs, interleaved in rounds so that all three meet
// the same machine state; one b.N iteration covers every round.
func BenchmarkReadProcesses(b *testing.B) {
	b.Run("real-1000", func(b *testing.B) {
		pids := proctest.SpawnSleepers(b, benchProcesses)
		benchReadProcesses(b, "/proc", pids, int64(os.Getuid()))
	})
	b.Run("fixture-1000", func(b *testing.B) {
		root := procfixture.TempRoot(b)
		pids := make([]int, benchProcesses)
		for i := range pids {
			pids[i] = 100000 + i
		}
		if err := procfixture.Write(root, pids, 101); err != nil {
			b.Fatal(err)
		}
		p64 := make([]int64, len(pids))
		for i, p := range pids {
			p64[i] = int64(p)
		}
		benchReadProcesses(b, root, p64, 101)
	})
}

// benchChunk is how many pids one timed stretch covers; the floor and the
// Reader alternate stretch by stretch, first one then the other, so that
// both meet the same machine load, which on a shared host moves a lot. The
// median of the stretch-pair ratios is robust to a stretch that lost the CPU.
const benchChunk = 5

func benchReadProcesses(b *testing.B, root string, pids []int64, uid int64) {
	const rounds = 5
	reader := NewReader(root)
	floor := &floorReader{root: root, buf: make([]byte, initialBufferSize)}
	fs, err := prom.NewFS(root)
	if err != nil {
		b.Fatal(err)
	}
	allow := allowUIDs(uid)
	readFloor := func(chunk []int64) time.Duration {
		start := time.Now()
		for _, pid := range chunk {
			if _, err := floor.read(pid); err != nil {
				b.Fatalf("floor, pid %d: %v", pid, err)
			}
		}
		return time.Since(start)
	}
	readReader := func(chunk []int64) time.Duration {
		start := time.Now()
		for _, pid := range chunk {
			if _, outcome, err := reader.Read(pid, allow); outcome != Answered {
				b.Fatalf("reader, pid %d: %v %v", pid, outcome, err)
			}
		}
		return time.Since(start)
	}
	var readerTime, floorTime, promTime time.Duration
	var ratios []float64
	b.ResetTimer()
	for range b.N {
		for round := range rounds {
			for i := 0; i < len(pids); i += benchChunk {
				chunk := pids[i:min(i+benchChunk, len(pids))]
				var f, r time.Duration
				if (round+i/benchChunk)%2 == 0 {
					f = readFloor(chunk)
					r = readReader(chunk)
				} else {
					r = readReader(chunk)
					f = readFloor(chunk)
				}
				floorTime += f
				readerTime += r
				ratios = append(ratios, float64(r)/float64(f))
			}
		}
		// prometheus/procfs is measured apart: its garbage would tax the others' turns.
		start := time.Now()
		for _, pid := range pids {
			if err := readWithPrometheus(fs, pid); err != nil {
				b.Fatalf("prometheus/procfs, pid %d: %v", pid, err)
			}
		}
		promTime += time.Since(start)
	}
	b.StopTimer()
	reads := float64(b.N * rounds * len(pids))
	perPid := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / reads }
	promPerPid := float64(promTime.Nanoseconds()) / float64(b.N*len(pids))
	b.ReportMetric(perPid(readerTime), "ns/pid")
	b.ReportMetric(perPid(floorTime), "floor-ns/pid")
	b.ReportMetric(promPerPid, "promfs-ns/pid")
	slices.Sort(ratios)
	median := ratios[len(ratios)/2]
	b.ReportMetric(perPid(readerTime)/perPid(floorTime), "x-floor")
	b.ReportMetric(median, "x-floor-median")
	b.ReportMetric(promPerPid/perPid(floorTime), "promfs-x-floor")
	b.Logf("%s: %d pids × %d rounds: reader %.0f ns/pid, floor %.0f ns/pid (%.3fx, median of %d stretch pairs %.3fx); prometheus/procfs %.0f ns/pid",
		root, len(pids), rounds, perPid(readerTime), perPid(floorTime), perPid(readerTime)/perPid(floorTime),
		len(ratios), median, promPerPid)
}
