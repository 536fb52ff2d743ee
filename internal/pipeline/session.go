// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// SessionState is the volatile pg_stat_activity state of a session that
// travels in gpotel.session.info's Metric.Metadata() (docs/pipeline.md,
// session resource), never in an identity.
type SessionState struct {
	ApplicationName, ClientAddr, ClientHostname Null[string]
	ClientPort                                  Null[int64]
	BackendStart, XactStart                     Null[time.Time]
	QueryStart, StateChange                     Null[time.Time]
	State                                       Null[string]
	Waiting                                     Null[bool]
	WaitingReason, WaitEventType, WaitEvent     Null[string]
	BackendType, BackendXID, BackendXmin        Null[string]
	RsgID                                       Null[int64]
	RsgName, RsgQueueDuration                   Null[string]
	// Query is cut to the receiver's query_max_length; QueryTruncated says
	// whether it was. Both are written only with a query.
	Query          Null[string]
	QueryTruncated bool
	// Backends are the session's processes the receiver asked a host about
	// in this scrape, answered or not.
	Backends []BackendRef
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
func (s *SessionState) columns(text func(string, Null[string]) Null[string], num func(string, Null[int64]) Null[int64],
	at func(string, Null[time.Time]) Null[time.Time], flag func(string, Null[bool]) Null[bool]) {
	s.ApplicationName = text(MetaApplicationName, s.ApplicationName)
	s.ClientAddr = text(MetaClientAddr, s.ClientAddr)
	s.ClientHostname = text(MetaClientHostname, s.ClientHostname)
	s.ClientPort = num(MetaClientPort, s.ClientPort)
	s.BackendStart = at(MetaBackendStart, s.BackendStart)
	s.XactStart = at(MetaXactStart, s.XactStart)
	s.QueryStart = at(MetaQueryStart, s.QueryStart)
	s.StateChange = at(MetaStateChange, s.StateChange)
	s.State = text(MetaState, s.State)
	s.Waiting = flag(MetaWaiting, s.Waiting)
	s.WaitingReason = text(MetaWaitingReason, s.WaitingReason)
	s.WaitEventType = text(MetaWaitEventType, s.WaitEventType)
	s.WaitEvent = text(MetaWaitEvent, s.WaitEvent)
	s.BackendType = text(MetaBackendType, s.BackendType)
	s.BackendXID = text(MetaBackendXID, s.BackendXID)
	s.BackendXmin = text(MetaBackendXmin, s.BackendXmin)
	s.RsgID = num(MetaRsgID, s.RsgID)
	s.RsgName = text(MetaRsgName, s.RsgName)
	s.RsgQueueDuration = text(MetaRsgQueueDuration, s.RsgQueueDuration)
}

// put writes the state into a gpotel.session.info Metadata map.
func (s *SessionState) put(m pcommon.Map) {
	written := *s // columns stores what it passes through; the caller's state stays untouched
	written.columns(func(k string, v Null[string]) Null[string] {
		if v.Valid {
			m.PutStr(k, v.V)
		}
		return v
	}, func(k string, v Null[int64]) Null[int64] {
		if v.Valid {
			m.PutInt(k, v.V)
		}
		return v
	}, func(k string, v Null[time.Time]) Null[time.Time] {
		if v.Valid {
			m.PutStr(k, v.V.UTC().Format(time.RFC3339Nano))
		}
		return v
	}, func(k string, v Null[bool]) Null[bool] {
		if v.Valid {
			m.PutBool(k, v.V)
		}
		return v
	})
	if s.Query.Valid {
		m.PutStr(MetaQuery, s.Query.V)
		m.PutBool(MetaQueryTruncated, s.QueryTruncated)
	}
	if len(s.Backends) > 0 {
		sl := m.PutEmptySlice(MetaBackends)
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
	s.columns(func(k string, _ Null[string]) Null[string] { return StrOf(m, k) },
		func(k string, _ Null[int64]) Null[int64] { return IntOf(m, k) },
		func(k string, _ Null[time.Time]) Null[time.Time] { return TimeOf(m, k) },
		func(k string, _ Null[bool]) Null[bool] { return BoolOf(m, k) })
	s.Query = StrOf(m, MetaQuery)
	s.QueryTruncated = BoolOf(m, MetaQueryTruncated).V
	if v, ok := m.Get(MetaBackends); ok && v.Type() == pcommon.ValueTypeSlice {
		sl := v.Slice()
		s.Backends = make([]BackendRef, 0, sl.Len())
		for i := range sl.Len() {
			if ref, err := ParseBackendRef(sl.At(i).AsString()); err == nil {
				s.Backends = append(s.Backends, ref)
			}
		}
	}
	return s
}
