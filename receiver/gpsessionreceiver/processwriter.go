package gpsessionreceiver

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/filter"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"

	"github.com/gpotel/gpotel/internal/gpsemconv"
	"github.com/gpotel/gpotel/internal/kernelunits"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadata"
)

// processMetric is one of the metrics of a process resource.
type processMetric int

const (
	pmInfo processMetric = iota
	pmCPUTime
	pmRunDelay
	pmDiskDelay
	pmPagingFaults
	pmContextSwitches
	pmMemoryUsage
	pmMemoryVirtual
	pmMemoryRSS
	pmMemoryPeak
	pmMemoryVirtualPeak
	pmMemorySwap
	pmThreadCount
	pmDiskIO
	pmCancelledWrite
	pmIOChars
	pmIOSyscalls
	pmDelay
	pmCommandCount
	processMetricCount
)

// processMetricNames maps the generated metric names to processMetric.
var processMetricNames = map[string]processMetric{
	metadata.MetricsInfo.GpotelProcessInfo.Name:               pmInfo,
	metadata.MetricsInfo.ProcessCPUTime.Name:                  pmCPUTime,
	metadata.MetricsInfo.GpotelProcessCPURunDelay.Name:        pmRunDelay,
	metadata.MetricsInfo.GpotelProcessDiskDelay.Name:          pmDiskDelay,
	metadata.MetricsInfo.ProcessPagingFaults.Name:             pmPagingFaults,
	metadata.MetricsInfo.ProcessContextSwitches.Name:          pmContextSwitches,
	metadata.MetricsInfo.ProcessMemoryUsage.Name:              pmMemoryUsage,
	metadata.MetricsInfo.ProcessMemoryVirtual.Name:            pmMemoryVirtual,
	metadata.MetricsInfo.GpotelProcessMemoryRss.Name:          pmMemoryRSS,
	metadata.MetricsInfo.GpotelProcessMemoryPeak.Name:         pmMemoryPeak,
	metadata.MetricsInfo.GpotelProcessMemoryVirtualPeak.Name:  pmMemoryVirtualPeak,
	metadata.MetricsInfo.GpotelProcessMemorySwap.Name:         pmMemorySwap,
	metadata.MetricsInfo.ProcessThreadCount.Name:              pmThreadCount,
	metadata.MetricsInfo.ProcessDiskIo.Name:                   pmDiskIO,
	metadata.MetricsInfo.GpotelProcessDiskCancelledWrite.Name: pmCancelledWrite,
	metadata.MetricsInfo.GpotelProcessIoChars.Name:            pmIOChars,
	metadata.MetricsInfo.GpotelProcessIoSyscalls.Name:         pmIOSyscalls,
	metadata.MetricsInfo.GpotelProcessDelay.Name:              pmDelay,
	metadata.MetricsInfo.GpotelProcessCommandCount.Name:       pmCommandCount,
}

// metricShape is how one enabled process metric is written: the generated
// descriptor plus the user's switches for its data-point attribute.
type metricShape struct {
	name, description, unit string
	sum                     bool // a sum, else a gauge
	monotonic               bool
	temporality             pmetric.AggregationTemporality
	double                  bool
	attrKey                 string // data-point attribute key; "" when the metric has none
	attrOn                  bool
	aggregation             string // how points that lost their attribute are merged
}

// processWriter writes process resources straight into pdata: the same
// resources, metrics, order and values as mdatagen's MetricsBuilder, without
// its per-point copies, attribute comparisons and per-resource buffers.
// It is read-only after construction, so all emission workers share one.
type processWriter struct {
	scopeName, scopeVersion string
	order                   []processMetric // enabled metrics, in the builder's emission order
	shapes                  [processMetricCount]metricShape
	attrs                   metadata.ResourceAttributesConfig
	include, exclude        map[string]filter.Filter // resource attribute filters, as the builder applies them
}

