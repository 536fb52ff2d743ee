// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import "bytes"

// StatusField names the optional lines of /proc/<pid>/status.
type StatusField uint16

// Optional status lines: kernel threads have no Vm* lines, and kernels
// before 4.5 print no RssAnon/RssFile/RssShmem.
const (
	VmPeak StatusField = 1 << iota
	VmSize
	VmHWM
	VmRSS
	RssAnon
	RssFile
	RssShmem
	VmData
	VmSwap
)

// Status is /proc/<pid>/status, the lines that matter for accounting. Sizes in kB.
type Status struct {
	// Name aliases the parsed bytes, escaped as the kernel prints it.
	Name                     []byte
	Tgid                     int64
	PPid                     int64
	UIDReal                  int64
	UIDEffective             int64
	VmPeakKB                 int64
	VmSizeKB                 int64
	VmHWMKB                  int64
	VmRSSKB                  int64
	RssAnonKB                int64
	RssFileKB                int64
	RssShmemKB               int64
	VmDataKB                 int64
	VmSwapKB                 int64
	Threads                  int64
	VoluntaryCtxtSwitches    int64
	NonvoluntaryCtxtSwitches int64
	// Present says which optional lines the file had.
	Present StatusField
}

// Has reports whether the optional line f was present.
func (s *Status) Has(f StatusField) bool { return s.Present&f != 0 }

// Lines every supported kernel (2.6.23 on) prints.
const (
	seenName = 1 << iota
	seenTgid
	seenPPid
	seenUID
	seenThreads
	seenVoluntary
	seenNonvoluntary
	seenAllRequired = 1<<iota - 1
)

var statusRequired = [...]string{"Name", "Tgid", "PPid", "Uid", "Threads", "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"}

// ParseStatus parses the content of /proc/<pid>/status without allocating.
func ParseStatus(b []byte) (Status, error) {
	var s Status
	if !endsWithNewline(b) {
		return s, ErrTruncated
	}
	seen := 0
	for len(b) > 0 {
		nl := bytes.IndexByte(b, '\n')
		line := b[:nl]
		b = b[nl+1:]
		colon := bytes.IndexByte(line, ':')
		if colon < 0 {
			continue
		}
		key, val := line[:colon], line[colon+1:]
		var dst *int64
		var kb StatusField
		switch string(key) {
		case "Name":
			// Only the tab after the colon is layout; the name may itself start with blanks.
			if len(val) > 0 && val[0] == '\t' {
				val = val[1:]
			}
			s.Name = val
			seen |= seenName
			continue
		case "Uid":
			realUID, eff, ok := parseUIDs(val)
			if !ok {
				return s, shapeError("status: Uid line %q", val)
			}
			s.UIDReal, s.UIDEffective = realUID, eff
			seen |= seenUID
			continue
		case "Tgid":
			dst, seen = &s.Tgid, seen|seenTgid
		case "PPid":
			dst, seen = &s.PPid, seen|seenPPid
		case "Threads":
			dst, seen = &s.Threads, seen|seenThreads
		case "voluntary_ctxt_switches":
			dst, seen = &s.VoluntaryCtxtSwitches, seen|seenVoluntary
		case "nonvoluntary_ctxt_switches":
			dst, seen = &s.NonvoluntaryCtxtSwitches, seen|seenNonvoluntary
		case "VmPeak":
			dst, kb = &s.VmPeakKB, VmPeak
		case "VmSize":
			dst, kb = &s.VmSizeKB, VmSize
		case "VmHWM":
			dst, kb = &s.VmHWMKB, VmHWM
		case "VmRSS":
			dst, kb = &s.VmRSSKB, VmRSS
		case "RssAnon":
			dst, kb = &s.RssAnonKB, RssAnon
		case "RssFile":
			dst, kb = &s.RssFileKB, RssFile
		case "RssShmem":
			dst, kb = &s.RssShmemKB, RssShmem
		case "VmData":
			dst, kb = &s.VmDataKB, VmData
		case "VmSwap":
			dst, kb = &s.VmSwapKB, VmSwap
		default:
			continue
		}
		val = trimSpace(val)
		if kb != 0 {
			if !bytes.HasSuffix(val, []byte(" kB")) {
				return s, shapeError("status: %s value %q has no kB unit", key, val)
			}
			val = trimSpace(val[:len(val)-3])
			s.Present |= kb
		}
		v, ok := parseInt(val)
		if !ok {
			return s, shapeError("status: %s value %q is not a number", key, val)
		}
		*dst = v
	}
	if seen != seenAllRequired {
		for i, name := range statusRequired {
			if seen&(1<<i) == 0 {
				return s, shapeError("status: no %s line", name)
			}
		}
	}
	return s, nil
}

// parseUIDs reads the real and effective uid from "\treal\teffective\tsaved\tfs".
func parseUIDs(val []byte) (realUID, eff int64, ok bool) {
	val = trimSpace(val)
	tab := bytes.IndexByte(val, '\t')
	if tab < 0 {
		return 0, 0, false
	}
	realUID, ok = parseInt(val[:tab])
	if !ok || realUID < 0 {
		return 0, 0, false
	}
	val = val[tab+1:]
	if tab = bytes.IndexByte(val, '\t'); tab >= 0 {
		val = val[:tab]
	}
	eff, ok = parseInt(val)
	if !ok || eff < 0 {
		return 0, 0, false
	}
	return realUID, eff, true
}
