// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package taskstats

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Why a message was skipped. Each is a distinct error so callers can count by reason.
var (
	ErrTruncated      = errors.New("taskstats: message truncated")
	ErrOversized      = errors.New("taskstats: message oversized")
	ErrUnknownVersion = errors.New("taskstats: unknown struct taskstats version")
	ErrMalformed      = errors.New("taskstats: malformed netlink attributes")
	ErrNoStats        = errors.New("taskstats: message holds no statistics")
)

// minVersion is the oldest struct taskstats decoded: version 7 (Linux 2.6.28)
// added the memory-reclaim delay, the last field every record must hold.
const minVersion = 7

// maxStructSize bounds one struct taskstats: version 17 is 688 bytes; a kernel
// that appends fields stays far below this, garbage does not.
const maxStructSize = 4096

// acGroup is AGROUP from linux/acct.h: the record is the last of its thread
// group (set since version 12).
const acGroup = 0x20

// Field offsets in struct taskstats (linux/taskstats.h). The layout is the
// same on every architecture: every u64 is aligned(8) in the kernel header.
// TestOffsetsMatchXSys checks them against golang.org/x/sys/unix.Taskstats.
const (
	offVersion             = 0
	offExitcode            = 4
	offFlag                = 8
	offNice                = 9
	offCPUCount            = 16
	offCPUDelay            = 24
	offBlkioCount          = 32
	offBlkioDelay          = 40
	offSwapinCount         = 48
	offSwapinDelay         = 56
	offCPURunReal          = 64
	offCPURunVirtual       = 72
	offComm                = 80
	commLen                = 32
	offUID                 = 120
	offGID                 = 124
	offPID                 = 128
	offPPID                = 132
	offBtime               = 136
	offEtime               = 144
	offUtime               = 152
	offStime               = 160
	offMinflt              = 168
	offMajflt              = 176
	offHiwaterRSS          = 200
	offHiwaterVM           = 208
	offReadChar            = 216
	offWriteChar           = 224
	offReadSyscalls        = 232
	offWriteSyscalls       = 240
	offReadBytes           = 248
	offWriteBytes          = 256
	offCancelledWriteBytes = 264
	offNvcsw               = 272
	offNivcsw              = 280
	offFreepagesCount      = 312
	offFreepagesDelay      = 320
	offThrashingCount      = 328 // version 9
	offThrashingDelay      = 336
	offBtime64             = 344 // version 10
	offCompactCount        = 352 // version 11
	offCompactDelay        = 360
	offTGID                = 368 // version 12
	offWpcopyCount         = 400 // version 13
	offWpcopyDelay         = 408
	offIRQCount            = 416 // version 14
	offIRQDelay            = 424
	minStructSize          = offFreepagesDelay + 8
)

// Delay is one delay-accounting pair: how many waits and their total in ns.
type Delay struct {
	Count   uint64
	TotalNs uint64
}

// Stats is one struct taskstats in the kernel's own units: CPU and elapsed
// times in µs, the run totals and delays in ns, high-water marks in KiB.
// Fields a kernel's version does not have are zero and their Has* flag false.
type Stats struct {
	Version  uint16
	ExitCode uint32
	Flag     uint8
	Nice     int8
	Comm     string
	UID      uint32 // real uid
	GID      uint32
	PID      uint32
	PPID     uint32
	TGID     uint32 // since version 12; 0 before
	// BeginTime is the start in unix seconds (ac_btime64 since version 10, else ac_btime).
	BeginTime        uint64
	ElapsedUs        uint64
	UserUs           uint64
	SystemUs         uint64
	CPURunRealNs     uint64 // utime+stime as the tick sampling charged them
	CPURunVirtualNs  uint64 // time actually on a CPU (sum_exec_runtime)
	MinorFaults      uint64
	MajorFaults      uint64
	HiwaterRSSKiB    uint64
	HiwaterVMKiB     uint64
	ReadChars        uint64
	WriteChars       uint64
	ReadSyscalls     uint64
	WriteSyscalls    uint64
	ReadBytes        uint64
	WriteBytes       uint64
	CancelledWrite   uint64
	VoluntaryCtxSw   uint64
	InvoluntaryCtxSw uint64

	CPUDelay       Delay // run-queue wait; kept even when task_delayacct is 0
	BlkioDelay     Delay
	SwapinDelay    Delay
	FreepagesDelay Delay // memory reclaim
	ThrashingDelay Delay
	CompactDelay   Delay
	WpcopyDelay    Delay
	IRQDelay       Delay

	HasThrashing bool
	HasCompact   bool
	HasWpcopy    bool
	HasIRQ       bool
}

