package sessionstateexporter

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/gpsemconv"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// setSkew folds one skew point (docs/pipeline.md, skew figures) into st. A
// point of an unknown figure, or a hottest segment that is no segment's content id,
// is bad input and skipped.
func setSkew(st *yagpcc.SystemStat, name string, a pcommon.Map, dp pmetric.NumberDataPoint) {
	var skew, overAvg *float64
	var hottest **int32
	switch strAttr(a, gpsemconv.AttrSkewFigure) {
	case gpsemconv.SkewFigureCPU:
		skew, overAvg, hottest = &st.CpuSkew, &st.CpuMaxOverAvg, &st.CpuHottestSegment
	case gpsemconv.SkewFigureIO:
		skew, overAvg, hottest = &st.IoSkew, &st.IoMaxOverAvg, &st.IoHottestSegment
	default:
		return
	}
	switch name {
	case gpsemconv.MetricSessionSkewRatio:
		*skew = pointFloat(dp)
	case gpsemconv.MetricSessionSkewMaxOverAvg:
		*overAvg = pointFloat(dp)
	case gpsemconv.MetricSessionSkewHottestSegment:
		if v := pointFloat(dp); v >= 0 && v <= math.MaxInt32 {
			seg := int32(v)
			*hottest = &seg
		}
	case gpsemconv.MetricSessionSkewSegments:
		st.SkewSegments = uint32(min(pointUint(dp), math.MaxUint32))
	}
}
