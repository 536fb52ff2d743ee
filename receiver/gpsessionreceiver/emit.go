package gpsessionreceiver

import (
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"

	"github.com/gpotel/gpotel/internal/gpsemconv"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadata"
)

// snapshot is what the batch that closes a scrape's snapshot says: the
// snapshot resource with each host's answer, and the sessions.
type snapshot struct {
	time            time.Time
	dialect         string
	tmID            int64
	coordinatorHost string
	sessions        []SessionRow // the session heads to emit
	queries         []hostQuery  // what each host was asked
	results         []hostResult // in the order of queries
	queryMaxLength  int
	resourceGroups  map[uint32]string // resource group oid -> name
}

// emitStats counts what the emission kept and dropped.
type emitStats struct {
	processes     int // processes written into process resources
	withoutStat   int // answered without /proc/<pid>/stat: no creation time, so no identity
	answeredHosts int
	failedHosts   int
}

// snapshotEmitter writes snapshots as pdata. The snapshot and session
// resources, a few per scrape, go through mdatagen's MetricsBuilder; process
// resources, written per agent answer as it arrives, are written straight
// into pdata by a processWriter, which honours the same metrics and
// resource_attributes switches.
type snapshotEmitter struct {
	mu      sync.Mutex // the MetricsBuilder is not safe for concurrent use
	mb      *metadata.MetricsBuilder
	procs   *processWriter
	scratch sync.Pool // *answerScratch, reused across answers and scrapes
}

func newSnapshotEmitter(mbc metadata.MetricsBuilderConfig, settings receiver.Settings, opts ...metadata.MetricBuilderOption) (*snapshotEmitter, error) {
	procs, err := newProcessWriter(mbc, settings)
	if err != nil {
		return nil, err
	}
	e := &snapshotEmitter{mb: metadata.NewMetricsBuilder(mbc, settings, opts...), procs: procs}
	e.scratch.New = func() any { return &answerScratch{} }
	return e, nil
}

// emitAnswer writes one agent answer as a batch of process resources; it
// may run on many goroutines at once.
func (e *snapshotEmitter) emitAnswer(a *answerWrite) (md pmetric.Metrics, written, withoutStat int) {
	md = pmetric.NewMetrics()
	sc := e.scratch.Get().(*answerScratch)
	written, withoutStat = e.procs.writeAnswer(md.ResourceMetrics(), sc, a)
	clear(sc.procs[:cap(sc.procs)]) // drop the backend pointers until the next answer
	e.scratch.Put(sc)
	return md, written, withoutStat
}

// emitSnapshot writes the batch that closes a snapshot: the snapshot
// resource and one resource per session, every data point at s.time.
func (e *snapshotEmitter) emitSnapshot(s *snapshot) (pmetric.Metrics, emitStats) {
	e.mu.Lock()
	defer e.mu.Unlock()
	md, st := emitSnapshotAndSessions(e.mb, s)
	for i := range s.results {
		st.processes += s.results[i].written
		st.withoutStat += s.results[i].withoutStat
	}
	return md, st
}

// emitSnapshotAndSessions writes, through the MetricsBuilder, the snapshot
// resource with each host's up and processes points, and one resource per
// session with its state attached.
func emitSnapshotAndSessions(mb *metadata.MetricsBuilder, s *snapshot) (pmetric.Metrics, emitStats) {
	var st emitStats
	ts := pcommon.NewTimestampFromTime(s.time)
	rb := mb.NewResourceBuilder()

	for i, r := range s.results {
		up := int64(0)
		if r.up {
			up = 1
			st.answeredHosts++
		} else {
			st.failedHosts++
		}
		mb.RecordGpotelHostUpDataPoint(ts, up, r.host)
		mb.RecordGpotelHostProcessesDataPoint(ts, int64(len(s.queries[i].procs)), r.host)
	}
	rb.SetGpotelResourceKindSnapshot()
	rb.SetGpotelTmID(s.tmID)
	rb.SetGpotelDialect(s.dialect)
	rb.SetHostName(s.coordinatorHost)
	mb.EmitForResource(metadata.WithResource(rb.Emit()))
	emitHostsAndCgroups(mb, ts, s)
	pressure := sessionPressureOf(s)

	for _, row := range s.sessions {
		rb.SetGpotelResourceKindSession()
		rb.SetGpotelTmID(s.tmID)
		rb.SetGpotelSessionID(row.SessionID)
		rb.SetGpotelSessionPid(row.PID)
		rb.SetGpotelSessionSystem(isSystemSession(row))
		if row.Datname != nil {
			rb.SetDbNamespace(*row.Datname)
		}
		if row.Usename != nil {
			rb.SetGpotelSessionUser(*row.Usename)
		}
		rb.SetHostName(s.coordinatorHost)
		mb.RecordGpotelSessionInfoDataPoint(ts, 1)
		recordSessionCgroupPressure(mb, ts, pressure, row.SessionID)
		mb.EmitForResource(metadata.WithResource(rb.Emit()))
	}
	md := mb.Emit()
	attachSessionState(md, s.sessions, s.queryMaxLength)
	return md, st
}