// newProcessWriter takes every metric descriptor (name, description, unit,
// kind, temporality, value type), the emission order and the scope from one
// MetricsBuilder emission under the user's config, so nothing the generated
// code spells is spelled again here.
func newProcessWriter(mbc metadata.MetricsBuilderConfig, settings receiver.Settings) (*processWriter, error) {
	w := &processWriter{
		attrs:   mbc.ResourceAttributes,
		include: map[string]filter.Filter{},
		exclude: map[string]filter.Filter{},
	}
	w.setDataPointSwitches(&mbc.Metrics)
	w.setResourceFilters(&mbc.ResourceAttributes)

	tmpl := metadata.NewMetricsBuilder(mbc, settings)
	var ts pcommon.Timestamp
	tmpl.RecordGpotelProcessInfoDataPoint(ts, 1, 0, 0, "", false)
	tmpl.RecordProcessCPUTimeDataPoint(ts, 0, 0, metadata.AttributeCPUModeUser)
	tmpl.RecordGpotelProcessCPURunDelayDataPoint(ts, 0, 0)
	tmpl.RecordGpotelProcessDiskDelayDataPoint(ts, 0, 0)
	tmpl.RecordProcessPagingFaultsDataPoint(ts, 0, 0, metadata.AttributeFaultTypeMajor)
	tmpl.RecordProcessContextSwitchesDataPoint(ts, 0, 0, metadata.AttributeContextSwitchTypeVoluntary)
	tmpl.RecordProcessMemoryUsageDataPoint(ts, 0, 0)
	tmpl.RecordProcessMemoryVirtualDataPoint(ts, 0, 0)
	tmpl.RecordGpotelProcessMemoryRssDataPoint(ts, 0, 0, metadata.AttributeRssTypeAnon)
	tmpl.RecordGpotelProcessMemoryPeakDataPoint(ts, 0, 0)
	tmpl.RecordGpotelProcessMemoryVirtualPeakDataPoint(ts, 0, 0)
	tmpl.RecordGpotelProcessMemorySwapDataPoint(ts, 0, 0)
	tmpl.RecordProcessThreadCountDataPoint(ts, 0, 0)
	tmpl.RecordProcessDiskIoDataPoint(ts, 0, 0, metadata.AttributeDirectionRead)
	tmpl.RecordGpotelProcessDiskCancelledWriteDataPoint(ts, 0, 0)
	tmpl.RecordGpotelProcessIoCharsDataPoint(ts, 0, 0, metadata.AttributeDirectionRead)
	tmpl.RecordGpotelProcessIoSyscallsDataPoint(ts, 0, 0, metadata.AttributeDirectionRead)
	tmpl.RecordGpotelProcessDelayDataPoint(ts, 0, 0, metadata.AttributeDelayTypeSwapin)
	tmpl.RecordGpotelProcessCommandCountDataPoint(ts, 0, 0)
	md := tmpl.Emit()
	if md.ResourceMetrics().Len() == 0 {
		return w, nil // every process metric is disabled: process resources are never written
	}
	if md.ResourceMetrics().Len() != 1 || md.ResourceMetrics().At(0).ScopeMetrics().Len() != 1 {
		return nil, errors.New("gpsession: the metrics builder's template emission is not one resource with one scope")
	}
	sm := md.ResourceMetrics().At(0).ScopeMetrics().At(0)
	w.scopeName, w.scopeVersion = sm.Scope().Name(), sm.Scope().Version()
	for i := 0; i < sm.Metrics().Len(); i++ {
		m := sm.Metrics().At(i)
		pm, ok := processMetricNames[m.Name()]
		if !ok {
			return nil, fmt.Errorf("gpsession: the metrics builder emitted %q, which is no process metric", m.Name())
		}
		shape := &w.shapes[pm]
		shape.name, shape.description, shape.unit = m.Name(), m.Description(), m.Unit()
		var dps pmetric.NumberDataPointSlice
		switch m.Type() {
		case pmetric.MetricTypeSum:
			shape.sum, shape.monotonic, shape.temporality = true, m.Sum().IsMonotonic(), m.Sum().AggregationTemporality()
			dps = m.Sum().DataPoints()
		case pmetric.MetricTypeGauge:
			dps = m.Gauge().DataPoints()
		default:
			return nil, fmt.Errorf("gpsession: process metric %q is a %v, neither sum nor gauge", m.Name(), m.Type())
		}
		if dps.Len() != 1 {
			return nil, fmt.Errorf("gpsession: process metric %q: %d template points, want 1", m.Name(), dps.Len())
		}
		shape.double = dps.At(0).ValueType() == pmetric.NumberDataPointValueTypeDouble
		w.order = append(w.order, pm)
	}
	return w, nil
}

