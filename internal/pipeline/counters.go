// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

// Counters are counter figures (Figures up to NumCounters) of a process, a
// session or a query, seconds as integer nanoseconds.
type Counters [NumCounters]int64

// Skew is how unevenly a figure is spread over the segments that took
// part; not OK when no segment used any of it (no points then).
type Skew struct {
	Ratio, MaxOverAvg float64
	Hottest           int32
	Segments          int
	OK                bool
}

// SkewPair is the CPU and the disk I/O skew of one window.
type SkewPair struct{ CPU, IO Skew }

// SegmentUse is what processes used on one segment instance: CPU in ns,
// disk bytes.
type SegmentUse struct {
	Host               string
	Segment            int32
	CPU, Read, Written int64
}

// QuerySpill is a query's workfiles: held now (0 once it ended) and the
// most held at once.
type QuerySpill struct {
	Bytes, Files       int64
	MaxBytes, MaxFiles int64
}
