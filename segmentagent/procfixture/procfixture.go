// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package procfixture writes a fake procfs tree that the agent's reader reads
// like the real one: /proc/<pid>/{stat,status,io,schedstat,cmdline} for many
// processes, plus the host files <root>/stat (btime) and
// <root>/sys/kernel/osrelease. Other packages use it for scale tests and
// benchmarks where starting thousands of backends is not practical.
package procfixture

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/sync/errgroup"
)

// Defaults of the host files.
const (
	BootTimeUnix  = 1795246391
	KernelRelease = "6.1.0-gpotel-fixture"
	// PostmasterPID is the parent of the processes a tree holds, unless one names another.
	PostmasterPID = 900
)

// Process is one fake process. Zero counters get plausible values derived
// from the pid, so a tree of many processes is not uniform.
type Process struct {
	PID int
	// PPID is the parent; 0 means PostmasterPID.
	PPID      int
	UID       int
	Comm      string // at most 15 bytes on a real kernel; not enforced
	Cmdline   string // the process title, written as PostgreSQL leaves it: NUL-padded
	UTime     int64  // clock ticks
	STime     int64  // clock ticks
	StartTime int64  // clock ticks after boot
	RSSPages  int64
	ReadBytes int64
	// WriteBytes is /proc/<pid>/io write_bytes.
	WriteBytes int64
	RunTimeNS  int64
	RunDelayNS int64
	// OldKernel writes a status without RssAnon/RssFile/RssShmem/VmSwap and no schedstat, as 4.4 and older print.
	OldKernel bool
}

// Write writes a tree of PostgreSQL backends, one per pid, all owned by uid,
// and their postmaster (PostmasterPID, uid's too) in its data directory
// <root>/pgdata: <root>/<PostmasterPID>/cwd links there, and its
// postmaster.pid (PostmasterPidFile) names it, as on a real host.
func Write(root string, pids []int, uid int) error {
	procs := make([]Process, len(pids))
	for i, pid := range pids {
		procs[i] = Process{
			PID:     pid,
			UID:     uid,
			Comm:    "postgres",
			Cmdline: fmt.Sprintf("postgres:  5432, gpadmin tpch 10.0.0.1(%d) con%d seg%d cmd3 SELECT", 40000+pid%20000, pid%5000, pid%8),
		}
	}
	if err := WriteProcesses(root, procs); err != nil {
		return err
	}
	return writePostmaster(root, uid)
}

// PostmasterPidFile is the postmaster.pid that Write puts in the postmaster's data directory.
func PostmasterPidFile(root string) string {
	return filepath.Join(root, "pgdata", "postmaster.pid")
}

func writePostmaster(root string, uid int) error {
	pm := Process{PID: PostmasterPID, PPID: 1, UID: uid, Comm: "postgres", Cmdline: "/usr/lib/postgresql/16/bin/postgres -D " + filepath.Join(root, "pgdata")}
	if err := writeProcess(root, &pm, make([]byte, 0, 4096)); err != nil {
		return err
	}
	dataDir := filepath.Join(root, "pgdata")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	pidFile := fmt.Sprintf("%d\n%s\n%d\n5432\n/tmp\n*\n", PostmasterPID, dataDir, BootTimeUnix)
	if err := os.WriteFile(PostmasterPidFile(root), []byte(pidFile), 0o600); err != nil {
		return err
	}
	cwd := filepath.Join(root, strconv.Itoa(PostmasterPID), "cwd")
	if err := os.Remove(cwd); err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.Symlink(filepath.Join("..", "pgdata"), cwd)
}

