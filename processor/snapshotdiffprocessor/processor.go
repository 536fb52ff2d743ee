package snapshotdiffprocessor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.uber.org/zap"

	"github.com/gpotel/gpotel/internal/clockstep"
	sc "github.com/gpotel/gpotel/internal/gpsemconv"
)

// scopeName is the instrumentation scope of the session figures.
const scopeName = "github.com/gpotel/gpotel/processor/snapshotdiffprocessor"

// snapshotDiff turns each snapshot into per-session window figures.
type snapshotDiff struct {
	emitProcesses bool
	// emitSessionHosts adds each session's per-host figures.
	emitSessionHosts bool
	windowNames      []string
	constantNames    []string      // gpotel.time_constant values
	smoother         *smoother     // nil when smoothing is off
	queries          *queryTracker // nil when query figures are off
	queryText        bool
	queryTextMax     int
	logger           *zap.Logger

	mu    sync.Mutex // serialises snapshots: the store is one timeline
	store *store

	decoders sync.Pool // *processDecoder, one per batch being decoded
}

func newSnapshotDiff(cfg *Config, logger *zap.Logger) *snapshotDiff {
	p := &snapshotDiff{
		emitProcesses:    cfg.EmitProcessMetrics,
		emitSessionHosts: cfg.EmitSessionHostFigures,
		logger:           logger,
		store:            newStore(cfg.Windows, cfg.MaxStoredPoints),
	}
	p.decoders.New = func() any { return &processDecoder{} }
	for _, w := range cfg.Windows {
		p.windowNames = append(p.windowNames, sc.WindowName(w))
	}
	if cfg.Queries.Enabled {
		p.queries = newQueryTracker(slices.Max(cfg.Windows), cfg.Queries.MaxFinished)
		p.queryText, p.queryTextMax = cfg.Queries.Text, cfg.Queries.TextMaxLength
	}
	if len(cfg.TimeConstants) > 0 {
		p.smoother = newSmoother(cfg.TimeConstants)
		for _, c := range cfg.TimeConstants {
			p.constantNames = append(p.constantNames, sc.WindowName(c))
		}
	}
	return p
}

type resourceKind uint8

const (
	kindForeign resourceKind = iota
	kindSnapshot
	kindSession
	kindProcess
	kindExited     // an exited process's final totals
	kindUnrecorded // a postmaster's reaped children's CPU beyond their exit records
	kindUnknown    // has the attribute, with a value we do not know
)

// isProcesses tells the kinds read into the store as processes.
func (k resourceKind) isProcesses() bool {
	return k == kindProcess || k == kindExited || k == kindUnrecorded
}

func kindOf(rm pmetric.ResourceMetrics) resourceKind {
	v, ok := rm.Resource().Attributes().Get(sc.AttrResourceKind)
	if !ok {
		return kindForeign
	}
	switch v.Str() {
	case sc.KindSnapshot:
		return kindSnapshot
	case sc.KindSession:
		return kindSession
	case sc.KindProcess:
		return kindProcess
	case sc.KindExited:
		return kindExited
	case sc.KindUnrecorded:
		return kindUnrecorded
	}
	return kindUnknown
}

// processMetrics is the processorhelper function. A snapshot arrives as
// process batches closed by the batch with its snapshot resource
// (docs/pipeline.md rule 1).
func (p *snapshotDiff) processMetrics(_ context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	rms := md.ResourceMetrics()
	kinds := make([]resourceKind, rms.Len())
	snapshotAt, snapshots, processes := -1, 0, 0
	for i := range rms.Len() {
		kinds[i] = kindOf(rms.At(i))
		switch kinds[i] {
		case kindSnapshot:
			snapshotAt = i
			snapshots++
		case kindProcess, kindExited, kindUnrecorded:
			processes++
		}
	}
	switch {
	case snapshots == 0 && processes == 0:
		return md, nil
	case snapshots == 0:
		p.collect(md, kinds)
		if !p.emitProcesses {
			return md, processorhelper.ErrSkipProcessingData
		}
		return md, nil
	case snapshots > 1:
		p.logger.Warn("batch holds more than one snapshot (is a batch processor in front of snapshotdiff?); forwarding it without session figures",
			zap.Int("snapshots", snapshots))
	default:
		figs, err := p.ingest(md, kinds, snapshotAt)
		if err != nil {
			p.logger.Warn("snapshot not ingested; forwarding it without session figures", zap.Error(err))
		} else {
			p.appendFigures(md, kinds, figs)
		}
	}
	if !p.emitProcesses && processes > 0 {
		i := 0
		rms.RemoveIf(func(pmetric.ResourceMetrics) bool {
			// Resources past kinds are the ones appendFigures added (query resources).
			drop := i < len(kinds) && kinds[i].isProcesses()
			i++
			return drop
		})
	}
	return md, nil
}

