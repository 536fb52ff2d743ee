// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package groundtruth reads what the kernel says a process has cost, from
// /proc/<pid>/{stat,io,status}, with the plainest code possible. End-to-end
// tests compare it with what gpotel reports; it shares no code with the agent.
package groundtruth

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Process is one reading of one process, in plain units (seconds, bytes).
type Process struct {
	PID           int
	StartTicks    uint64 // field 22 of stat: tells a reused pid apart
	UserSeconds   float64
	SystemSeconds float64
	MinorFaults   uint64
	MajorFaults   uint64
	ReadChars     uint64 // rchar
	WriteChars    uint64 // wchar
	ReadSyscalls  uint64 // syscr
	WriteSyscalls uint64 // syscw
	ReadBytes     uint64 // read_bytes: what reached the block layer
	WriteBytes    uint64 // write_bytes: what was dirtied for the block layer
	RSSBytes      uint64 // VmRSS
	RSSAnonBytes  uint64 // RssAnon
	RSSFileBytes  uint64 // RssFile
	RSSShmemBytes uint64 // RssShmem
	VoluntaryCtxt uint64
	ForcedCtxt    uint64
	// BlkioDelaySeconds is stat field 42, delayacct_blkio_ticks: time spent
	// waiting for block I/O (0 without delay accounting).
	BlkioDelaySeconds float64
	// RunDelaySeconds is the second field of schedstat: time spent runnable
	// on a run queue, waiting for a CPU (0 where the kernel has no schedstat).
	RunDelaySeconds float64
}

// CPUSeconds is user plus system time.
func (p Process) CPUSeconds() float64 { return p.UserSeconds + p.SystemSeconds }

// Root is where procfs is mounted; tests point it at a fixture tree.
var Root = "/proc"

// Read reads one process. An exited process gives an error wrapping os.ErrNotExist.
func Read(pid int) (Process, error) {
	dir := filepath.Join(Root, strconv.Itoa(pid))
	p := Process{PID: pid}
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return p, err
	}
	st, err := parseStat(stat)
	if err != nil {
		return p, fmt.Errorf("%s/stat: %w", dir, err)
	}
	tick := float64(ClockTicks())
	p.StartTicks = st.startTicks
	p.UserSeconds = float64(st.utimeTicks) / tick
	p.SystemSeconds = float64(st.stimeTicks) / tick
	p.MinorFaults, p.MajorFaults = st.minflt, st.majflt
	p.BlkioDelaySeconds = float64(st.blkioTicks) / tick

	if sched, err := os.ReadFile(filepath.Join(dir, "schedstat")); err == nil {
		f := strings.Fields(string(sched))
		if len(f) < 2 {
			return p, fmt.Errorf("%s/schedstat: %d fields", dir, len(f))
		}
		ns, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return p, fmt.Errorf("%s/schedstat: %w", dir, err)
		}
		p.RunDelaySeconds = float64(ns) / 1e9
	} else if !errors.Is(err, os.ErrNotExist) {
		return p, err
	}

	io, err := os.ReadFile(filepath.Join(dir, "io"))
	if err != nil {
		return p, err
	}
	fields, err := parseKeyValues(io, ":")
	if err != nil {
		return p, fmt.Errorf("%s/io: %w", dir, err)
	}
	p.ReadChars, p.WriteChars = fields["rchar"], fields["wchar"]
	p.ReadSyscalls, p.WriteSyscalls = fields["syscr"], fields["syscw"]
	p.ReadBytes, p.WriteBytes = fields["read_bytes"], fields["write_bytes"]

	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return p, err
	}
	fields, err = parseKeyValues(status, ":")
	if err != nil {
		return p, fmt.Errorf("%s/status: %w", dir, err)
	}
	// status reports memory in kB.
	p.RSSBytes = fields["VmRSS"] * 1024
	p.RSSAnonBytes = fields["RssAnon"] * 1024
	p.RSSFileBytes = fields["RssFile"] * 1024
	p.RSSShmemBytes = fields["RssShmem"] * 1024
	p.VoluntaryCtxt = fields["voluntary_ctxt_switches"]
	p.ForcedCtxt = fields["nonvoluntary_ctxt_switches"]
	return p, nil
}

