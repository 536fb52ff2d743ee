// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSkewOfAllWorkOnOneSegment(t *testing.T) {
	sk, ok := skewOf([]segmentLoad{{0, 0}, {1, 0}, {2, 9}, {3, 0}})
	require.True(t, ok)
	assert.InDelta(t, 0.75, sk.ratio, 1e-12) // 1 - 1/4
	assert.InDelta(t, 4, sk.maxOverAvg, 1e-12)
	assert.Equal(t, int32(2), sk.hottest)
	assert.Equal(t, 4, sk.segments)
}

func TestSkewOfAnEvenSpreadIsZero(t *testing.T) {
	sk, ok := skewOf([]segmentLoad{{0, 0.1}, {1, 0.1}, {2, 0.1}})
	require.True(t, ok)
	assert.Zero(t, sk.ratio)
	assert.InDelta(t, 1, sk.maxOverAvg, 1e-12)
	assert.Equal(t, int32(0), sk.hottest, "a tie goes to the lowest content id")
}

func TestSkewOfAPartlyUnevenSpread(t *testing.T) {
	sk, ok := skewOf([]segmentLoad{{0, 1}, {1, 3}})
	require.True(t, ok)
	assert.InDelta(t, 1-2.0/3, sk.ratio, 1e-12)
	assert.InDelta(t, 1.5, sk.maxOverAvg, 1e-12)
	assert.Equal(t, int32(1), sk.hottest)
}

func TestSkewOfIgnoresTheCoordinator(t *testing.T) {
	sk, ok := skewOf([]segmentLoad{{coordinatorSegment, 100}, {0, 2}, {1, 2}})
	require.True(t, ok)
	assert.Zero(t, sk.ratio)
	assert.Equal(t, 2, sk.segments)

	_, ok = skewOf([]segmentLoad{{coordinatorSegment, 100}})
	assert.False(t, ok, "a coordinator-only figure has no segment skew")
}

func TestSkewOfAddsUpEntriesOfOneSegment(t *testing.T) {
	// Two processes (slices) of segment 1 on the same or different hosts.
	sk, ok := skewOf([]segmentLoad{{1, 1}, {0, 2}, {1, 1}})
	require.True(t, ok)
	assert.Zero(t, sk.ratio)
	assert.Equal(t, 2, sk.segments)
}

func TestSkewOfTieBreakDoesNotDependOnOrder(t *testing.T) {
	a, _ := skewOf([]segmentLoad{{5, 3}, {2, 3}, {7, 1}})
	b, _ := skewOf([]segmentLoad{{7, 1}, {2, 3}, {5, 3}})
	assert.Equal(t, a, b)
	assert.Equal(t, int32(2), a.hottest)
}

func TestSkewOfNoWorkIsNoSkew(t *testing.T) {
	for name, loads := range map[string][]segmentLoad{
		"none":     nil,
		"zeros":    {{0, 0}, {1, 0}},
		"negative": {{0, -1}, {1, 0}},
		"nan":      {{0, math.NaN()}, {1, 1}},
		"inf":      {{0, math.Inf(1)}, {1, 1}},
	} {
		t.Run(name, func(t *testing.T) {
			sk, ok := skewOf(loads)
			assert.False(t, ok)
			assert.Equal(t, int32(coordinatorSegment), sk.hottest)
			assert.Zero(t, sk.ratio)
			assert.Zero(t, sk.maxOverAvg)
		})
	}
}

func TestSkewOfOneSegmentIsNotSkewed(t *testing.T) {
	sk, ok := skewOf([]segmentLoad{{3, 5}})
	require.True(t, ok)
	assert.Zero(t, sk.ratio)
	assert.InDelta(t, 1, sk.maxOverAvg, 1e-12)
	assert.Equal(t, int32(3), sk.hottest)
}