// setDataPointSwitches reads which metrics keep their data-point attribute,
// and how the builder merges the points of a metric that lost it.
func (w *processWriter) setDataPointSwitches(mc *metadata.MetricsConfig) {
	setAttribute(&w.shapes[pmCPUTime], metadata.ProcessCPUTimeMetricAttributeKeyCPUMode, mc.ProcessCPUTime.EnabledAttributes, mc.ProcessCPUTime.AggregationStrategy)
	setAttribute(&w.shapes[pmPagingFaults], metadata.ProcessPagingFaultsMetricAttributeKeyFaultType, mc.ProcessPagingFaults.EnabledAttributes, mc.ProcessPagingFaults.AggregationStrategy)
	setAttribute(&w.shapes[pmContextSwitches], metadata.ProcessContextSwitchesMetricAttributeKeyContextSwitchType, mc.ProcessContextSwitches.EnabledAttributes, mc.ProcessContextSwitches.AggregationStrategy)
	setAttribute(&w.shapes[pmMemoryRSS], metadata.GpotelProcessMemoryRssMetricAttributeKeyRssType, mc.GpotelProcessMemoryRss.EnabledAttributes, mc.GpotelProcessMemoryRss.AggregationStrategy)
	setAttribute(&w.shapes[pmDiskIO], metadata.ProcessDiskIoMetricAttributeKeyDirection, mc.ProcessDiskIo.EnabledAttributes, mc.ProcessDiskIo.AggregationStrategy)
	setAttribute(&w.shapes[pmIOChars], metadata.GpotelProcessIoCharsMetricAttributeKeyDirection, mc.GpotelProcessIoChars.EnabledAttributes, mc.GpotelProcessIoChars.AggregationStrategy)
	setAttribute(&w.shapes[pmIOSyscalls], metadata.GpotelProcessIoSyscallsMetricAttributeKeyDirection, mc.GpotelProcessIoSyscalls.EnabledAttributes, mc.GpotelProcessIoSyscalls.AggregationStrategy)
	setAttribute(&w.shapes[pmDelay], metadata.GpotelProcessDelayMetricAttributeKeyDelayType, mc.GpotelProcessDelay.EnabledAttributes, mc.GpotelProcessDelay.AggregationStrategy)
}

func setAttribute[K ~string](s *metricShape, key K, enabled []K, aggregation string) {
	s.attrKey, s.attrOn, s.aggregation = string(key), slices.Contains(enabled, key), aggregation
}

// setResourceFilters builds the metrics_include/metrics_exclude filters of
// every resource attribute a process resource carries.
func (w *processWriter) setResourceFilters(ra *metadata.ResourceAttributesConfig) {
	for key, c := range map[string]*metadata.ResourceAttributeConfig{
		gpsemconv.AttrResourceKind: &ra.GpotelResourceKind,
		gpsemconv.AttrTmID:         &ra.GpotelTmID,
		gpsemconv.AttrHostName:     &ra.HostName,
		gpsemconv.AttrSessionID:    &ra.GpotelSessionID,
	} {
		if c.MetricsInclude != nil {
			w.include[key] = filter.CreateFilter(c.MetricsInclude)
		}
		if c.MetricsExclude != nil {
			w.exclude[key] = filter.CreateFilter(c.MetricsExclude)
		}
	}
}

// metricPoint is one data point before it is written: its data-point
// attribute value and its value (i or f, by the metric's value type).
type metricPoint struct {
	attr string
	i    int64
	f    float64
}

// metricPoints is what one process contributes to one metric.
type metricPoints struct {
	n   int
	pts [maxAttributeValues]metricPoint
}

// maxAttributeValues is the most data-point attribute values one process
// metric has: gpotel.delay.type's six.
const maxAttributeValues = 6

func (mp *metricPoints) addInt(attr string, v int64) {
	mp.pts[mp.n] = metricPoint{attr: attr, i: v}
	mp.n++
}

func (mp *metricPoints) addDouble(attr string, v float64) {
	mp.pts[mp.n] = metricPoint{attr: attr, f: v}
	mp.n++
}

// merge folds the points of a metric whose data-point attribute is turned
// off, as the builder does with points whose attributes became equal: sum,
// avg (integer division for int values), min or max; an unknown strategy
// keeps them apart.
func (mp *metricPoints) merge(aggregation string, double bool) {
	if mp.n < 2 {
		return
	}
	acc := mp.pts[0]
	switch aggregation {
	case metadata.AggregationStrategySum, metadata.AggregationStrategyAvg:
		for _, p := range mp.pts[1:mp.n] {
			acc.i += p.i
			acc.f += p.f
		}
		if aggregation == metadata.AggregationStrategyAvg {
			acc.i /= int64(mp.n)
			acc.f /= float64(mp.n)
		}
	case metadata.AggregationStrategyMin:
		for _, p := range mp.pts[1:mp.n] {
			if (double && acc.f > p.f) || (!double && acc.i > p.i) {
				acc = p
			}
		}
	case metadata.AggregationStrategyMax:
		for _, p := range mp.pts[1:mp.n] {
			if (double && acc.f < p.f) || (!double && acc.i < p.i) {
				acc = p
			}
		}
	default:
		return
	}
	mp.pts[0], mp.n = acc, 1
}

