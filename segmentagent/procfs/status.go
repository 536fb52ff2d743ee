// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"bytes"

	"github.com/gpotel/gpotel/segmentagent/internal/kerneltext"
)

// StatusLine is an optional kB line of /proc/<pid>/status: kernel threads
// have no Vm* lines, and kernels before 4.5 print no RssAnon/RssFile/RssShmem.
// The lines are the ones the agent reports (statuslines.go, generated from
// internal/pipeline's table of figures).
type StatusLine uint8

// The optional lines fit Status.Present.
var _ [32 - numStatusLines]struct{}

// statusLineOf finds an optional line by name.
var statusLineOf = func() map[string]StatusLine {
	m := make(map[string]StatusLine, numStatusLines)
	for l, name := range statusLineNames {
		m[name] = StatusLine(l)
	}
	return m
}()

// Status is /proc/<pid>/status, the lines that matter for accounting. Sizes in kB.
type Status struct {
	// Name aliases the parsed bytes, escaped as the kernel prints it.
	Name                     []byte
	Tgid                     int64
	PPid                     int64
	UIDReal                  int64
	UIDEffective             int64
	Threads                  int64
	VoluntaryCtxtSwitches    int64
	NonvoluntaryCtxtSwitches int64
	// KiB holds the optional lines' values, those Present says the file had.
	KiB     [numStatusLines]int64
	Present uint32 // bit l: line l was present
}

// Has reports whether the optional line l was present.
func (s *Status) Has(l StatusLine) bool { return s.Present&(1<<l) != 0 }

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
	if !kerneltext.EndsWithNewline(b) {
		return s, ErrTruncated
	}
	seen := 0
	for len(b) > 0 {
		var key, val []byte
		var hasColon bool
		key, val, b, hasColon = cutKeyLine(b)
		if !hasColon {
			continue
		}
		var dst *int64
		optional := false
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
				return s, kerneltext.ShapeError("status: Uid line %q", val)
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
		default:
			l, ok := statusLineOf[string(key)]
			if !ok {
				continue
			}
			dst, optional = &s.KiB[l], true
			s.Present |= 1 << l
		}
		val = trimSpace(val)
		if optional {
			if !bytes.HasSuffix(val, []byte(" kB")) {
				return s, kerneltext.ShapeError("status: %s value %q has no kB unit", key, val)
			}
			val = trimSpace(val[:len(val)-3])
		}
		v, ok := parseInt(val)
		if !ok {
			return s, kerneltext.ShapeError("status: %s value %q is not a number", key, val)
		}
		*dst = v
	}
	if seen != seenAllRequired {
		for i, name := range statusRequired {
			if seen&(1<<i) == 0 {
				return s, kerneltext.ShapeError("status: no %s line", name)
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
