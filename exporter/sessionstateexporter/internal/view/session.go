// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package view

import (
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/output"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// Session is one session's state as of the last snapshot that held it.
// It is immutable once stored: readers share it without locks.
type Session struct {
	Key    pipeline.SessionKey
	State  *yagpcc.SessionState
	System bool
	// Own: one of the collector's own monitoring connections (gpotel.session.own).
	Own bool
	// Running: the session is executing the statement in its query text.
	Running bool
	// Seen is the time of the newest snapshot that held the session.
	Seen time.Time
	// EncodedSize is the session's share of a list response on the wire.
	EncodedSize int
	// Backends are the session's processes on every host (gpotel.session.info "backends").
	Backends []pipeline.BackendRef
	// Query is the running query's record, when the processor writes query figures.
	Query *QueryRecord
	// Hosts is its per-host breakdown over the last_metrics window, when the processor emits one.
	Hosts []*gpotelv1.SessionHostUsage
	// Greenplum is the server's own figures of the session (spill, lock
	// wait, vmem); nil without them.
	Greenplum *snapshot.GreenplumSession
}

// readSession builds one session from its resource. ok is false when the
// resource lacks its identity (gpotel.session.id, gpotel.tm_id).
func (p *Decoder) readSession(rm pmetric.ResourceMetrics) (s *Session, t time.Time, lastFound, ok bool) {
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
	spill := SpillInfo(gp.SpillTotal())
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
	return &Session{
		Key:       h.Key,
		State:     state,
		System:    h.System,
		Own:       h.Own,
		Running:   running,
		Backends:  st.Backends,
		Hosts:     figs.Hosts,
		Greenplum: gp,
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

// SpillInfo is yagpcc's SpillInfo of workfile bytes and files; nil when
// none are held.
func SpillInfo(bytes, files int64) *yagpcc.SpillInfo {
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
