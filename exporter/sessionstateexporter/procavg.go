package sessionstateexporter

import (
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/gpsemconv"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// procAvgs collects a session's smoothed figures, one ProcAvg per
// gpotel.time_constant.
type procAvgs struct {
	byConstant map[string]*yagpcc.ProcAvg
}

// add reads m if it is a session smoothed figure and reports whether it was.
// A point whose time constant does not parse as a duration is bad input and
// skipped.
func (pa *procAvgs) add(m pmetric.Metric) bool {
	switch m.Name() {
	case gpsemconv.MetricSessionCPUUsageSmoothed, gpsemconv.MetricSessionDiskIORateSmoothed, gpsemconv.MetricSessionMemoryUsageSmoothed:
	default:
		return false
	}
	pts := numberPoints(m)
	for k := 0; k < pts.Len(); k++ {
		dp := pts.At(k)
		a := dp.Attributes()
		avg := pa.of(strAttr(a, gpsemconv.AttrTimeConstant))
		if avg == nil {
			continue
		}
		v := max(pointFloat(dp), 0)
		switch m.Name() {
		case gpsemconv.MetricSessionCPUUsageSmoothed:
			avg.CpuCores = v
		case gpsemconv.MetricSessionMemoryUsageSmoothed:
			avg.RssBytes = v
		case gpsemconv.MetricSessionDiskIORateSmoothed:
			switch strAttr(a, gpsemconv.AttrDirection) {
			case gpsemconv.DirectionRead:
				avg.ReadBytesPerSecond = v
			case gpsemconv.DirectionWrite:
				avg.WriteBytesPerSecond = v
			}
		}
	}
	return true
}

func (pa *procAvgs) of(constant string) *yagpcc.ProcAvg {
	if avg, ok := pa.byConstant[constant]; ok {
		return avg
	}
	d, err := time.ParseDuration(constant)
	if err != nil || d <= 0 {
		return nil
	}
	if pa.byConstant == nil {
		pa.byConstant = map[string]*yagpcc.ProcAvg{}
	}
	avg := &yagpcc.ProcAvg{TimeConstantSeconds: d.Seconds()}
	pa.byConstant[constant] = avg
	return avg
}

// messages lists the averages shortest time constant first; nil when none.
func (pa *procAvgs) messages() []*yagpcc.ProcAvg {
	if len(pa.byConstant) == 0 {
		return nil
	}
	out := make([]*yagpcc.ProcAvg, 0, len(pa.byConstant))
	for _, avg := range pa.byConstant {
		out = append(out, avg)
	}
	slices.SortFunc(out, func(a, b *yagpcc.ProcAvg) int {
		switch {
		case a.TimeConstantSeconds < b.TimeConstantSeconds:
			return -1
		case a.TimeConstantSeconds > b.TimeConstantSeconds:
			return 1
		}
		return 0
	})
	return out
}
