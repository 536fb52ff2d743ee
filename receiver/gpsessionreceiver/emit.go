package gpsessionreceiver

import (
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

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

// emitSnapshot writes one snapshot: the snapshot resource, one resource per
// session, one per answered process, every data point at s.time. Process
// resources are written by all the builders at once, each taking a
// contiguous stretch, and joined in order; mbs[0] also writes the rest.
func emitSnapshot(mbs []*metadata.MetricsBuilder, s *snapshot) (pmetric.Metrics, emitStats) {
	var st emitStats
	ts := pcommon.NewTimestampFromTime(s.time)
	mb := mbs[0]
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
	attachSessionState(md, s.sessions, s.queryMaxLength)

	stretches := splitProcesses(s.results, len(mbs))
	parts := make([]pmetric.Metrics, len(stretches))
	counts := make([]emitStats, len(stretches))
	byPID := make([]map[int64]*Backend, len(s.results))
	for i := range s.results {
		byPID[i] = make(map[int64]*Backend, len(s.queries[i].procs))
		for j := range s.queries[i].procs {
			byPID[i][s.queries[i].procs[j].PID] = &s.queries[i].procs[j]
		}
	}
	var wg sync.WaitGroup
	for w, stretch := range stretches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, span := range stretch {
				emitProcesses(mbs[w], ts, s.tmID, &s.results[span.result], byPID[span.result], span.from, span.to, &counts[w])
			}
			parts[w] = mbs[w].Emit()
		}()
	}
	wg.Wait()
	for w := range parts {
		parts[w].ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
		st.processes += counts[w].processes
		st.withoutStat += counts[w].withoutStat
	}
	return md, st
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
func emitProcesses(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, tmID int64, r *hostResult, byPID map[int64]*Backend, from, to int, st *emitStats) {
	rb := mb.NewResourceBuilder()
	for _, info := range r.infos[from:to] {
		b := byPID[info.GetPid()] // checkAnswer let only asked pids through
		p := kernelunits.Convert(info, r.consts)
		if !p.HasStat {
			st.withoutStat++
			continue
		}
		recordProcess(mb, ts, &p)
		rb.SetGpotelResourceKindProcess()
		rb.SetGpotelTmID(tmID)
		rb.SetHostName(r.host)
		rb.SetGpotelSegmentID(b.SegmentID)
		rb.SetGpotelSessionID(b.SessionID)
		rb.SetProcessPid(b.PID)
		rb.SetProcessCreationTime(p.CreationTime.UTC().Format(CreationTimeLayout))
		if b.BackendType != "" {
			rb.SetGpotelBackendType(b.BackendType)
		}
		rb.SetGpotelProcessSystem(isSystemProcess(b.SessionID, b.BackendType))
		mb.EmitForResource(metadata.WithResource(rb.Emit()),
			metadata.WithStartTimeOverride(pcommon.NewTimestampFromTime(p.CreationTime)))
		st.processes++
	}
}

func recordProcess(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, p *kernelunits.Process) {
	if p.UserCPU.OK {
		mb.RecordProcessCPUTimeDataPoint(ts, p.UserCPU.V, metadata.AttributeCPUModeUser)
		mb.RecordProcessCPUTimeDataPoint(ts, p.SystemCPU.V, metadata.AttributeCPUModeSystem)
	}
	if p.BlkioDelay.OK {
		mb.RecordGpotelProcessDiskDelayDataPoint(ts, p.BlkioDelay.V)
	}
	if p.MajorFaults.OK {
		mb.RecordProcessPagingFaultsDataPoint(ts, p.MajorFaults.V, metadata.AttributeFaultTypeMajor)
		mb.RecordProcessPagingFaultsDataPoint(ts, p.MinorFaults.V, metadata.AttributeFaultTypeMinor)
	}
	if p.VirtualMemory.OK {
		mb.RecordProcessMemoryVirtualDataPoint(ts, p.VirtualMemory.V)
	}
	if v := p.MemoryUsage(); v.OK {
		mb.RecordProcessMemoryUsageDataPoint(ts, v.V)
	}
	if v := p.ThreadCount(); v.OK {
		mb.RecordProcessThreadCountDataPoint(ts, v.V)
	}
	if p.VoluntarySwitches.OK {
		mb.RecordProcessContextSwitchesDataPoint(ts, p.VoluntarySwitches.V, metadata.AttributeContextSwitchTypeVoluntary)
		mb.RecordProcessContextSwitchesDataPoint(ts, p.InvoluntarySwitches.V, metadata.AttributeContextSwitchTypeInvoluntary)
	}
	for _, m := range []struct {
		v   kernelunits.Value[int64]
		typ metadata.AttributeRssType
	}{{p.RSSAnon, metadata.AttributeRssTypeAnon}, {p.RSSFile, metadata.AttributeRssTypeFile}, {p.RSSShmem, metadata.AttributeRssTypeShmem}} {
		if m.v.OK {
			mb.RecordGpotelProcessMemoryRssDataPoint(ts, m.v.V, m.typ)
		}
	}
	if p.PeakRSS.OK {
		mb.RecordGpotelProcessMemoryPeakDataPoint(ts, p.PeakRSS.V)
	}
	if p.PeakVirtual.OK {
		mb.RecordGpotelProcessMemoryVirtualPeakDataPoint(ts, p.PeakVirtual.V)
	}
	if p.Swap.OK {
		mb.RecordGpotelProcessMemorySwapDataPoint(ts, p.Swap.V)
	}
	if p.HasIO {
		mb.RecordProcessDiskIoDataPoint(ts, p.ReadBytes.V, metadata.AttributeDirectionRead)
		mb.RecordProcessDiskIoDataPoint(ts, p.WriteBytes.V, metadata.AttributeDirectionWrite)
		mb.RecordGpotelProcessDiskCancelledWriteDataPoint(ts, p.CancelledWriteBytes.V)
		mb.RecordGpotelProcessIoCharsDataPoint(ts, p.ReadChars.V, metadata.AttributeDirectionRead)
		mb.RecordGpotelProcessIoCharsDataPoint(ts, p.WriteChars.V, metadata.AttributeDirectionWrite)
		mb.RecordGpotelProcessIoSyscallsDataPoint(ts, p.ReadSyscalls.V, metadata.AttributeDirectionRead)
		mb.RecordGpotelProcessIoSyscallsDataPoint(ts, p.WriteSyscalls.V, metadata.AttributeDirectionWrite)
	}
	if p.RunDelay.OK {
		mb.RecordGpotelProcessCPURunDelayDataPoint(ts, p.RunDelay.V)
	}
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
