// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"math"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// coordinatorSegment is the coordinator's content id. Its work (dispatch,
// the final gather and sort) is not spread over segments, so it takes no
// part in skew: counted, it would make every query look skewed towards it.
const coordinatorSegment = -1

// segmentLoad is one segment's share of a figure over an interval (CPU
// seconds, I/O bytes, or their rates: skew is the same in any unit).
type segmentLoad struct {
	segment int32
	value   float64
}

// skew says how unevenly a figure is spread over the segments that took
// part, in the two forms Greenplum users know.
type skew struct {
	// ratio is 1 - avg/max: 0 when every segment did the same, 1 - 1/n when
	// one of n segments did everything.
	ratio float64
	// maxOverAvg is max/avg: 1 when even, n when one of n did everything.
	maxOverAvg float64
	// hottest is the segment with the largest figure; on a tie the lowest
	// content id, so the answer does not depend on the order of the input.
	hottest int32
	// segments is how many segments took part (the coordinator excluded).
	segments int
}

// skewOf computes the skew of loads, one entry per segment that took part,
// i.e. had a process of the session or query in the interval. A segment
// that took part and did nothing is a 0 entry, and counts: it is exactly
// what skew is about. A segment with no process is left out by the caller
// (a direct-dispatched query runs on one segment and is not skewed).
// Entries of the same segment add up; the coordinator's and negative
// values are ignored. ok is false when no segment did anything: then
// there is no hottest segment and no skew to speak of.
func skewOf(loads []segmentLoad) (sk skew, ok bool) {
	var sum, maxV float64
	sk.hottest = coordinatorSegment
	seen := make(map[int32]float64, len(loads))
	for _, l := range loads {
		if l.segment == coordinatorSegment || l.segment < 0 {
			continue
		}
		seen[l.segment] += max(l.value, 0)
	}
	for seg, v := range seen {
		sum += v
		if v > maxV || (v == maxV && v > 0 && seg < sk.hottest) {
			maxV, sk.hottest = v, seg
		}
	}
	sk.segments = len(seen)
	if maxV <= 0 || math.IsInf(sum, 0) || math.IsNaN(sum) {
		return skew{segments: sk.segments, hottest: coordinatorSegment}, false
	}
	avg := sum / float64(len(seen))
	sk.ratio = max(1-avg/maxV, 0) // rounding must not make an even spread negative
	sk.maxOverAvg = maxV / avg
	return sk, true
}

// outputSkew is a skew as the output writes it; not OK: no points.
func outputSkew(sk skew, ok bool) pipeline.Skew {
	return pipeline.Skew{Ratio: sk.ratio, MaxOverAvg: sk.maxOverAvg, Hottest: sk.hottest, Segments: sk.segments, OK: ok}
}
