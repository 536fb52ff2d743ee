// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshot

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// SessionState is the volatile pg_stat_activity state of a session that
// travels in gpotel.session.info's Metric.Metadata() (docs/pipeline.md,
// session resource), never in an identity.
type SessionState struct {
	ApplicationName, ClientAddr, ClientHostname pipeline.Null[string]
	ClientPort                                  pipeline.Null[int64]
	BackendStart, XactStart                     pipeline.Null[time.Time]
	QueryStart, StateChange                     pipeline.Null[time.Time]
	State                                       pipeline.Null[string]
	Waiting                                     pipeline.Null[bool]
	WaitingReason, WaitEventType, WaitEvent     pipeline.Null[string]
	BackendType, BackendXID, BackendXmin        pipeline.Null[string]
	RsgID                                       pipeline.Null[int64]
	RsgName, RsgQueueDuration                   pipeline.Null[string]
	// Query is cut to the receiver's query_max_length; QueryTruncated says
	// whether it was. Both are written only with a query.
	Query          pipeline.Null[string]
	QueryTruncated bool
	// Backends are the session's processes the receiver asked a host about
	// in this scrape, answered or not.
	Backends []pipeline.BackendRef
}

// Running tells the states in which the query named is the statement
// being executed right now, not the last one finished.
func (s *SessionState) Running() bool {
	return s.State.Valid && (s.State.V == "active" || s.State.V == "fastpath function call")
}

// columns passes every nullable pg_stat_activity column, with its Metadata
// key in the order written, through the function of its type and keeps
// what it returns: the one list put and read share. (Values, not
// pointers: a pointer into the state handed to a func value would move
// every state read to the heap.)
func (s *SessionState) columns(text func(string, pipeline.Null[string]) pipeline.Null[string], num func(string, pipeline.Null[int64]) pipeline.Null[int64],
	at func(string, pipeline.Null[time.Time]) pipeline.Null[time.Time], flag func(string, pipeline.Null[bool]) pipeline.Null[bool]) {
	s.ApplicationName = text(pipeline.MetaApplicationName, s.ApplicationName)
	s.ClientAddr = text(pipeline.MetaClientAddr, s.ClientAddr)
	s.ClientHostname = text(pipeline.MetaClientHostname, s.ClientHostname)
	s.ClientPort = num(pipeline.MetaClientPort, s.ClientPort)
	s.BackendStart = at(pipeline.MetaBackendStart, s.BackendStart)
	s.XactStart = at(pipeline.MetaXactStart, s.XactStart)
	s.QueryStart = at(pipeline.MetaQueryStart, s.QueryStart)
	s.StateChange = at(pipeline.MetaStateChange, s.StateChange)
	s.State = text(pipeline.MetaState, s.State)
	s.Waiting = flag(pipeline.MetaWaiting, s.Waiting)
	s.WaitingReason = text(pipeline.MetaWaitingReason, s.WaitingReason)
	s.WaitEventType = text(pipeline.MetaWaitEventType, s.WaitEventType)
	s.WaitEvent = text(pipeline.MetaWaitEvent, s.WaitEvent)
	s.BackendType = text(pipeline.MetaBackendType, s.BackendType)
	s.BackendXID = text(pipeline.MetaBackendXID, s.BackendXID)
	s.BackendXmin = text(pipeline.MetaBackendXmin, s.BackendXmin)
	s.RsgID = num(pipeline.MetaRsgID, s.RsgID)
	s.RsgName = text(pipeline.MetaRsgName, s.RsgName)
	s.RsgQueueDuration = text(pipeline.MetaRsgQueueDuration, s.RsgQueueDuration)
}

// put writes the state into a gpotel.session.info Metadata map.
func (s *SessionState) put(m pcommon.Map) {
	written := *s // columns stores what it passes through; the caller's state stays untouched
	written.columns(func(k string, v pipeline.Null[string]) pipeline.Null[string] {
		if v.Valid {
			m.PutStr(k, v.V)
		}
		return v
	}, func(k string, v pipeline.Null[int64]) pipeline.Null[int64] {
		if v.Valid {
			m.PutInt(k, v.V)
		}
		return v
	}, func(k string, v pipeline.Null[time.Time]) pipeline.Null[time.Time] {
		if v.Valid {
			m.PutStr(k, v.V.UTC().Format(time.RFC3339Nano))
		}
		return v
	}, func(k string, v pipeline.Null[bool]) pipeline.Null[bool] {
		if v.Valid {
			m.PutBool(k, v.V)
		}
		return v
	})
	if s.Query.Valid {
		m.PutStr(pipeline.MetaQuery, s.Query.V)
		m.PutBool(pipeline.MetaQueryTruncated, s.QueryTruncated)
	}
	if len(s.Backends) > 0 {
		sl := m.PutEmptySlice(pipeline.MetaBackends)
		sl.EnsureCapacity(len(s.Backends))
		for _, b := range s.Backends {
			sl.AppendEmpty().SetStr(b.String())
		}
	}
}

// readSessionState reads a Metadata map leniently: a value of another type
// than written is read as text (or as a number, when it is one); a time
// that does not parse, and a backend that is not host/segment/pid, are
// left out.
func readSessionState(m pcommon.Map) SessionState {
	var s SessionState
	s.columns(func(k string, _ pipeline.Null[string]) pipeline.Null[string] { return pipeline.StrOf(m, k) },
		func(k string, _ pipeline.Null[int64]) pipeline.Null[int64] { return pipeline.IntOf(m, k) },
		func(k string, _ pipeline.Null[time.Time]) pipeline.Null[time.Time] { return pipeline.TimeOf(m, k) },
		func(k string, _ pipeline.Null[bool]) pipeline.Null[bool] { return pipeline.BoolOf(m, k) })
	s.Query = pipeline.StrOf(m, pipeline.MetaQuery)
	s.QueryTruncated = pipeline.BoolOf(m, pipeline.MetaQueryTruncated).V
	if v, ok := m.Get(pipeline.MetaBackends); ok && v.Type() == pcommon.ValueTypeSlice {
		sl := v.Slice()
		s.Backends = make([]pipeline.BackendRef, 0, sl.Len())
		for i := range sl.Len() {
			if ref, err := pipeline.ParseBackendRef(sl.At(i).AsString()); err == nil {
				s.Backends = append(s.Backends, ref)
			}
		}
	}
	return s
}
