// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/gpotel/gpotel/proto/yagpcc"
)

// Outcome says what became of one process read.
type Outcome int

const (
	// Answered means the process was read; some optional files may be listed as unread.
	Answered Outcome = iota
	// Vanished means the process no longer exists (ENOENT or ESRCH at any file).
	Vanished
	// Denied means the process's real uid is not allowed; nothing but its status was read.
	Denied
	// Failed means the process exists but its status or stat could not be read or parsed.
	Failed
)

func (o Outcome) String() string {
	switch o {
	case Answered:
		return "answered"
	case Vanished:
		return "vanished"
	case Denied:
		return "denied"
	case Failed:
		return "failed"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// File names under /proc/<pid>, NUL-terminated for the raw syscalls.
var (
	nameStat      = []byte("stat\x00")
	nameStatus    = []byte("status\x00")
	nameIO        = []byte("io\x00")
	nameSchedstat = []byte("schedstat\x00")
	nameCmdline   = []byte("cmdline\x00")
)

const (
	initialBufferSize = 4096
	// maxFileSize bounds a runaway file; the largest real one here, status, is under 2 KiB.
	maxFileSize = 1 << 20
)

// Reader reads processes from one procfs root. It owns one reused buffer and
// is not safe for concurrent use: give each worker its own.
type Reader struct {
	path    []byte // "<root>/" then, per call, "<pid>\x00"
	rootLen int
	buf     []byte
}

// NewReader returns a Reader of the procfs mounted (or laid out) at root.
func NewReader(root string) *Reader {
	root = strings.TrimRight(root, "/")
	path := make([]byte, 0, len(root)+32)
	path = append(path, root...)
	path = append(path, '/')
	return &Reader{path: path, rootLen: len(path), buf: make([]byte, initialBufferSize)}
}

// Allow decides from a process's pid, real uid and parent's pid whether it
// may be read.
type Allow func(pid, uid, ppid int64) bool

// process keeps every message of one answer in one allocation.
type process struct {
	info   yagpcc.GpPidProcInfo
	stat   yagpcc.ProcStat
	status yagpcc.ProcStatus
	io     yagpcc.ProcIO
	sched  yagpcc.ProcSchedstat
	kb     [numStatusLines]int64
	ccnt   int64 // CommandCount points here, so the answer stays one allocation
}

// Read reads one process. status is read first: its real uid and parent
// decide, before anything else is opened, whether the process is allowed.
// status and stat are required (they carry the uid and the start time that
// identifies the process); io, schedstat and cmdline that cannot be read are
// listed in Unread. The command line itself never leaves the reader: only the
// command count parsed from it does. The error explains a Failed outcome and
// is nil otherwise. The returned message has only Pid and the file messages set.
func (r *Reader) Read(pid int64, allowed Allow) (*yagpcc.GpPidProcInfo, Outcome, error) {
	return r.read(pid, allowed, true)
}

// ReadCore reads all but schedstat, whose run-queue wait a taskstats
// record carries: the record lacks the uid, the start time, the resident
// memory split and the command count, and rounds the io counts down to a
// multiple of 1024 where io is exact.
func (r *Reader) ReadCore(pid int64, allowed Allow) (*yagpcc.GpPidProcInfo, Outcome, error) {
	return r.read(pid, allowed, false)
}

func (r *Reader) read(pid int64, allowed Allow, withSchedstat bool) (*yagpcc.GpPidProcInfo, Outcome, error) {
	if pid <= 0 {
		return nil, Failed, fmt.Errorf("pid %d is not a process id", pid)
	}
	r.path = strconv.AppendInt(r.path[:r.rootLen], pid, 10)
	r.path = append(r.path, 0)
	dirfd, err := openat(unix.AT_FDCWD, r.path, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		if vanishedErrno(err) {
			return nil, Vanished, nil
		}
		return nil, Failed, fmt.Errorf("open: %w", err)
	}
	// Every file is opened relative to this directory, so all of them describe
	// the same process even if the pid is reused meanwhile.
	defer closeFD(dirfd)

	data, err := r.readFile(dirfd, nameStatus)
	if err != nil {
		return requiredFailure("status", err)
	}
	status, err := ParseStatus(data)
	if err != nil {
		return nil, Failed, fileError("status", err)
	}
	if allowed == nil || !allowed(pid, status.UIDReal, status.PPid) {
		return nil, Denied, nil
	}
	p := new(process)
	p.info.Pid = pid
	p.fillStatus(&status)

	if data, err = r.readFile(dirfd, nameStat); err != nil {
		return requiredFailure("stat", err)
	}
	stat, err := ParseStat(data)
	if err != nil {
		return nil, Failed, fileError("stat", err)
	}
	if stat.PID != pid {
		return nil, Failed, fmt.Errorf("stat: pid %d, want %d", stat.PID, pid)
	}
	p.fillStat(&stat)

	if data, err = r.readFile(dirfd, nameIO); err == nil {
		var io IO
		if io, err = ParseIO(data); err == nil {
			p.io = yagpcc.ProcIO{
				Rchar: io.RChar, Wchar: io.WChar, Syscr: io.SyscR, Syscw: io.SyscW,
				ReadBytes: io.ReadBytes, WriteBytes: io.WriteBytes, CancelledWriteBytes: io.CancelledWriteBytes,
			}
			p.info.ProcIo = &p.io
		}
	}
	if err != nil && r.optionalFailure(dirfd, "io", err, &p.info) {
		return nil, Vanished, nil
	}

	if !withSchedstat {
		return r.readCmdline(dirfd, p)
	}
	if data, err = r.readFile(dirfd, nameSchedstat); err == nil {
		var s Schedstat
		if s, err = ParseSchedstat(data); err == nil {
			p.sched = yagpcc.ProcSchedstat{RunTimeNs: s.RunTimeNS, RunDelayNs: s.RunDelayNS, Timeslices: s.Timeslices}
			p.info.ProcSchedstat = &p.sched
		}
	}
	if err != nil && r.optionalFailure(dirfd, "schedstat", err, &p.info) {
		return nil, Vanished, nil
	}

	return r.readCmdline(dirfd, p)
}

func (r *Reader) readCmdline(dirfd int, p *process) (*yagpcc.GpPidProcInfo, Outcome, error) {
	if data, err := r.readFile(dirfd, nameCmdline); err == nil {
		if ccnt, ok := ParseCommandCount(ParseCmdline(data)); ok {
			p.ccnt = ccnt
			p.info.CommandCount = &p.ccnt
		}
	} else if r.optionalFailure(dirfd, "cmdline", err, &p.info) {
		return nil, Vanished, nil
	}
	return &p.info, Answered, nil
}

// readFile reads one whole file of the pid directory into the reused buffer.
// A short read is the end: procfs hands a seq_file's whole text to the first
// read that has room for it, and a regular file reads to its size.
func (r *Reader) readFile(dirfd int, name []byte) ([]byte, error) {
	fd, err := openat(dirfd, name, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer closeFD(fd)
	n := 0
	for {
		m, err := read(fd, r.buf[n:])
		if err != nil {
			return nil, err
		}
		n += m
		if n < len(r.buf) {
			return r.buf[:n], nil
		}
		if len(r.buf) >= maxFileSize {
			return nil, fmt.Errorf("larger than %d bytes", maxFileSize)
		}
		r.buf = append(r.buf, make([]byte, len(r.buf))...)
	}
}

// requiredFailure turns a failed read of status or stat into an outcome.
func requiredFailure(file string, err error) (*yagpcc.GpPidProcInfo, Outcome, error) {
	if vanishedErrno(err) {
		return nil, Vanished, nil
	}
	return nil, Failed, fileError(file, err)
}

// optionalFailure records why an optional file was not read and reports
// whether the process has in fact vanished. ENOENT on a file of a directory
// that still exists means this kernel does not provide that file.
func (r *Reader) optionalFailure(dirfd int, file string, err error, info *yagpcc.GpPidProcInfo) (vanished bool) {
	switch {
	case errors.Is(err, unix.ESRCH):
		return true
	case errors.Is(err, unix.ENOENT):
		if probe := faccessat(dirfd, nameStat); probe != nil && vanishedErrno(probe) {
			return true
		}
		info.Unread = append(info.Unread, file+": not provided by this kernel")
	default:
		info.Unread = append(info.Unread, fileError(file, err).Error())
	}
	return false
}

func fileError(file string, err error) error {
	return fmt.Errorf("%s: %w", file, err)
}

func (p *process) fillStatus(s *Status) {
	p.status = yagpcc.ProcStatus{
		Name:                     protoString(s.Name),
		Tgid:                     s.Tgid,
		Ppid:                     s.PPid,
		UidReal:                  s.UIDReal,
		UidEffective:             s.UIDEffective,
		Threads:                  s.Threads,
		VoluntaryCtxtSwitches:    s.VoluntaryCtxtSwitches,
		NonvoluntaryCtxtSwitches: s.NonvoluntaryCtxtSwitches,
	}
	for l := range numStatusLines {
		if s.Has(l) {
			p.kb[l] = s.KiB[l]
			setStatusLine(&p.status, l, &p.kb[l])
		}
	}
	p.info.ProcStatus = &p.status
}

func (p *process) fillStat(s *Stat) {
	comm := p.status.Name
	if string(s.Comm) != comm {
		comm = protoString(s.Comm)
	}
	p.stat = yagpcc.ProcStat{
		Pid: s.PID, Comm: comm, State: stateString(s.State),
		Ppid: s.PPID, Pgrp: s.PGRP, Session: s.Session, TtyNr: s.TTYNr, Tpgid: s.TPGID, Flags: s.Flags,
		Minflt: s.MinFlt, Cminflt: s.CMinFlt, Majflt: s.MajFlt, Cmajflt: s.CMajFlt,
		Utime: s.UTime, Stime: s.STime, Cutime: s.CUTime, Cstime: s.CSTime,
		Priority: s.Priority, Nice: s.Nice, NumThreads: s.NumThreads, Itrealvalue: s.ItRealValue,
		Starttime: s.StartTime, Vsize: s.VSize, Rss: s.RSS, Rsslim: s.RSSLim,
		Processor: s.Processor, RtPriority: s.RTPriority, Policy: s.Policy,
		DelayacctBlkioTicks: s.DelayAcctBlkioTicks, GuestTime: s.GuestTime, CguestTime: s.CGuestTime,
	}
	p.info.ProcStat = &p.stat
}

// protoString copies kernel bytes into a proto string, which must be UTF-8:
// a process name is arbitrary bytes.
func protoString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// stateNames holds the one-letter states as strings, so naming one never allocates.
var stateNames = func() (t [128]string) {
	for c := range t {
		t[c] = string(rune(c))
	}
	return t
}()

func stateString(c byte) string {
	if c < utf8.RuneSelf {
		return stateNames[c]
	}
	return "\uFFFD"
}