// LastOfGroup reports whether the record closes its thread group: known since
// version 12 (AGROUP); before that a record without a TGID aggregate is taken
// as a single-threaded process's last.
func (s *Stats) LastOfGroup() bool { return s.Version < 12 || s.Flag&acGroup != 0 }

// Message is one taskstats reply or exit notification: the per-task record
// and, when a thread group ended (or a TGID was asked for), its aggregate.
type Message struct {
	Task  *Stats // TASKSTATS_TYPE_AGGR_PID
	Group *Stats // TASKSTATS_TYPE_AGGR_TGID
}

// Process returns the record that stands for the whole process: the group
// aggregate when there is one, else the task record.
func (m *Message) Process() *Stats {
	if m.Group != nil {
		return m.Group
	}
	return m.Task
}

// DecodeMessage decodes the attributes of one generic netlink taskstats
// message (the payload after the genetlink header). Unknown attributes are
// ignored; a message whose statistics are truncated, oversized or of an
// unknown version is an error wrapping one of the Err* reasons.
func DecodeMessage(b []byte) (Message, error) {
	var task, group Stats
	hasTask, hasGroup, err := decodeMessage(b, &task, &group)
	if err != nil {
		return Message{}, err
	}
	var m Message
	if hasTask {
		m.Task = new(Stats)
		*m.Task = task
	}
	if hasGroup {
		m.Group = new(Stats)
		*m.Group = group
	}
	return m, nil
}

// decodeMessage is DecodeMessage into records the caller owns.
func decodeMessage(b []byte, task, group *Stats) (hasTask, hasGroup bool, err error) {
	for len(b) > 0 {
		typ, payload, rest, err := nextAttribute(b)
		if err != nil {
			return false, false, err
		}
		b = rest
		var st *Stats
		switch typ {
		case unix.TASKSTATS_TYPE_AGGR_PID:
			st = task
		case unix.TASKSTATS_TYPE_AGGR_TGID:
			st = group
		default:
			continue
		}
		id, found, err := decodeAggregate(payload, st)
		if err != nil {
			return false, false, err
		}
		if !found {
			continue
		}
		if typ == unix.TASKSTATS_TYPE_AGGR_PID {
			hasTask = true
			continue
		}
		if st.TGID == 0 {
			st.TGID = id
		}
		st.PID = id
		hasGroup = true
	}
	if !hasTask && !hasGroup {
		return false, false, ErrNoStats
	}
	return hasTask, hasGroup, nil
}

// decodeAggregate decodes the attributes nested in AGGR_PID or AGGR_TGID
// into st: the pid or tgid, and whether there were statistics.
func decodeAggregate(b []byte, st *Stats) (id uint32, found bool, err error) {
	for len(b) > 0 {
		typ, payload, rest, err := nextAttribute(b)
		if err != nil {
			return 0, false, err
		}
		b = rest
		switch typ {
		case unix.TASKSTATS_TYPE_PID, unix.TASKSTATS_TYPE_TGID:
			if len(payload) != 4 {
				return 0, false, fmt.Errorf("%w: a pid of %d bytes", ErrMalformed, len(payload))
			}
			id = binary.NativeEndian.Uint32(payload)
		case unix.TASKSTATS_TYPE_STATS:
			if *st, err = DecodeStats(payload); err != nil {
				return 0, false, err
			}
			found = true
		}
	}
	return id, found, nil
}

// Netlink attribute framing (linux/netlink.h).
const (
	nlaHeaderLen = 4
	nlaTypeMask  = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
)

// nextAttribute splits the first netlink attribute off b: its type (flags
// masked off), its payload and the attributes after it. An attribute whose
// length does not fit b is ErrMalformed.
func nextAttribute(b []byte) (typ uint16, payload, rest []byte, err error) {
	if len(b) < nlaHeaderLen {
		return 0, nil, nil, fmt.Errorf("%w: %d bytes after the last attribute", ErrMalformed, len(b))
	}
	length := int(binary.NativeEndian.Uint16(b))
	if length < nlaHeaderLen || length > len(b) {
		return 0, nil, nil, fmt.Errorf("%w: an attribute of %d bytes in %d", ErrMalformed, length, len(b))
	}
	next := min((length+3)&^3, len(b)) // NLA_ALIGN
	return binary.NativeEndian.Uint16(b[2:]) & nlaTypeMask, b[nlaHeaderLen:length], b[next:], nil
}