// processPoints is every metric's points of one process; an emission worker
// reuses one for all its processes.
type processPoints [processMetricCount]metricPoints

// collect takes the values of p that were read: a metric whose source file
// was not read gets no point, never a zero.
func (pp *processPoints) collect(p *kernelunits.Process) {
	for m := range pp {
		pp[m].n = 0
	}
	pp[pmInfo].addInt("", 1)
	if p.UserCPU.OK {
		pp[pmCPUTime].addDouble(metadata.AttributeCPUModeUser.String(), p.UserCPU.V)
		pp[pmCPUTime].addDouble(metadata.AttributeCPUModeSystem.String(), p.SystemCPU.V)
	}
	if p.BlkioDelay.OK {
		pp[pmDiskDelay].addDouble("", p.BlkioDelay.V)
	}
	if p.MajorFaults.OK {
		pp[pmPagingFaults].addInt(metadata.AttributeFaultTypeMajor.String(), p.MajorFaults.V)
		pp[pmPagingFaults].addInt(metadata.AttributeFaultTypeMinor.String(), p.MinorFaults.V)
	}
	if p.VirtualMemory.OK {
		pp[pmMemoryVirtual].addInt("", p.VirtualMemory.V)
	}
	if v := p.MemoryUsage(); v.OK {
		pp[pmMemoryUsage].addInt("", v.V)
	}
	if v := p.ThreadCount(); v.OK {
		pp[pmThreadCount].addInt("", v.V)
	}
	if p.CommandCount.OK {
		pp[pmCommandCount].addInt("", p.CommandCount.V)
	}
	if p.VoluntarySwitches.OK {
		pp[pmContextSwitches].addInt(metadata.AttributeContextSwitchTypeVoluntary.String(), p.VoluntarySwitches.V)
		pp[pmContextSwitches].addInt(metadata.AttributeContextSwitchTypeInvoluntary.String(), p.InvoluntarySwitches.V)
	}
	if p.RSSAnon.OK {
		pp[pmMemoryRSS].addInt(metadata.AttributeRssTypeAnon.String(), p.RSSAnon.V)
	}
	if p.RSSFile.OK {
		pp[pmMemoryRSS].addInt(metadata.AttributeRssTypeFile.String(), p.RSSFile.V)
	}
	if p.RSSShmem.OK {
		pp[pmMemoryRSS].addInt(metadata.AttributeRssTypeShmem.String(), p.RSSShmem.V)
	}
	if p.PeakRSS.OK {
		pp[pmMemoryPeak].addInt("", p.PeakRSS.V)
	}
	if p.PeakVirtual.OK {
		pp[pmMemoryVirtualPeak].addInt("", p.PeakVirtual.V)
	}
	if p.Swap.OK {
		pp[pmMemorySwap].addInt("", p.Swap.V)
	}
	if p.HasIO {
		pp[pmDiskIO].addInt(metadata.AttributeDirectionRead.String(), p.ReadBytes.V)
		pp[pmDiskIO].addInt(metadata.AttributeDirectionWrite.String(), p.WriteBytes.V)
		pp[pmCancelledWrite].addInt("", p.CancelledWriteBytes.V)
		pp[pmIOChars].addInt(metadata.AttributeDirectionRead.String(), p.ReadChars.V)
		pp[pmIOChars].addInt(metadata.AttributeDirectionWrite.String(), p.WriteChars.V)
		pp[pmIOSyscalls].addInt(metadata.AttributeDirectionRead.String(), p.ReadSyscalls.V)
		pp[pmIOSyscalls].addInt(metadata.AttributeDirectionWrite.String(), p.WriteSyscalls.V)
	}
	if p.RunDelay.OK {
		pp[pmRunDelay].addDouble("", p.RunDelay.V)
	}
	for i, d := range p.Delays {
		if d.OK {
			pp[pmDelay].addDouble(delayTypes[i].String(), d.V)
		}
	}
}

