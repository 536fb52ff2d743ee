// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/output"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// session is one session's state as of the last snapshot that held it.
// It is immutable once built: readers share it without locks.
type session struct {
	key    pipeline.SessionKey
	state  *yagpcc.SessionState
	system bool
	// own: one of the collector's own monitoring connections (gpotel.session.own).
	own bool
	// running: the session is executing the statement in its query text.
	running bool
	// seen is the time of the newest snapshot that held the session.
	seen time.Time
	// encodedSize is the session's share of a list response on the wire.
	encodedSize int
	// backends are the session's processes on every host (gpotel.session.info "backends").
	backends []pipeline.BackendRef
	// query is the running query's record, when the processor writes query figures.
	query *queryRecord
	// hosts is its per-host breakdown over the last_metrics window, when the processor emits one.
	hosts []*gpotelv1.SessionHostUsage
	// greenplum is the server's own figures of the session (spill, lock
	// wait, vmem); nil without them.
	greenplum *snapshot.GreenplumSession
}

// processorOutput is what one ConsumeMetrics call delivered, as the
// exporter serves it.
type processorOutput struct {
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

// outputReader turns a decoded batch into the sessions the store serves:
// their time and the hostname they report.
type outputReader struct {
	hostOverride string
	fallbackHost string
}

func (p *outputReader) read(b *batch) processorOutput {
	out := processorOutput{sessions: b.sessions, hasSnapshot: len(b.snapshots) > 0, invalid: b.invalid,
		lastWindowMissing: b.lastWindowMissing, queries: b.queries}
	for _, h := range b.snapshots {
		out.host = h.Coordinator
		if h.Time != 0 {
			out.time = h.Time.AsTime().UTC()
		}
	}
	if out.time.IsZero() {
		out.time = b.sessionTime
	}
	if out.time.IsZero() {
		// Points without timestamps: the arrival time is the best we know.
		out.time = time.Now().UTC()
	}
	host := p.hostOverride
	if host == "" {
		host = out.host
	}
	out.queryByID = attachQueries(out.sessions, out.queries)
	ts := timestamppb.New(out.time)
	for _, s := range out.sessions {
		s.seen = out.time
		s.state.Time = ts
		if host != "" {
			s.state.Hostname = host
		} else if s.state.Hostname == "" {
			s.state.Hostname = p.fallbackHost
		}
		size := proto.Size(s.state)
		s.encodedSize = 1 + varintLen(uint64(size)) + size
	}
	return out
}

// readSession builds one session from its resource. ok is false when the
// resource lacks its identity (gpotel.session.id, gpotel.tm_id).
func (p *batchDecoder) readSession(rm pmetric.ResourceMetrics) (s *session, t time.Time, lastFound, ok bool) {
	h, st, at, hasInfo, ok := snapshot.DecodeSession(rm)
	if !ok {
		return nil, t, false, false
	}
	if hasInfo && at != 0 {
		t = at.AsTime().UTC()
	}
	info := sessionInfo(h, &st)
	gp := snapshot.DecodeGreenplum(rm)
	if w := gp.LockWait(); w != nil {
		info.BlockedBySessId, info.WaitMode, info.LockedItem, info.LockedMode = w.Blocker, w.Mode, w.Object, w.BlockerMode
	}
	state := &yagpcc.SessionState{
		ClusterId:   p.clusterID,
		Hostname:    h.Host,
		SessionKey:  &yagpcc.SessionKey{SessId: h.Key.ID, TmId: h.Key.TmID},
		SessionInfo: info,
	}
	figs := output.DecodeSessionFigures(rm, &p.windows)
	state.ProcAvg = figs.ProcAvg
	// Workfiles are a gauge: the bytes and files held now stand in both.
	spill := spillInfo(gp.SpillTotal())
	if figs.Last != nil {
		state.LastMetrics = &yagpcc.GPMetrics{SystemStat: figs.Last, Spill: spill}
	}
	if figs.Total != nil {
		state.TotalMetrics = &yagpcc.GPMetrics{SystemStat: figs.Total, Spill: spill}
	}
	running := st.Running()
	if running {
		state.RunningQuery = &yagpcc.QueryKey{Tmid: int32(h.Key.TmID), Ssid: int32(h.Key.ID)} // #nosec G115 -- yagpcc's field widths
		state.RunningQueryInfo = &yagpcc.QueryInfo{
			QueryText:    st.Query.V,
			UserName:     info.User,
			DatabaseName: info.Database,
			Rsgname:      info.Rsgname,
			StartTime:    info.QueryStart,
		}
	}
	return &session{
		key:       h.Key,
		state:     state,
		system:    h.System,
		own:       h.Own,
		running:   running,
		backends:  st.Backends,
		hosts:     figs.Hosts,
		greenplum: gp,
	}, t, figs.Last != nil, true
}

// sessionInfo is yagpcc's SessionInfo of a session resource.
func sessionInfo(h snapshot.SessionHeader, st *snapshot.SessionState) *yagpcc.SessionInfo {
	return &yagpcc.SessionInfo{
		Pid:              h.PID,
		Database:         h.Database,
		User:             h.User,
		System:           h.System,
		ApplicationName:  st.ApplicationName.V,
		ClientAddr:       st.ClientAddr.V,
		ClientHostname:   st.ClientHostname.V,
		ClientPort:       st.ClientPort.V,
		BackendStart:     timestamp(st.BackendStart),
		XactStart:        timestamp(st.XactStart),
		QueryStart:       timestamp(st.QueryStart),
		StateChange:      timestamp(st.StateChange),
		State:            st.State.V,
		Waiting:          st.Waiting.V,
		WaitingReason:    st.WaitingReason.V,
		WaitEventType:    st.WaitEventType.V,
		WaitEvent:        st.WaitEvent.V,
		BackendType:      st.BackendType.V,
		BackendXid:       st.BackendXID.V,
		BackendXmin:      st.BackendXmin.V,
		Rsgid:            st.RsgID.V,
		Rsgname:          st.RsgName.V,
		Rsgqueueduration: st.RsgQueueDuration.V,
	}
}

// spillInfo is yagpcc's SpillInfo of workfile bytes and files; nil when
// none are held.
func spillInfo(bytes, files int64) *yagpcc.SpillInfo {
	if bytes == 0 && files == 0 {
		return nil
	}
	return &yagpcc.SpillInfo{TotalBytes: bytes, FileCount: int32(min(files, math.MaxInt32))} // #nosec G115 -- capped
}

func timestamp(t pipeline.Null[time.Time]) *timestamppb.Timestamp {
	if !t.Valid {
		return nil
	}
	return timestamppb.New(t.V)
}

func varintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
