// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/kernelunits"
)

// Reading and writing number points, whatever the batch kind.

// FirstPointTime is the timestamp of the resource's first data point.
func FirstPointTime(rm pmetric.ResourceMetrics) pcommon.Timestamp {
	var t pcommon.Timestamp
	EachPoint(rm, func(_ pmetric.Metric, dp pmetric.NumberDataPoint) {
		if t == 0 {
			t = dp.Timestamp()
		}
	})
	return t
}

// EachPoint calls fn with every number point of the resource, gauges and
// sums alike.
func EachPoint(rm pmetric.ResourceMetrics, fn func(pmetric.Metric, pmetric.NumberDataPoint)) {
	sms := rm.ScopeMetrics()
	for i := range sms.Len() {
		ms := sms.At(i).Metrics()
		for j := range ms.Len() {
			m := ms.At(j)
			dps := NumberPoints(m)
			for k := range dps.Len() {
				fn(m, dps.At(k))
			}
		}
	}
}

// NumberPoints accepts gauges and sums alike: the contract says which, a
// consumer reads the figures either way (none of any other type).
func NumberPoints(m pmetric.Metric) pmetric.NumberDataPointSlice {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints()
	}
	return pmetric.NewNumberDataPointSlice()
}

// IntValue reads a point as an integer, a double rounded.
func IntValue(dp pmetric.NumberDataPoint) int64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeDouble {
		return int64(math.Round(dp.DoubleValue()))
	}
	return dp.IntValue()
}

// NanosValue reads a seconds value as integer nanoseconds.
func NanosValue(dp pmetric.NumberDataPoint) int64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeDouble {
		return int64(math.Round(dp.DoubleValue() * 1e9))
	}
	return dp.IntValue() * 1e9
}

// PointFloat reads a point as a float, whatever its value type.
func PointFloat(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}

// PointUint clamps: a negative or non-finite count is bad input, not a huge number.
func PointUint(dp pmetric.NumberDataPoint) uint64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return uint64(max(dp.IntValue(), 0))
	}
	v := dp.DoubleValue()
	if !(v > 0) || math.IsInf(v, 1) {
		return 0
	}
	if v >= math.MaxUint64 {
		return math.MaxUint64
	}
	return uint64(math.Round(v))
}

// BoolInt writes a flag as a point value.
func BoolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// HostCPUsOf reads a gpotel.host.cpus point: a count from 1 to
// kernelunits.MaxCPUs, or none.
func HostCPUsOf(dp pmetric.NumberDataPoint) (uint32, bool) {
	v := IntValue(dp)
	if v < 1 || v > kernelunits.MaxCPUs {
		return 0, false
	}
	return uint32(v), true // #nosec G115 -- bounded above
}