// delayTypes are the gpotel.delay.type values of kernelunits' Delay* indexes.
var delayTypes = [kernelunits.NumDelays]metadata.AttributeDelayType{
	kernelunits.DelaySwapin: metadata.AttributeDelayTypeSwapin, kernelunits.DelayFreepages: metadata.AttributeDelayTypeFreepages,
	kernelunits.DelayThrashing: metadata.AttributeDelayTypeThrashing, kernelunits.DelayCompact: metadata.AttributeDelayTypeCompact,
	kernelunits.DelayWpcopy: metadata.AttributeDelayTypeWpcopy, kernelunits.DelayIRQ: metadata.AttributeDelayTypeIrq,
}

// answeredProcess is one process of an agent answer, converted and ready
// to be written.
type answeredProcess struct {
	backend *Backend
	start   pcommon.Timestamp // creation time
	points  processPoints
}

// answerScratch is what one goroutine reuses from answer to answer.
type answerScratch struct {
	procs []answeredProcess
	order []int32 // procs grouped by session, in answer order within a session
}

// answerWrite is one agent answer and what the emission needs around it.
type answerWrite struct {
	time   pcommon.Timestamp
	tmID   int64
	host   string
	consts kernelunits.Host
	infos  []*yagpcc.GpPidProcInfo
	byPID  map[int64]*Backend // the asked backends; checkAnswer let only these through
}

// writeAnswer appends to rms one process resource per session of one agent
// answer (docs/pipeline.md, process resources). It returns how many
// processes it wrote and how many it left out for want of a stat.
func (w *processWriter) writeAnswer(rms pmetric.ResourceMetricsSlice, sc *answerScratch, a *answerWrite) (written, withoutStat int) {
	sc.procs = slices.Grow(sc.procs[:0], len(a.infos))
	for _, info := range a.infos {
		p := kernelunits.Convert(info, a.consts)
		if !p.HasStat {
			withoutStat++
			continue
		}
		w.appendProcess(sc, a.byPID[info.GetPid()], &p)
	}
	if len(w.order) == 0 || len(sc.procs) == 0 {
		return 0, withoutStat
	}
	sc.eachSession(func(session int64, group []int32) {
		if w.writeSession(rms, sc, a, session, group) {
			written += len(group)
		}
	})
	return written, withoutStat
}

// eachSession calls fn once per session of sc.procs with that session's
// indexes, sessions in id order, processes in answer order within one.
func (sc *answerScratch) eachSession(fn func(session int64, group []int32)) {
	sc.order = sc.order[:0]
	for i := range sc.procs {
		sc.order = append(sc.order, int32(i))
	}
	slices.SortStableFunc(sc.order, func(x, y int32) int {
		return cmp.Compare(sc.procs[x].backend.SessionID, sc.procs[y].backend.SessionID)
	})
	for from := 0; from < len(sc.order); {
		session := sc.procs[sc.order[from]].backend.SessionID
		to := from + 1
		for to < len(sc.order) && sc.procs[sc.order[to]].backend.SessionID == session {
			to++
		}
		fn(session, sc.order[from:to])
		from = to
	}
}

// writeSession writes the process resource of one session's processes,
// unless a resource attribute filter drops it.
func (w *processWriter) writeSession(rms pmetric.ResourceMetricsSlice, sc *answerScratch, a *answerWrite, session int64, group []int32) bool {
	attrs := pcommon.NewMap()
	w.putResourceAttributes(attrs, a.tmID, a.host, session)
	if !w.passesFilters(attrs) {
		return false
	}
	rm := rms.AppendEmpty()
	attrs.MoveTo(rm.Resource().Attributes())
	sms := rm.ScopeMetrics()
	sms.EnsureCapacity(1)
	sm := sms.AppendEmpty()
	sm.Scope().SetName(w.scopeName)
	sm.Scope().SetVersion(w.scopeVersion)
	ms := sm.Metrics()
	ms.EnsureCapacity(len(w.order))
	for _, m := range w.order {
		n := 0
		for _, i := range group {
			n += sc.procs[i].points[m].n
		}
		if n == 0 {
			continue
		}
		shape := &w.shapes[m]
		metric := ms.AppendEmpty()
		metric.SetName(shape.name)
		metric.SetDescription(shape.description)
		metric.SetUnit(shape.unit)
		var dps pmetric.NumberDataPointSlice
		if shape.sum {
			sum := metric.SetEmptySum()
			sum.SetIsMonotonic(shape.monotonic)
			sum.SetAggregationTemporality(shape.temporality)
			dps = sum.DataPoints()
		} else {
			dps = metric.SetEmptyGauge().DataPoints()
		}
		dps.EnsureCapacity(n)
		for _, i := range group {
			ap := &sc.procs[i]
			mp := &ap.points[m]
			for _, p := range mp.pts[:mp.n] {
				dp := dps.AppendEmpty()
				dp.SetStartTimestamp(ap.start)
				dp.SetTimestamp(a.time)
				if shape.double {
					dp.SetDoubleValue(p.f)
				} else {
					dp.SetIntValue(p.i)
				}
				if m == pmInfo {
					putInfoAttributes(dp.Attributes(), ap.backend)
					continue
				}
				da := dp.Attributes()
				if shape.attrOn {
					da.EnsureCapacity(2)
					da.PutInt(gpsemconv.AttrProcessPID, ap.backend.PID)
					da.PutStr(shape.attrKey, p.attr)
				} else {
					da.PutInt(gpsemconv.AttrProcessPID, ap.backend.PID)
				}
			}
		}
	}
	return true
}