// collect adds a process batch to the snapshot of its time. It decodes
// before it takes the lock, so batches of many hosts decode at once.
func (p *snapshotDiff) collect(md pmetric.Metrics, kinds []resourceKind) {
	t := firstTimestamp(md)
	if t == 0 {
		p.logger.Warn("process batch without a timestamp; skipped")
		return
	}
	d := p.decoders.Get().(*processDecoder)
	defer p.decoders.Put(d)
	d.decode(md.ResourceMetrics(), kinds)

	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.openSnapshot(int64(t)); err != nil {
		p.logger.Warn("process batch not ingested", zap.Error(err))
		return
	}
	p.addDecoded(d)
}

// openSnapshot makes the store collect the snapshot of time t. A snapshot
// still open at another time never got its closing batch: it is closed
// without host answers, so the counters seen in it stay consistent.
func (p *snapshotDiff) openSnapshot(t int64) error {
	if p.store.ingesting {
		if p.store.pendTime == t {
			return nil
		}
		p.logger.Warn("snapshot closed without its snapshot resource (was its closing batch refused?)",
			zap.Time("snapshot", time.Unix(0, p.store.pendTime)), zap.Time("next", time.Unix(0, t)))
		if err := p.store.commit(nil); err != nil {
			return err
		}
	}
	if newest := p.store.newestTime(); newest != 0 && clockstep.SteppedBack(time.Unix(0, newest), time.Unix(0, t)) {
		p.logger.Warn("snapshot much older than the newest: the wall clock went back; window figures start over from it",
			zap.Time("snapshot", time.Unix(0, t)), zap.Time("newest", time.Unix(0, newest)))
		p.store.restartTimeline()
		if p.smoother != nil {
			p.smoother.restartClock()
		}
		if p.queries != nil {
			p.queries.restart()
		}
	}
	if err := p.store.begin(t); err != nil {
		return fmt.Errorf("snapshot at %s: %w", time.Unix(0, t).UTC().Format(time.RFC3339Nano), err)
	}
	return nil
}

// addDecoded stores what d decoded; the caller holds p.mu.
func (p *snapshotDiff) addDecoded(d *processDecoder) {
	skipped, firstErr := d.skipped, d.firstErr
	for i := range d.samples {
		if err := p.store.add(&d.samples[i]); err != nil {
			skipped++
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	if skipped > 0 {
		p.logger.Warn("process data skipped", zap.Int("skipped", skipped), zap.Error(firstErr))
	}
}

// ingest closes the snapshot with the batch that holds its snapshot resource.
func (p *snapshotDiff) ingest(md pmetric.Metrics, kinds []resourceKind, snapshotAt int) (*figures, error) {
	rms := md.ResourceMetrics()
	t, hosts := readSnapshotResource(rms.At(snapshotAt))
	if t == 0 {
		t = firstTimestamp(md)
	}
	if t == 0 {
		return nil, errors.New("snapshot has no data point to take its time from")
	}
	d := p.decoders.Get().(*processDecoder)
	defer p.decoders.Put(d)
	d.decode(rms, kinds)
	var acts map[sessionKey]sessionActivity
	if p.queries != nil {
		acts = readActivities(rms, kinds)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.openSnapshot(int64(t)); err != nil {
		return nil, err
	}
	p.addDecoded(d)
	if err := p.store.commit(hosts); err != nil {
		return nil, err
	}
	figs := p.store.computeFigures()
	if p.smoother != nil {
		figs.smoothed = p.smoother.update(p.store)
	}
	if p.queries != nil {
		figs.queries = p.queries.update(p.store, acts)
		figs.hostNames = append([]string(nil), p.store.hostNames...)
	}
	figs.segments = p.store.computeSegmentFigures(p.emitSessionHosts)
	return figs, nil
}

// readSnapshotResource returns the snapshot time and the hosts' answers.
func readSnapshotResource(rm pmetric.ResourceMetrics) (pcommon.Timestamp, []hostAnswer) {
	var t pcommon.Timestamp
	var hosts []hostAnswer
	sms := rm.ScopeMetrics()
	for i := range sms.Len() {
		ms := sms.At(i).Metrics()
		for j := range ms.Len() {
			m := ms.At(j)
			forEachPoint(m, func(dp pmetric.NumberDataPoint) {
				if t == 0 {
					t = dp.Timestamp()
				}
				if m.Name() != sc.MetricHostUp {
					return
				}
				h, ok := dp.Attributes().Get(sc.AttrHostName)
				if !ok {
					return
				}
				hosts = append(hosts, hostAnswer{Host: h.AsString(), Up: intValue(dp) != 0})
			})
		}
	}
	return t, hosts
}

func firstTimestamp(md pmetric.Metrics) pcommon.Timestamp {
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				var t pcommon.Timestamp
				forEachPoint(ms.At(k), func(dp pmetric.NumberDataPoint) {
					if t == 0 {
						t = dp.Timestamp()
					}
				})
				if t != 0 {
					return t
				}
			}
		}
	}
	return 0
}

