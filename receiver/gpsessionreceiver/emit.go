package gpsessionreceiver

import (
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"

	"github.com/gpotel/gpotel/internal/gpsemconv"
	"github.com/gpotel/gpotel/internal/kernelunits"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadata"
)

// CreationTimeLayout is how process.creation.time is spelled: UTC, always
// nine fractional digits, so one process always gets the same string.
const CreationTimeLayout = "2006-01-02T15:04:05.000000000Z"

// snapshot is everything one scrape learnt, ready to be written as pdata.
type snapshot struct {
	time            time.Time
	dialect         string
	tmID            int64
	coordinatorHost string
	sessions        []SessionRow // the session heads to emit
	queries         []hostQuery  // what each host was asked
	results         []hostResult // in the order of queries
	queryMaxLength  int
}

// emitStats counts what the emission kept and dropped.
type emitStats struct {
	processes     int // process resources written
	withoutStat   int // answered without /proc/<pid>/stat: no creation time, so no identity
	answeredHosts int
	failedHosts   int
}

// snapshotEmitter writes snapshots as pdata. The snapshot and session
// resources, a few per scrape, go through mdatagen's MetricsBuilder; process
// resources, one per backend on every host, are written straight into pdata
// by a processWriter, which honours the same metrics/resource_attributes
// switches.
type snapshotEmitter struct {
	mb      *metadata.MetricsBuilder
	procs   *processWriter
	workers int // goroutines writing process resources at once
}

func newSnapshotEmitter(mbc metadata.MetricsBuilderConfig, settings receiver.Settings, workers int, opts ...metadata.MetricBuilderOption) (*snapshotEmitter, error) {
	procs, err := newProcessWriter(mbc, settings)
	if err != nil {
		return nil, err
	}
	return &snapshotEmitter{mb: metadata.NewMetricsBuilder(mbc, settings, opts...), procs: procs, workers: max(1, workers)}, nil
}

// emitSnapshot writes one snapshot: the snapshot resource, one resource per
// session, one per answered process, every data point at s.time. Process
// resources are written by all the workers at once, each taking a
// contiguous stretch, and joined in order.
func (e *snapshotEmitter) emitSnapshot(s *snapshot) (pmetric.Metrics, emitStats) {
	md, st := emitSnapshotAndSessions(e.mb, s)
	ts := pcommon.NewTimestampFromTime(s.time)

	stretches := splitProcesses(s.results, e.workers)
	parts := make([]pmetric.ResourceMetricsSlice, len(stretches))
	counts := make([]emitStats, len(stretches))
	byPID := backendsByPID(s)
	var wg sync.WaitGroup
	for w, stretch := range stretches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for _, span := range stretch {
				n += span.to - span.from
			}
			parts[w] = pmetric.NewResourceMetricsSlice()
			parts[w].EnsureCapacity(n)
			var pp processPoints
			for _, span := range stretch {
				e.emitProcesses(parts[w], &pp, ts, s.tmID, &s.results[span.result], byPID[span.result], span.from, span.to, &counts[w])
			}
		}()
	}
	wg.Wait()
	total := md.ResourceMetrics().Len()
	for w := range parts {
		total += parts[w].Len()
	}
	md.ResourceMetrics().EnsureCapacity(total)
	for w := range parts {
		parts[w].MoveAndAppendTo(md.ResourceMetrics())
		st.processes += counts[w].processes
		st.withoutStat += counts[w].withoutStat
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
		mb.EmitForResource(metadata.WithResource(rb.Emit()))
	}
	md := mb.Emit()
	attachSessionState(md, s.sessions, sessionBackends(s), s.queryMaxLength)
	return md, st
}

// sessionBackends lists, per session id, every process the receiver asked
// a host about in this scrape (docs/pipeline.md, gpotel.session.info "backends").
func sessionBackends(s *snapshot) map[int64][]string {
	out := map[int64][]string{}
	for _, q := range s.queries {
		for _, p := range q.procs {
			out[p.SessionID] = append(out[p.SessionID], gpsemconv.BackendRef{Host: q.host, SegmentID: p.SegmentID, PID: p.PID}.String())
		}
	}
	return out
}

// backendsByPID indexes, per host query, the asked backends by pid.
func backendsByPID(s *snapshot) []map[int64]*Backend {
	byPID := make([]map[int64]*Backend, len(s.results))
	for i := range s.results {
		byPID[i] = make(map[int64]*Backend, len(s.queries[i].procs))
		for j := range s.queries[i].procs {
			byPID[i][s.queries[i].procs[j].PID] = &s.queries[i].procs[j]
		}
	}
	return byPID
}

// infoSpan is infos[from:to] of one host's result.
type infoSpan struct{ result, from, to int }

// splitProcesses cuts every answered process, in order, into at most n
// stretches of nearly equal length.
func splitProcesses(results []hostResult, n int) [][]infoSpan {
	total := 0
	for i := range results {
		total += len(results[i].infos)
	}
	if total == 0 {
		return nil
	}
	per := (total + n - 1) / n
	var out [][]infoSpan
	var cur []infoSpan
	room := per
	for i := range results {
		for from := 0; from < len(results[i].infos); {
			to := min(len(results[i].infos), from+room)
			cur = append(cur, infoSpan{i, from, to})
			room -= to - from
			from = to
			if room == 0 {
				out = append(out, cur)
				cur, room = nil, per
			}
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// emitProcesses writes one process resource per answered process of r.infos[from:to].
func (e *snapshotEmitter) emitProcesses(rms pmetric.ResourceMetricsSlice, pp *processPoints, ts pcommon.Timestamp, tmID int64, r *hostResult, byPID map[int64]*Backend, from, to int, st *emitStats) {
	id := processIdentity{tmID: tmID, host: r.host}
	for _, info := range r.infos[from:to] {
		p := kernelunits.Convert(info, r.consts)
		if !p.HasStat {
			st.withoutStat++
			continue
		}
		id.backend = byPID[info.GetPid()] // checkAnswer let only asked pids through
		if e.procs.attrs.ProcessCreationTime.Enabled {
			id.creationTime = p.CreationTime.UTC().Format(CreationTimeLayout)
		}
		pp.collect(&p)
		e.procs.write(rms, pp, &id, pcommon.NewTimestampFromTime(p.CreationTime), ts)
		st.processes++
	}
}

// attachSessionState fills gpotel.session.info's Metadata() on each session
// resource with that session's volatile pg_stat_activity state.
func attachSessionState(md pmetric.Metrics, sessions []SessionRow, backends map[int64][]string, queryMax int) {
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
					if refs := backends[row.SessionID]; len(refs) > 0 {
						sl := m.Metadata().PutEmptySlice(gpsemconv.MetaBackends)
						sl.EnsureCapacity(len(refs))
						for _, r := range refs {
							sl.AppendEmpty().SetStr(r)
						}
					}
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
