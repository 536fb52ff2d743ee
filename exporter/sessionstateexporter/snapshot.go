package sessionstateexporter

import (
	"math"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/internal/gpsemconv"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// sessionKey identifies a session for the life of a cluster (yagpcc's SessionKey).
type sessionKey struct {
	tmID   int64
	sessID int64
}

func (k sessionKey) less(o sessionKey) bool {
	if k.tmID != o.tmID {
		return k.tmID < o.tmID
	}
	return k.sessID < o.sessID
}

// session is one session's state as of the last snapshot that held it.
// It is immutable once built: readers share it without locks.
type session struct {
	key    sessionKey
	state  *yagpcc.SessionState
	system bool
	// running: the session is executing the statement in its query text.
	running bool
	// seen is the time of the newest snapshot that held the session.
	seen time.Time
	// encodedSize is the session's share of a list response on the wire.
	encodedSize int
	// backends are the session's processes on every host (gpotel.session.info "backends").
	backends []gpsemconv.BackendRef
	// query is the running query's record, when the processor writes query figures.
	query *queryRecord
	// hosts is its per-host breakdown over the last_metrics window, when the processor emits one.
	hosts []*gpotelv1.SessionHostUsage
}

// parsedSnapshot is what one ConsumeMetrics call delivered.
type parsedSnapshot struct {
	time     time.Time
	host     string
	sessions []*session
	// hasSnapshot: a snapshot resource was present (it may hold no session).
	hasSnapshot bool
	// invalid counts session resources without a usable identity.
	invalid int
	// lastWindowMissing counts sessions that lack the last_metrics window.
	lastWindowMissing int
	// queries are the query resources (running and recently ended queries).
	queries   []*queryRecord
	queryByID map[queryID]*queryRecord
}

// snapshotParser turns the processor's pdata into sessions (docs/pipeline.md).
type snapshotParser struct {
	clusterID    string
	hostOverride string
	fallbackHost string
	lastWindow   time.Duration
	// windowMatch caches which gpotel.window strings name lastWindow.
	windowMatch map[string]bool
}

// Which SystemStat a windowed data point feeds.
const (
	windowOther = iota
	windowLast
	windowLifetime
)

func (p *snapshotParser) windowOf(attrs pcommon.Map) int {
	v, ok := attrs.Get(gpsemconv.AttrWindow)
	if !ok {
		return windowOther
	}
	w := v.AsString()
	if w == gpsemconv.WindowLifetime {
		return windowLifetime
	}
	match, known := p.windowMatch[w]
	if !known {
		// Compare durations, not spellings: "5m" and "5m0s" are one window.
		d, err := time.ParseDuration(w)
		match = err == nil && d == p.lastWindow
		p.windowMatch[w] = match
	}
	if match {
		return windowLast
	}
	return windowOther
}

func (p *snapshotParser) parse(md pmetric.Metrics) parsedSnapshot {
	var snap parsedSnapshot
	var sessionTime time.Time
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		kind, _ := rm.Resource().Attributes().Get(gpsemconv.AttrResourceKind)
		switch kind.Str() {
		case gpsemconv.KindSnapshot:
			snap.hasSnapshot = true
			if h, ok := rm.Resource().Attributes().Get(gpsemconv.AttrHostName); ok {
				snap.host = h.AsString()
			}
			if t := firstTimestamp(rm); !t.IsZero() {
				snap.time = t
			}
		case gpsemconv.KindSession:
			s, t, lastFound, ok := p.parseSession(rm)
			if !ok {
				snap.invalid++
				continue
			}
			if !lastFound {
				snap.lastWindowMissing++
			}
			if t.After(sessionTime) {
				sessionTime = t
			}
			snap.sessions = append(snap.sessions, s)
		case gpsemconv.KindQuery:
			if q, ok := parseQuery(rm); ok {
				snap.queries = append(snap.queries, q)
			} else {
				snap.invalid++
			}
		}
	}
	if snap.time.IsZero() {
		snap.time = sessionTime
	}
	if snap.time.IsZero() {
		// Points without timestamps: the arrival time is the best we know.
		snap.time = time.Now().UTC()
	}
	host := p.hostOverride
	if host == "" {
		host = snap.host
	}
	snap.queryByID = attachQueries(snap.sessions, snap.queries)
	ts := timestamppb.New(snap.time)
	for _, s := range snap.sessions {
		s.seen = snap.time
		s.state.Time = ts
		if host != "" {
			s.state.Hostname = host
		} else if s.state.Hostname == "" {
			s.state.Hostname = p.fallbackHost
		}
		size := proto.Size(s.state)
		s.encodedSize = 1 + varintLen(uint64(size)) + size
	}
	return snap
}