// appendProcess adds a process to sc with its points collected, reusing
// the slot's point buffers from earlier answers.
func (w *processWriter) appendProcess(sc *answerScratch, b *Backend, p *kernelunits.Process) {
	sc.procs = slices.Grow(sc.procs, 1)[:len(sc.procs)+1]
	ap := &sc.procs[len(sc.procs)-1]
	ap.backend, ap.start = b, pcommon.NewTimestampFromTime(p.CreationTime)
	ap.points.collect(p)
	for _, m := range w.order {
		if !w.shapes[m].attrOn {
			ap.points[m].merge(w.shapes[m].aggregation, w.shapes[m].double)
		}
	}
}

// writeExited writes the processes in sc.procs of one host that are not
// live (exit records, unrecorded CPU) as process resources per session,
// marked with kind; the unattributed ones (unattributedSession) in one
// resource without a session.
func (w *processWriter) writeExited(rms pmetric.ResourceMetricsSlice, sc *answerScratch, a *answerWrite, kind string) {
	if len(w.order) == 0 || len(sc.procs) == 0 {
		return
	}
	sc.eachSession(func(session int64, group []int32) {
		n := rms.Len()
		if w.writeSession(rms, sc, a, session, group) && rms.Len() > n {
			attrs := rms.At(n).Resource().Attributes()
			attrs.PutStr(gpsemconv.AttrResourceKind, kind)
			if session == unattributedSession {
				attrs.Remove(gpsemconv.AttrSessionID)
			}
		}
	})
}

// putInfoAttributes writes what describes a process on its gpotel.process.info point.
func putInfoAttributes(da pcommon.Map, b *Backend) {
	da.EnsureCapacity(4)
	da.PutInt(gpsemconv.AttrProcessPID, b.PID)
	da.PutInt(gpsemconv.AttrSegmentID, b.SegmentID)
	if b.BackendType != "" {
		da.PutStr(gpsemconv.AttrBackendType, b.BackendType)
	}
	da.PutBool(gpsemconv.AttrProcessSystem, isSystemProcess(b.SessionID, b.BackendType))
}

// putResourceAttributes writes the enabled resource attributes of a process resource.
func (w *processWriter) putResourceAttributes(attrs pcommon.Map, tmID int64, host string, session int64) {
	ra := &w.attrs
	attrs.EnsureCapacity(4)
	if ra.GpotelResourceKind.Enabled {
		attrs.PutStr(gpsemconv.AttrResourceKind, gpsemconv.KindProcess)
	}
	if ra.GpotelTmID.Enabled {
		attrs.PutInt(gpsemconv.AttrTmID, tmID)
	}
	if ra.HostName.Enabled {
		attrs.PutStr(gpsemconv.AttrHostName, host)
	}
	if ra.GpotelSessionID.Enabled {
		attrs.PutInt(gpsemconv.AttrSessionID, session)
	}
}

// passesFilters applies metrics_include and metrics_exclude as the builder
// does: an attribute that is present must match its include filter and must
// not match its exclude filter.
func (w *processWriter) passesFilters(attrs pcommon.Map) bool {
	for key, f := range w.include {
		if v, ok := attrs.Get(key); ok && !f.Matches(v.AsString()) {
			return false
		}
	}
	for key, f := range w.exclude {
		if v, ok := attrs.Get(key); ok && f.Matches(v.AsString()) {
			return false
		}
	}
	return true
}
