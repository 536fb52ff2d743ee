// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"bytes"

	"github.com/gpotel/gpotel/segmentagent/internal/kerneltext"
)

// Stat is /proc/<pid>/stat, the fields gpotel keeps, in kernel units.
type Stat struct {
	PID int64
	// Comm aliases the parsed bytes; copy it before the buffer is reused.
	Comm                []byte
	State               byte
	PPID                int64
	PGRP                int64
	Session             int64
	TTYNr               int64
	TPGID               int64
	Flags               int64
	MinFlt              int64 // count
	CMinFlt             int64
	MajFlt              int64 // count
	CMajFlt             int64
	UTime               int64 // clock ticks
	STime               int64 // clock ticks
	CUTime              int64 // clock ticks
	CSTime              int64 // clock ticks
	Priority            int64
	Nice                int64
	NumThreads          int64
	ItRealValue         int64
	StartTime           int64 // clock ticks after boot
	VSize               int64 // bytes
	RSS                 int64 // pages
	RSSLim              int64 // bytes; RLIM_INFINITY reads as -1
	Processor           int64
	RTPriority          int64
	Policy              int64
	DelayAcctBlkioTicks int64 // clock ticks
	GuestTime           int64 // clock ticks
	CGuestTime          int64 // clock ticks
}

// statMinFields is the last field (rsslim) every supported kernel prints;
// later fields (processor … cguest_time) arrived over 2.2–2.6.24 and read as 0 when absent.
const (
	statMinFields  = 25
	statLastParsed = 44
)

// ParseStat parses the content of /proc/<pid>/stat without allocating.
// The comm is found between the first '(' and the last ')', so a comm
// holding spaces or parentheses parses whole.
func ParseStat(b []byte) (Stat, error) {
	var s Stat
	if !kerneltext.EndsWithNewline(b) {
		return s, ErrTruncated
	}
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 2 || closing < open || b[open-1] != ' ' {
		return s, kerneltext.ShapeError("stat: no \"pid (comm)\" prefix")
	}
	pid, ok := parseInt(b[:open-1])
	if !ok {
		return s, kerneltext.ShapeError("stat: pid is not a number")
	}
	s.PID = pid
	s.Comm = b[open+1 : closing]

	var f [statLastParsed + 1]int64
	rest := b[closing+1 : len(b)-1]
	field := 2
	for len(rest) > 0 {
		if rest[0] != ' ' {
			return s, kerneltext.ShapeError("stat: field %d is not separated by a blank", field+1)
		}
		rest = rest[1:]
		end := bytes.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		tok := rest[:end]
		rest = rest[end:]
		field++
		switch {
		case field == 3:
			if len(tok) != 1 {
				return s, kerneltext.ShapeError("stat: state %q is not one letter", tok)
			}
			s.State = tok[0]
		case field <= statLastParsed:
			v, ok := parseInt(tok)
			if !ok {
				return s, kerneltext.ShapeError("stat: field %d %q is not a number", field, tok)
			}
			f[field] = v
		}
	}
	if field < statMinFields {
		return s, kerneltext.ShapeError("stat: %d fields, want at least %d", field, statMinFields)
	}
	s.PPID, s.PGRP, s.Session, s.TTYNr, s.TPGID, s.Flags = f[4], f[5], f[6], f[7], f[8], f[9]
	s.MinFlt, s.CMinFlt, s.MajFlt, s.CMajFlt = f[10], f[11], f[12], f[13]
	s.UTime, s.STime, s.CUTime, s.CSTime = f[14], f[15], f[16], f[17]
	s.Priority, s.Nice, s.NumThreads, s.ItRealValue = f[18], f[19], f[20], f[21]
	s.StartTime, s.VSize, s.RSS, s.RSSLim = f[22], f[23], f[24], f[25]
	s.Processor, s.RTPriority, s.Policy = f[39], f[40], f[41]
	s.DelayAcctBlkioTicks, s.GuestTime, s.CGuestTime = f[42], f[43], f[44]
	return s, nil
}