func forEachPoint(m pmetric.Metric, fn func(pmetric.NumberDataPoint)) {
	var dps pmetric.NumberDataPointSlice
	switch m.Type() {
	case pmetric.MetricTypeSum:
		dps = m.Sum().DataPoints()
	case pmetric.MetricTypeGauge:
		dps = m.Gauge().DataPoints()
	default:
		return
	}
	for i := range dps.Len() {
		fn(dps.At(i))
	}
}

func intValue(dp pmetric.NumberDataPoint) int64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeDouble {
		return int64(math.Round(dp.DoubleValue()))
	}
	return dp.IntValue()
}

// nanosValue reads a seconds value as integer nanoseconds.
func nanosValue(dp pmetric.NumberDataPoint) int64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeDouble {
		return int64(math.Round(dp.DoubleValue() * 1e9))
	}
	return dp.IntValue() * 1e9
}

// appendFigures adds the session figures to every session resource.
func (p *snapshotDiff) appendFigures(md pmetric.Metrics, kinds []resourceKind, figs *figures) {
	rms := md.ResourceMetrics()
	for i, kind := range kinds {
		if kind == kindSnapshot {
			// One processor scope on the snapshot resource: cluster figures, then the smoothed ones.
			sm := rms.At(i).ScopeMetrics().AppendEmpty()
			p.writeCluster(sm, figs)
			if figs.smoothed != nil {
				p.writeClusterSmoothed(sm, figs)
			}
		}
		if kind != kindSession {
			continue
		}
		rm := rms.At(i)
		attrs := rm.Resource().Attributes()
		tm, _ := attrs.Get(sc.AttrTmID)
		id, ok := attrs.Get(sc.AttrSessionID)
		if !ok {
			p.logger.Warn("session resource lacks " + sc.AttrSessionID + "; no figures for it")
			continue
		}
		key := sessionKey{tmID: tm.Int(), id: id.Int()}
		sm := rm.ScopeMetrics().AppendEmpty()
		p.writeSession(sm, figs.session(key))
		if figs.smoothed != nil {
			p.writeSessionSmoothed(sm.Metrics(), pcommon.Timestamp(figs.time), figs.smoothed.sessions[key])
		}
		p.writeSessionSegments(sm.Metrics(), figs, figs.session(key))
	}
	p.writeQueries(rms, pcommon.Timestamp(figs.time), figs.hostNames, figs.queries)
}

func (p *snapshotDiff) writeSession(sm pmetric.ScopeMetrics, sf sessionFigures) {
	sm.Scope().SetName(scopeName)
	ms := sm.Metrics()
	f := sf.f
	ts := pcommon.Timestamp(f.time)
	point := func(g pmetric.Gauge, window string) pmetric.NumberDataPoint {
		dp := g.DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		if window != "" {
			dp.Attributes().PutStr(sc.AttrWindow, window)
		}
		return dp
	}
	gauge := func(name, unit string) pmetric.Gauge {
		m := ms.AppendEmpty()
		m.SetName(name)
		m.SetUnit(unit)
		return m.SetEmptyGauge()
	}
	var zero counters
	for _, cm := range counterMetrics {
		totals := gauge(cm.session, cm.unit)
		rates := gauge(cm.session+sc.RateSuffix, cm.unit+"/s")
		for w, name := range p.windowNames {
			d := &zero
			if sf.known {
				d = &f.windows[w].deltas[sf.row]
			}
			span := float64(f.windows[w].span) / 1e9
			for _, as := range cm.slots {
				v := d[as.slot]
				dp := point(totals, name)
				setCounter(dp, cm, as, v)
				r := point(rates, name)
				setAttr(r, cm, as)
				r.SetDoubleValue(0)
				if span > 0 {
					amount := float64(v)
					if cm.seconds {
						amount /= 1e9
					}
					r.SetDoubleValue(amount / span)
				}
			}
		}
		l := &zero
		if sf.known {
			l = &f.lifetime[sf.row]
		}
		for _, as := range cm.slots {
			setCounter(point(totals, sc.WindowLifetime), cm, as, l[as.slot])
		}
	}

	spans := gauge(sc.MetricSessionWindowSpan, "s")
	partial := gauge(sc.MetricSessionPartial, "1")
	for w, name := range p.windowNames {
		point(spans, name).SetDoubleValue(float64(f.windows[w].span) / 1e9)
		point(partial, name).SetIntValue(boolInt(sf.known && f.windows[w].partial[sf.row]))
	}
	point(partial, sc.WindowLifetime).SetIntValue(boolInt(sf.known && f.lifetimePartial[sf.row]))

	var procs, hosts int64
	var cluster, maxHost memoryGauges
	if sf.known {
		procs, hosts = int64(f.processes[sf.row]), int64(f.hosts[sf.row])
		cluster, maxHost = f.memoryCluster[sf.row], f.memoryMaxHost[sf.row]
	}
	point(gauge(sc.MetricSessionProcesses, "{process}"), "").SetIntValue(procs)
	point(gauge(sc.MetricSessionHosts, "{host}"), "").SetIntValue(hosts)
	mem := gauge(sc.MetricSessionMemoryUsage, "By")
	for k, name := range memoryTypeNames {
		for _, agg := range []struct {
			name  string
			value int64
		}{{sc.MemoryAggregationCluster, cluster[k]}, {sc.MemoryAggregationMaxHost, maxHost[k]}} {
			dp := point(mem, "")
			dp.Attributes().PutStr(sc.AttrMemoryType, name)
			dp.Attributes().PutStr(sc.AttrMemoryAggregation, agg.name)
			dp.SetIntValue(agg.value)
		}
	}
}