type statFields struct {
	minflt, majflt, utimeTicks, stimeTicks, startTicks, blkioTicks uint64
}

// parseStat reads the fields after the command name, which may itself hold spaces and parens.
func parseStat(b []byte) (statFields, error) {
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return statFields{}, errors.New("no ')' after the command name")
	}
	f := strings.Fields(string(b[end+1:]))
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 20 {
		return statFields{}, fmt.Errorf("only %d fields after the command name", len(f))
	}
	var out statFields
	for _, x := range []struct {
		field int
		dst   *uint64
	}{{10, &out.minflt}, {12, &out.majflt}, {14, &out.utimeTicks}, {15, &out.stimeTicks}, {22, &out.startTicks}} {
		v, err := strconv.ParseUint(f[x.field-3], 10, 64)
		if err != nil {
			return statFields{}, fmt.Errorf("field %d: %w", x.field, err)
		}
		*x.dst = v
	}
	// Field 42 came with Linux 2.6.18; an older kernel's line is shorter.
	if len(f) > 42-3 {
		v, err := strconv.ParseUint(f[42-3], 10, 64)
		if err != nil {
			return statFields{}, fmt.Errorf("field 42: %w", err)
		}
		out.blkioTicks = v
	}
	return out, nil
}

// parseKeyValues reads "key<sep> number [unit]" lines; other lines are skipped.
func parseKeyValues(b []byte, sep string) (map[string]uint64, error) {
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), sep)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue // e.g. "Name:" or "State:" in status
		}
		out[strings.TrimSpace(key)] = v
	}
	return out, sc.Err()
}

var (
	clockTicksOnce sync.Once
	clockTicks     = 100
)

// ClockTicks is the kernel's USER_HZ as getconf reports it (100 when getconf is unavailable).
func ClockTicks() int {
	clockTicksOnce.Do(func() {
		out, err := exec.Command("getconf", "CLK_TCK").Output()
		if err != nil {
			return
		}
		if v, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && v > 0 {
			clockTicks = v
		}
	})
	return clockTicks
}

// OnlineCPUs counts the cpuN lines of /proc/stat: the kernel writes one
// per online CPU. It is how a test checks the CPU count gpotel reports,
// which the agent reads from sysfs instead.
func OnlineCPUs() (int, error) {
	b, err := os.ReadFile(filepath.Join(Root, "stat"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		name, _, _ := strings.Cut(line, " ")
		if id, ok := strings.CutPrefix(name, "cpu"); ok && id != "" {
			if _, err := strconv.Atoi(id); err != nil {
				return 0, fmt.Errorf("%s/stat: line %q", Root, line)
			}
			n++
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("%s/stat: no cpuN line", Root)
	}
	return n, nil
}

// Total sums readings over a set of processes.
type Total struct {
	Processes     int
	Exited        []int // pids that could not be read because they are gone
	UserSeconds   float64
	SystemSeconds float64
	ReadBytes     uint64
	WriteBytes    uint64
	ReadChars     uint64
	WriteChars    uint64
	ReadSyscalls  uint64
	WriteSyscalls uint64
	RSSBytes      uint64
}

// CPUSeconds is user plus system time.
func (t Total) CPUSeconds() float64 { return t.UserSeconds + t.SystemSeconds }

// Sum reads every pid and adds them up; pids that have exited are listed in
// Exited, any other read failure is returned.
func Sum(pids []int) (Total, error) {
	var t Total
	var errs []error
	for _, pid := range pids {
		p, err := Read(pid)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			t.Exited = append(t.Exited, pid)
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("pid %d: %w", pid, err))
			continue
		}
		t.Processes++
		t.UserSeconds += p.UserSeconds
		t.SystemSeconds += p.SystemSeconds
		t.ReadBytes += p.ReadBytes
		t.WriteBytes += p.WriteBytes
		t.ReadChars += p.ReadChars
		t.WriteChars += p.WriteChars
		t.ReadSyscalls += p.ReadSyscalls
		t.WriteSyscalls += p.WriteSyscalls
		t.RSSBytes += p.RSSBytes
	}
	return t, errors.Join(errs...)
}
