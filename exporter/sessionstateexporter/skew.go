package sessionstateexporter

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/gpsemconv"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// setSkew folds one skew point (docs/pipeline.md, skew figures) into st. A
// hottest segment that is no segment's content id is bad input and skipped.
func setSkew(st *yagpcc.SystemStat, name string, dp pmetric.NumberDataPoint) {
	hottest := func(dst **int32) {
		if v := pointFloat(dp); v >= 0 && v <= math.MaxInt32 {
			seg := int32(v)
			*dst = &seg
		}
	}
	switch name {
	case gpsemconv.MetricSessionCPUSkew:
		st.CpuSkew = pointFloat(dp)
	case gpsemconv.MetricSessionCPUSkewMaxOverAvg:
		st.CpuMaxOverAvg = pointFloat(dp)
	case gpsemconv.MetricSessionCPUSkewHottest:
		hottest(&st.CpuHottestSegment)
	case gpsemconv.MetricSessionDiskIOSkew:
		st.IoSkew = pointFloat(dp)
	case gpsemconv.MetricSessionDiskIOSkewMaxOverAvg:
		st.IoMaxOverAvg = pointFloat(dp)
	case gpsemconv.MetricSessionDiskIOSkewHottest:
		hottest(&st.IoHottestSegment)
	case gpsemconv.MetricSessionSkewSegments:
		st.SkewSegments = uint32(min(pointUint(dp), math.MaxUint32))
	}
}