// firstTimestamp is the timestamp of the resource's first data point.
func firstTimestamp(rm pmetric.ResourceMetrics) time.Time {
	sms := rm.ScopeMetrics()
	for i := 0; i < sms.Len(); i++ {
		ms := sms.At(i).Metrics()
		for j := 0; j < ms.Len(); j++ {
			if pts := numberPoints(ms.At(j)); pts.Len() > 0 {
				if ts := pts.At(0).Timestamp(); ts != 0 {
					return ts.AsTime().UTC()
				}
			}
		}
	}
	return time.Time{}
}

// numberPoints accepts gauges and sums alike: the contract says gauge, a sum
// carries the same figures.
func numberPoints(m pmetric.Metric) pmetric.NumberDataPointSlice {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints()
	}
	return pmetric.NewNumberDataPointSlice()
}

func pointFloat(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}

// pointUint clamps: a negative or non-finite count is bad input, not a huge number.
func pointUint(dp pmetric.NumberDataPoint) uint64 {
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

// sessionStats collects the two SystemStats of one session.
type sessionStats struct {
	last, total           yagpcc.SystemStat
	lastFound, totalFound bool
}

// target returns the stats a windowed data point feeds, nil when neither.
func (st *sessionStats) target(window int) *yagpcc.SystemStat {
	switch window {
	case windowLast:
		st.lastFound = true
		return &st.last
	case windowLifetime:
		st.totalFound = true
		return &st.total
	}
	return nil
}

// parseSession builds one session from its resource. ok is false when the
// resource lacks its identity (gpotel.session.id, gpotel.tm_id).
func (p *snapshotParser) parseSession(rm pmetric.ResourceMetrics) (s *session, t time.Time, lastFound, ok bool) {
	attrs := rm.Resource().Attributes()
	sessID, okS := intAttr(attrs, gpsemconv.AttrSessionID)
	tmID, okT := intAttr(attrs, gpsemconv.AttrTmID)
	if !okS || !okT {
		return nil, t, false, false
	}
	pid, _ := intAttr(attrs, gpsemconv.AttrSessionPID)
	system := boolAttr(attrs, gpsemconv.AttrSessionSystem)
	info := &yagpcc.SessionInfo{
		Pid:      pid,
		Database: strAttr(attrs, gpsemconv.AttrDBNamespace),
		User:     strAttr(attrs, gpsemconv.AttrSessionUser),
		System:   system,
	}
	state := &yagpcc.SessionState{
		ClusterId:   p.clusterID,
		Hostname:    strAttr(attrs, gpsemconv.AttrHostName),
		SessionKey:  &yagpcc.SessionKey{SessId: sessID, TmId: tmID},
		SessionInfo: info,
	}
	var stats sessionStats
	var avgs procAvgs
	var hostFigs sessionHostFigures
	var query string
	var backends []gpsemconv.BackendRef
	sms := rm.ScopeMetrics()
	for i := 0; i < sms.Len(); i++ {
		ms := sms.At(i).Metrics()
		for j := 0; j < ms.Len(); j++ {
			m := ms.At(j)
			if m.Name() == gpsemconv.MetricSessionInfo {
				query = fillSessionInfo(info, m.Metadata())
				backends = parseBackends(m.Metadata())
				if pts := numberPoints(m); pts.Len() > 0 {
					t = pts.At(0).Timestamp().AsTime().UTC()
				}
				continue
			}
			if avgs.add(m) || hostFigs.add(m, p) {
				continue
			}
			p.addFigure(&stats, m)
		}
	}
	state.ProcAvg = avgs.messages()
	if stats.lastFound {
		finishStat(&stats.last)
		state.LastMetrics = &yagpcc.GPMetrics{SystemStat: &stats.last}
	}
	if stats.totalFound {
		finishStat(&stats.total)
		stats.total.WindowSeconds = 0
		state.TotalMetrics = &yagpcc.GPMetrics{SystemStat: &stats.total}
	}
	running := isRunningState(info.State)
	if running {
		state.RunningQuery = &yagpcc.QueryKey{Tmid: int32(tmID), Ssid: int32(sessID)}
		state.RunningQueryInfo = &yagpcc.QueryInfo{
			QueryText:    query,
			UserName:     info.User,
			DatabaseName: info.Database,
			Rsgname:      info.Rsgname,
			StartTime:    info.QueryStart,
		}
	}
	return &session{
		key:      sessionKey{tmID: tmID, sessID: sessID},
		state:    state,
		system:   system,
		running:  running,
		backends: backends,
		hosts:    hostFigs.list(),
	}, t, stats.lastFound, true
}

// isRunningState: pg_stat_activity states in which the query column is the
// statement being executed right now, not the last one finished.
func isRunningState(state string) bool {
	return state == "active" || state == "fastpath function call"
}

func finishStat(st *yagpcc.SystemStat) {
	st.RunningTimeSeconds = st.UserTimeSeconds + st.KernelTimeSeconds
}

// addFigure folds one processor metric into the session's stats.
func (p *snapshotParser) addFigure(stats *sessionStats, m pmetric.Metric) {
	pts := numberPoints(m)
	for k := 0; k < pts.Len(); k++ {
		dp := pts.At(k)
		a := dp.Attributes()
		switch m.Name() {
		case gpsemconv.MetricSessionProcesses:
			n := uint32(min(pointUint(dp), math.MaxUint32))
			stats.last.Processes, stats.total.Processes = n, n
			continue
		case gpsemconv.MetricSessionHosts:
			n := uint32(min(pointUint(dp), math.MaxUint32))
			stats.last.Hosts, stats.total.Hosts = n, n
			continue
		case gpsemconv.MetricSessionCgroupPress:
			setPressure(&stats.last, a, pointFloat(dp))
			setPressure(&stats.total, a, pointFloat(dp))
			continue
		case gpsemconv.MetricSessionMemoryUsage:
			// Memory is a gauge of the newest snapshot: the same in both stats.
			setMemory(&stats.last, a, pointUint(dp))
			setMemory(&stats.total, a, pointUint(dp))
			continue
		}
		if st := stats.target(p.windowOf(a)); st != nil {
			setSystemStat(st, m.Name(), a, dp)
		}
	}
}

// setSystemStat folds one point of a session figure (or of a query figure
// under its session name) into st.
func setSystemStat(st *yagpcc.SystemStat, name string, a pcommon.Map, dp pmetric.NumberDataPoint) {
	switch name {
	case gpsemconv.MetricSessionCPUTime:
		switch strAttr(a, gpsemconv.AttrCPUMode) {
		case gpsemconv.CPUModeUser:
			st.UserTimeSeconds = pointFloat(dp)
		case gpsemconv.CPUModeSys:
			st.KernelTimeSeconds = pointFloat(dp)
		}
	case gpsemconv.MetricSessionDiskIO:
		setDirection(a, pointUint(dp), &st.ReadBytes, &st.WriteBytes)
	case gpsemconv.MetricSessionIOChars:
		setDirection(a, pointUint(dp), &st.Rchar, &st.Wchar)
	case gpsemconv.MetricSessionIOSyscalls:
		setDirection(a, pointUint(dp), &st.Syscr, &st.Syscw)
	case gpsemconv.MetricSessionCancelledWrite:
		st.CancelledWriteBytes = pointUint(dp)
	case gpsemconv.MetricSessionDiskDelay:
		st.BlkioDelaySeconds = pointFloat(dp)
	case gpsemconv.MetricSessionRunDelay:
		st.RunDelaySeconds = pointFloat(dp)
	case gpsemconv.MetricSessionDelay:
		switch strAttr(a, gpsemconv.AttrDelayType) {
		case gpsemconv.DelaySwapin:
			st.SwapinDelaySeconds = pointFloat(dp)
		case gpsemconv.DelayFreepages:
			st.FreepagesDelaySeconds = pointFloat(dp)
		case gpsemconv.DelayThrashing:
			st.ThrashingDelaySeconds = pointFloat(dp)
		case gpsemconv.DelayCompact:
			st.CompactDelaySeconds = pointFloat(dp)
		case gpsemconv.DelayWpcopy:
			st.WpcopyDelaySeconds = pointFloat(dp)
		case gpsemconv.DelayIRQ:
			st.IrqDelaySeconds = pointFloat(dp)
		}
	case gpsemconv.MetricSessionPagingFaults:
		switch strAttr(a, gpsemconv.AttrFaultType) {
		case gpsemconv.FaultTypeMajor:
			st.MajorFaults = pointUint(dp)
		case gpsemconv.FaultTypeMinor:
			st.MinorFaults = pointUint(dp)
		}
	case gpsemconv.MetricSessionContextSwitches:
		switch strAttr(a, gpsemconv.AttrContextSwitchType) {
		case gpsemconv.ContextSwitchVol:
			st.VoluntaryCtxtSwitches = pointUint(dp)
		case gpsemconv.ContextSwitchInvol:
			st.NonvoluntaryCtxtSwitches = pointUint(dp)
		}
	case gpsemconv.MetricSessionWindowSpan:
		st.WindowSeconds = pointFloat(dp)
	case gpsemconv.MetricSessionPartial:
		st.Partial = pointFloat(dp) != 0
	case gpsemconv.MetricSessionSkewRatio, gpsemconv.MetricSessionSkewMaxOverAvg,
		gpsemconv.MetricSessionSkewHottestSegment, gpsemconv.MetricSessionSkewSegments:
		setSkew(st, name, a, dp)
	}
}

func setDirection(a pcommon.Map, v uint64, read, write *uint64) {
	switch strAttr(a, gpsemconv.AttrDirection) {
	case gpsemconv.DirectionRead:
		*read = v
	case gpsemconv.DirectionWrite:
		*write = v
	}
}

func setMemory(st *yagpcc.SystemStat, a pcommon.Map, v uint64) {
	maxHost := strAttr(a, gpsemconv.AttrMemoryAggregation) == gpsemconv.MemoryAggregationMaxHost
	switch strAttr(a, gpsemconv.AttrMemoryType) {
	case gpsemconv.MemoryTypeRSS:
		if maxHost {
			st.RssMaxHost = v
		} else {
			st.Rss = v
		}
	case gpsemconv.MemoryTypeRSSAnon:
		if maxHost {
			st.RssAnonMaxHost = v
		} else {
			st.RssAnon = v
		}
	case gpsemconv.MemoryTypeRSSShared:
		if !maxHost {
			st.RssShared = v
		}
	case gpsemconv.MemoryTypeVirtual:
		if !maxHost {
			st.Vsize = v
		}
	case gpsemconv.MemoryTypeVirtualPeak:
		if !maxHost {
			st.VmPeakKb = v / 1024
		}
	}
}

// parseBackends reads the session's process list; an element that does
// not parse is left out (the receiver writes them, so none should).
func parseBackends(meta pcommon.Map) []gpsemconv.BackendRef {
	v, ok := meta.Get(gpsemconv.MetaBackends)
	if !ok || v.Type() != pcommon.ValueTypeSlice {
		return nil
	}
	sl := v.Slice()
	out := make([]gpsemconv.BackendRef, 0, sl.Len())
	for i := 0; i < sl.Len(); i++ {
		if ref, err := gpsemconv.ParseBackendRef(sl.At(i).AsString()); err == nil {
			out = append(out, ref)
		}
	}
	return out
}

// fillSessionInfo copies the volatile pg_stat_activity columns and returns
// the query text.
func fillSessionInfo(info *yagpcc.SessionInfo, meta pcommon.Map) string {
	info.ApplicationName = strAttr(meta, gpsemconv.MetaApplicationName)
	info.ClientAddr = strAttr(meta, gpsemconv.MetaClientAddr)
	info.ClientHostname = strAttr(meta, gpsemconv.MetaClientHostname)
	info.ClientPort, _ = intAttr(meta, gpsemconv.MetaClientPort)
	info.BackendStart = timeAttr(meta, gpsemconv.MetaBackendStart)
	info.XactStart = timeAttr(meta, gpsemconv.MetaXactStart)
	info.QueryStart = timeAttr(meta, gpsemconv.MetaQueryStart)
	info.StateChange = timeAttr(meta, gpsemconv.MetaStateChange)
	info.State = strAttr(meta, gpsemconv.MetaState)
	info.Waiting = boolAttr(meta, gpsemconv.MetaWaiting)
	info.WaitingReason = strAttr(meta, gpsemconv.MetaWaitingReason)
	info.WaitEventType = strAttr(meta, gpsemconv.MetaWaitEventType)
	info.WaitEvent = strAttr(meta, gpsemconv.MetaWaitEvent)
	info.BackendType = strAttr(meta, gpsemconv.MetaBackendType)
	info.BackendXid = strAttr(meta, gpsemconv.MetaBackendXID)
	info.BackendXmin = strAttr(meta, gpsemconv.MetaBackendXmin)
	info.Rsgid, _ = intAttr(meta, gpsemconv.MetaRsgID)
	info.Rsgname = strAttr(meta, gpsemconv.MetaRsgName)
	info.Rsgqueueduration = strAttr(meta, gpsemconv.MetaRsgQueueDuration)
	return strAttr(meta, gpsemconv.MetaQuery)
}

func strAttr(m pcommon.Map, key string) string {
	if v, ok := m.Get(key); ok {
		return v.AsString()
	}
	return ""
}

// intAttr also reads an integer written as a string or a double.
func intAttr(m pcommon.Map, key string) (int64, bool) {
	v, ok := m.Get(key)
	if !ok {
		return 0, false
	}
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int(), true
	case pcommon.ValueTypeDouble:
		d := v.Double()
		if d != math.Trunc(d) || math.Abs(d) > 1<<53 {
			return 0, false
		}
		return int64(d), true
	case pcommon.ValueTypeStr:
		n, err := strconv.ParseInt(v.Str(), 10, 64)
		return n, err == nil
	}
	return 0, false
}

func boolAttr(m pcommon.Map, key string) bool {
	v, ok := m.Get(key)
	if !ok {
		return false
	}
	if v.Type() == pcommon.ValueTypeBool {
		return v.Bool()
	}
	b, _ := strconv.ParseBool(v.AsString())
	return b
}

// timeAttr reads an RFC 3339 timestamp; absent or unparsable stays unset.
func timeAttr(m pcommon.Map, key string) *timestamppb.Timestamp {
	s := strAttr(m, key)
	if s == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil
	}
	return timestamppb.New(t)
}

func varintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