// DecodeStats decodes one struct taskstats. A field is read when the
// struct's version has it; the bytes must then hold it.
func DecodeStats(b []byte) (Stats, error) {
	var s Stats
	if len(b) < 2 {
		return s, fmt.Errorf("%w: %d bytes", ErrTruncated, len(b))
	}
	if len(b) > maxStructSize {
		return s, fmt.Errorf("%w: %d bytes", ErrOversized, len(b))
	}
	s.Version = binary.NativeEndian.Uint16(b[offVersion:])
	if s.Version < minVersion {
		return Stats{}, fmt.Errorf("%w: %d", ErrUnknownVersion, s.Version)
	}
	need := minStructSize
	for _, f := range [...]struct {
		since uint16
		end   int
	}{{9, offThrashingDelay + 8}, {10, offBtime64 + 8}, {11, offCompactDelay + 8}, {12, offTGID + 4}, {13, offWpcopyDelay + 8}, {14, offIRQDelay + 8}} {
		if s.Version >= f.since {
			need = f.end
		}
	}
	if len(b) < need {
		return Stats{}, fmt.Errorf("%w: version %d needs %d bytes, got %d", ErrTruncated, s.Version, need, len(b))
	}

	u64 := func(off int) uint64 { return binary.NativeEndian.Uint64(b[off:]) }
	u32 := func(off int) uint32 { return binary.NativeEndian.Uint32(b[off:]) }
	delay := func(count, total int) Delay { return Delay{Count: u64(count), TotalNs: u64(total)} }

	s.ExitCode = u32(offExitcode)
	s.Flag = b[offFlag]
	s.Nice = int8(b[offNice]) // #nosec G115 -- task_nice is a signed byte
	comm := b[offComm : offComm+commLen]
	if i := bytes.IndexByte(comm, 0); i >= 0 {
		comm = comm[:i]
	}
	if utf8.Valid(comm) {
		s.Comm = string(comm)
	} else {
		s.Comm = string(bytes.ToValidUTF8(comm, []byte("\uFFFD")))
	}
	s.UID, s.GID, s.PID, s.PPID = u32(offUID), u32(offGID), u32(offPID), u32(offPPID)
	s.BeginTime = uint64(u32(offBtime))
	s.ElapsedUs, s.UserUs, s.SystemUs = u64(offEtime), u64(offUtime), u64(offStime)
	s.CPURunRealNs, s.CPURunVirtualNs = u64(offCPURunReal), u64(offCPURunVirtual)
	s.MinorFaults, s.MajorFaults = u64(offMinflt), u64(offMajflt)
	s.HiwaterRSSKiB, s.HiwaterVMKiB = u64(offHiwaterRSS), u64(offHiwaterVM)
	s.ReadChars, s.WriteChars = u64(offReadChar), u64(offWriteChar)
	s.ReadSyscalls, s.WriteSyscalls = u64(offReadSyscalls), u64(offWriteSyscalls)
	s.ReadBytes, s.WriteBytes, s.CancelledWrite = u64(offReadBytes), u64(offWriteBytes), u64(offCancelledWriteBytes)
	s.VoluntaryCtxSw, s.InvoluntaryCtxSw = u64(offNvcsw), u64(offNivcsw)
	s.CPUDelay = delay(offCPUCount, offCPUDelay)
	s.BlkioDelay = delay(offBlkioCount, offBlkioDelay)
	s.SwapinDelay = delay(offSwapinCount, offSwapinDelay)
	s.FreepagesDelay = delay(offFreepagesCount, offFreepagesDelay)
	if s.HasThrashing = s.Version >= 9; s.HasThrashing {
		s.ThrashingDelay = delay(offThrashingCount, offThrashingDelay)
	}
	if s.Version >= 10 {
		s.BeginTime = u64(offBtime64)
	}
	if s.HasCompact = s.Version >= 11; s.HasCompact {
		s.CompactDelay = delay(offCompactCount, offCompactDelay)
	}
	if s.Version >= 12 {
		s.TGID = u32(offTGID)
	}
	if s.HasWpcopy = s.Version >= 13; s.HasWpcopy {
		s.WpcopyDelay = delay(offWpcopyCount, offWpcopyDelay)
	}
	if s.HasIRQ = s.Version >= 14; s.HasIRQ {
		s.IRQDelay = delay(offIRQCount, offIRQDelay)
	}
	return s, nil
}