// attachSessionState fills gpotel.session.info's Metadata() on each session
// resource with that session's volatile pg_stat_activity state.
func attachSessionState(md pmetric.Metrics, sessions []SessionRow, queryMax int) {
	bySession := make(map[int64]*SessionRow, len(sessions))
	for i := range sessions {
		bySession[sessions[i].SessionID] = &sessions[i]
	}
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		attrs := rm.Resource().Attributes()
		if kind, ok := attrs.Get(gpsemconv.AttrResourceKind); !ok || kind.Str() != gpsemconv.KindSession {
			continue
		}
		id, ok := attrs.Get(gpsemconv.AttrSessionID)
		if !ok {
			continue
		}
		row := bySession[id.Int()]
		if row == nil {
			continue
		}
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				if m := ms.At(k); m.Name() == gpsemconv.MetricSessionInfo {
					fillSessionState(m.Metadata(), row, queryMax)
				}
			}
		}
	}
}

func fillSessionState(m pcommon.Map, r *SessionRow, queryMax int) {
	putStr := func(k string, v *string) {
		if v != nil {
			m.PutStr(k, *v)
		}
	}
	putTime := func(k string, v *time.Time) {
		if v != nil {
			m.PutStr(k, v.UTC().Format(time.RFC3339Nano))
		}
	}
	putInt := func(k string, v *int64) {
		if v != nil {
			m.PutInt(k, *v)
		}
	}
	putStr(gpsemconv.MetaApplicationName, r.ApplicationName)
	putStr(gpsemconv.MetaClientAddr, r.ClientAddr)
	putStr(gpsemconv.MetaClientHostname, r.ClientHostname)
	putInt(gpsemconv.MetaClientPort, r.ClientPort)
	putTime(gpsemconv.MetaBackendStart, r.BackendStart)
	putTime(gpsemconv.MetaXactStart, r.XactStart)
	putTime(gpsemconv.MetaQueryStart, r.QueryStart)
	putTime(gpsemconv.MetaStateChange, r.StateChange)
	putStr(gpsemconv.MetaState, r.State)
	if r.Waiting != nil {
		m.PutBool(gpsemconv.MetaWaiting, *r.Waiting)
	}
	putStr(gpsemconv.MetaWaitingReason, r.WaitingReason)
	putStr(gpsemconv.MetaWaitEventType, r.WaitEventType)
	putStr(gpsemconv.MetaWaitEvent, r.WaitEvent)
	putStr(gpsemconv.MetaBackendType, r.BackendType)
	putStr(gpsemconv.MetaBackendXID, r.BackendXID)
	putStr(gpsemconv.MetaBackendXmin, r.BackendXmin)
	putInt(gpsemconv.MetaRsgID, r.RsgID)
	putStr(gpsemconv.MetaRsgName, r.RsgName)
	putStr(gpsemconv.MetaRsgQueueDuration, r.RsgQueueDuration)
	if r.Query != nil && queryMax > 0 {
		q, cut := truncateUTF8(*r.Query, queryMax)
		m.PutStr(gpsemconv.MetaQuery, q)
		m.PutBool(gpsemconv.MetaQueryTruncated, cut)
	}
}

// truncateUTF8 cuts s to at most limit bytes without splitting a character.
func truncateUTF8(s string, limit int) (string, bool) {
	if len(s) <= limit {
		return s, false
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], true
}