// WriteProcesses writes the host files and one directory per process, with
// one writer goroutine per CPU.
func WriteProcesses(root string, procs []Process) error {
	if err := WriteHost(root, BootTimeUnix, KernelRelease); err != nil {
		return err
	}
	workers := min(runtime.GOMAXPROCS(0), max(1, len(procs)/64))
	var g errgroup.Group
	for w := range workers {
		g.Go(func() error {
			buf := make([]byte, 0, 4096)
			for i := w; i < len(procs); i += workers {
				if err := writeProcess(root, &procs[i], buf); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// TempRoot returns a fresh directory for a fixture tree, removed when the
// test ends. It prefers /dev/shm: on tmpfs a tree is written about ten times
// faster than on a disk file system.
func TempRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "gpotel-procfixture-")
	if err != nil {
		return tb.TempDir()
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// WriteHost writes <root>/stat with a btime line and <root>/sys/kernel/osrelease.
func WriteHost(root string, bootTimeUnix int64, release string) error {
	if err := os.MkdirAll(filepath.Join(root, "sys", "kernel"), 0o755); err != nil {
		return err
	}
	stat := fmt.Sprintf("cpu  25363 0 9380 72872 309 0 110 65 0 0\ncpu0 12208 0 4475 37229 31 0 19 30 0 0\n"+
		"intr 0\nctxt 123456\nbtime %d\nprocesses 19544\nprocs_running 1\nprocs_blocked 0\n", bootTimeUnix)
	if err := os.WriteFile(filepath.Join(root, "stat"), []byte(stat), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, "sys", "kernel", "osrelease"), []byte(release+"\n"), 0o644)
}

func orDefault(v, def int64) int64 {
	if v != 0 {
		return v
	}
	return def
}

func writeProcess(root string, p *Process, buf []byte) error {
	if p.PID <= 0 {
		return fmt.Errorf("procfixture: pid %d is not a process id", p.PID)
	}
	dir := filepath.Join(root, strconv.Itoa(p.PID))
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return err
	}
	seed := int64(p.PID)
	ppid := p.PPID
	if ppid == 0 {
		ppid = PostmasterPID
	}
	comm := p.Comm
	if comm == "" {
		comm = "postgres"
	}
	utime := orDefault(p.UTime, 100+seed%7919)
	stime := orDefault(p.STime, 20+seed%1543)
	start := orDefault(p.StartTime, 50000+seed%100000)
	rss := orDefault(p.RSSPages, 3000+seed%9000)
	readBytes := orDefault(p.ReadBytes, 4096*(seed%50000))
	writeBytes := orDefault(p.WriteBytes, 8192*(seed%20000))
	runNS := orDefault(p.RunTimeNS, (utime+stime)*10_000_000)
	delayNS := orDefault(p.RunDelayNS, seed*1234%100_000_000)

	buf = fmt.Appendf(buf[:0], "%d (%s) S %d 900 900 0 -1 4194560 %d 0 %d 0 %d %d 0 0 20 0 1 0 %d %d %d "+
		"18446744073709551615 94390882893824 94390882913705 140737002729104 0 0 0 0 20977664 536887815 0 0 0 17 %d 0 0 %d 0 0 "+
		"94390882929712 94390882931328 94391916810240 140737002736128 140737002736148 140737002736148 140737002737643 0\n",
		p.PID, comm, ppid, 5000+seed%30000, seed%40, utime, stime, start, 220000*1024+seed%4096*4096, rss, seed%2, seed%300)
	if err := os.WriteFile(filepath.Join(dir, "stat"), buf, 0o444); err != nil {
		return err
	}

	rssKB := rss * 4
	buf = fmt.Appendf(buf[:0], "Name:\t%s\nUmask:\t0077\nState:\tS (sleeping)\nTgid:\t%d\nNgid:\t0\nPid:\t%d\nPPid:\t%d\nTracerPid:\t0\n"+
		"Uid:\t%d\t%d\t%d\t%d\nGid:\t%d\t%d\t%d\t%d\nFDSize:\t64\nGroups:\t%d \nNStgid:\t%d\nNSpid:\t%d\nNSpgid:\t900\nNSsid:\t900\n"+
		"VmPeak:\t  %6d kB\nVmSize:\t  %6d kB\nVmLck:\t       0 kB\nVmPin:\t       0 kB\nVmHWM:\t  %6d kB\nVmRSS:\t  %6d kB\n",
		comm, p.PID, p.PID, ppid, p.UID, p.UID, p.UID, p.UID, p.UID, p.UID, p.UID, p.UID, p.UID, p.PID, p.PID,
		221340+seed%1000, 221200, rssKB+512, rssKB)
	if !p.OldKernel {
		buf = fmt.Appendf(buf, "RssAnon:\t  %6d kB\nRssFile:\t  %6d kB\nRssShmem:\t  %6d kB\n", rssKB/4, rssKB/4, rssKB-rssKB/2)
	}
	buf = fmt.Appendf(buf, "VmData:\t    5620 kB\nVmStk:\t     132 kB\nVmExe:\t    5848 kB\nVmLib:\t   11852 kB\nVmPTE:\t     148 kB\n")
	if !p.OldKernel {
		buf = append(buf, "VmSwap:\t       0 kB\nHugetlbPages:\t       0 kB\nCoreDumping:\t0\nTHP_enabled:\t1\n"...)
	}
	buf = fmt.Appendf(buf, "Threads:\t1\nSigQ:\t0/96365\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n"+
		"SigBlk:\t0000000000000000\nSigIgn:\t0000000001301800\nSigCgt:\t0000000180006287\nCapInh:\t0000000000000000\n"+
		"CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\n"+
		"NoNewPrivs:\t0\nSeccomp:\t0\nSeccomp_filters:\t0\nSpeculation_Store_Bypass:\tvulnerable\n"+
		"Cpus_allowed:\t3\nCpus_allowed_list:\t0-1\nMems_allowed:\t00000000,00000001\nMems_allowed_list:\t0\n"+
		"voluntary_ctxt_switches:\t%d\nnonvoluntary_ctxt_switches:\t%d\n", 1000+seed%9000, seed%97)
	if err := os.WriteFile(filepath.Join(dir, "status"), buf, 0o444); err != nil {
		return err
	}

	buf = fmt.Appendf(buf[:0], "rchar: %d\nwchar: %d\nsyscr: %d\nsyscw: %d\nread_bytes: %d\nwrite_bytes: %d\ncancelled_write_bytes: %d\n",
		readBytes+seed*3, writeBytes+seed*5, 800+seed%999, 200+seed%333, readBytes, writeBytes, 0)
	if err := os.WriteFile(filepath.Join(dir, "io"), buf, 0o400); err != nil {
		return err
	}

	if !p.OldKernel {
		buf = fmt.Appendf(buf[:0], "%d %d %d\n", runNS, delayNS, 100+seed%5000)
		if err := os.WriteFile(filepath.Join(dir, "schedstat"), buf, 0o444); err != nil {
			return err
		}
	}

	buf = append(buf[:0], p.Cmdline...)
	// PostgreSQL rewrites its title in place and pads the rest of argv with NULs.
	buf = append(buf, make([]byte, 16)...)
	return os.WriteFile(filepath.Join(dir, "cmdline"), buf, 0o444)
}