// writeCluster writes, per window, every counter summed over all processes
// (exited included) and over the unattributed exited ones per segment.
func (p *snapshotDiff) writeCluster(sm pmetric.ScopeMetrics, f *figures) {
	sm.Scope().SetName(scopeName)
	ms := sm.Metrics()
	ts := pcommon.Timestamp(f.time)
	p.mu.Lock()
	hostNames := append([]string(nil), p.store.hostNames...)
	p.mu.Unlock()
	spans := ms.AppendEmpty()
	spans.SetName(sc.ClusterMetric(sc.MetricSessionWindowSpan))
	spans.SetUnit("s")
	sdps := spans.SetEmptyGauge().DataPoints()
	for w, name := range p.windowNames {
		dp := sdps.AppendEmpty()
		dp.SetTimestamp(ts)
		dp.Attributes().PutStr(sc.AttrWindow, name)
		dp.SetDoubleValue(float64(f.windows[w].span) / 1e9)
	}
	for _, cm := range counterMetrics {
		cluster := ms.AppendEmpty()
		cluster.SetName(sc.ClusterMetric(cm.session))
		cluster.SetUnit(cm.unit)
		cdps := cluster.SetEmptyGauge().DataPoints()
		unattr := ms.AppendEmpty()
		unattr.SetName(sc.UnattributedMetric(cm.session))
		unattr.SetUnit(cm.unit)
		udps := unattr.SetEmptyGauge().DataPoints()
		// The postmasters' cutime/cstime give CPU only.
		var rdps pmetric.NumberDataPointSlice
		unrecorded := cm.session == sc.MetricSessionCPUTime
		if unrecorded {
			unrec := ms.AppendEmpty()
			unrec.SetName(sc.MetricUnrecordedCPUTime)
			unrec.SetUnit(cm.unit)
			rdps = unrec.SetEmptyGauge().DataPoints()
		}
		for w, name := range p.windowNames {
			wf := &f.windows[w]
			for _, as := range cm.slots {
				dp := cdps.AppendEmpty()
				dp.SetTimestamp(ts)
				dp.Attributes().PutStr(sc.AttrWindow, name)
				setCounter(dp, cm, as, wf.cluster[as.slot])
				writeSegments(udps, wf.unattributed, ts, name, hostNames, cm, as)
				if unrecorded {
					writeSegments(rdps, wf.unrecorded, ts, name, hostNames, cm, as)
				}
			}
		}
	}
}

// writeSegments appends one point per segment of bySegment.
func writeSegments(dps pmetric.NumberDataPointSlice, bySegment map[hostSegment]*counters, ts pcommon.Timestamp, window string,
	hostNames []string, cm counterMetric, as attrSlot) {
	for hs, c := range bySegment {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(ts)
		dp.Attributes().PutStr(sc.AttrWindow, window)
		dp.Attributes().PutStr(sc.AttrHostName, hostNames[hs.host])
		dp.Attributes().PutInt(sc.AttrSegmentID, int64(hs.segment))
		setCounter(dp, cm, as, c[as.slot])
	}
}

func setAttr(dp pmetric.NumberDataPoint, cm counterMetric, as attrSlot) {
	if cm.attr != "" {
		dp.Attributes().PutStr(cm.attr, as.value)
	}
}

// setCounter writes a session counter: seconds as double, the rest as int.
func setCounter(dp pmetric.NumberDataPoint, cm counterMetric, as attrSlot, v int64) {
	setAttr(dp, cm, as)
	if cm.seconds {
		dp.SetDoubleValue(float64(v) / 1e9)
	} else {
		dp.SetIntValue(v)
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
