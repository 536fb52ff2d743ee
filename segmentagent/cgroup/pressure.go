// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"bytes"
	"strconv"

	"github.com/gpotel/gpotel/segmentagent/internal/kerneltext"
)

// Stall is one line of a pressure file: the share of wall time in which
// tasks stalled for lack of the resource.
type Stall struct {
	// Avg10, Avg60, Avg300 are percentages averaged over 10 s, 60 s and 300 s.
	Avg10, Avg60, Avg300 float64
	// TotalMicros is the cumulative stall time in microseconds.
	TotalMicros uint64
}

// Pressure is one pressure file (/proc/pressure/<resource> or a cgroup v2
// group's <resource>.pressure).
type Pressure struct {
	// Some: at least one task stalled.
	Some Stall
	// Full: every non-idle task stalled at once. HasFull is false where the
	// kernel prints no full line (cpu before Linux 5.13).
	Full    Stall
	HasFull bool
}

// ParsePressure parses a pressure file. The some line is required and every
// line needs avg10, avg60, avg300 and total; lines of unknown kinds and
// unknown keys are ignored so a later kernel's additions do not break it.
func ParsePressure(b []byte) (Pressure, error) {
	var p Pressure
	if !kerneltext.EndsWithNewline(b) {
		return p, ErrTruncated
	}
	hasSome := false
	for len(b) > 0 {
		nl := bytes.IndexByte(b, '\n')
		line := b[:nl]
		b = b[nl+1:]
		kind, rest, _ := bytes.Cut(line, []byte(" "))
		var dst *Stall
		switch string(kind) {
		case "some":
			dst, hasSome = &p.Some, true
		case "full":
			dst, p.HasFull = &p.Full, true
		default:
			continue
		}
		s, err := parseStall(rest)
		if err != nil {
			return Pressure{}, kerneltext.ShapeError("pressure: %s line: %v", kind, err)
		}
		*dst = s
	}
	if !hasSome {
		return Pressure{}, kerneltext.ShapeError("pressure: no some line")
	}
	return p, nil
}

func parseStall(b []byte) (Stall, error) {
	var s Stall
	const avg10, avg60, avg300, total = 1, 2, 4, 8
	seen := 0
	for _, field := range bytes.Fields(b) {
		key, value, ok := bytes.Cut(field, []byte("="))
		if !ok {
			return s, kerneltext.ShapeError("field %q is not key=value", field)
		}
		var err error
		switch string(key) {
		case "avg10":
			s.Avg10, err = parsePercent(value)
			seen |= avg10
		case "avg60":
			s.Avg60, err = parsePercent(value)
			seen |= avg60
		case "avg300":
			s.Avg300, err = parsePercent(value)
			seen |= avg300
		case "total":
			s.TotalMicros, err = strconv.ParseUint(string(value), 10, 64)
			seen |= total
		}
		if err != nil {
			return s, kerneltext.ShapeError("%s=%q", key, value)
		}
	}
	if seen != avg10|avg60|avg300|total {
		return s, kerneltext.ShapeError("missing avg10, avg60, avg300 or total")
	}
	return s, nil
}

// parsePercent reads an average the kernel prints as %lu.%02lu (0.00 to 100.00).
func parsePercent(b []byte) (float64, error) {
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil || v < 0 || v > 100 || len(b) == 0 || b[0] < '0' || b[0] > '9' {
		return 0, ErrShape
	}
	return v, nil
}
