// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"math"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// SessionState is the volatile pg_stat_activity state of a session that
// travels in gpotel.session.info's Metric.Metadata() (docs/pipeline.md,
// session resource), never in an identity. nil: the column was NULL.
type SessionState struct {
	ApplicationName, ClientAddr, ClientHostname *string
	ClientPort                                  *int64
	BackendStart, XactStart                     *time.Time
	QueryStart, StateChange                     *time.Time
	State                                       *string
	Waiting                                     *bool
	WaitingReason, WaitEventType, WaitEvent     *string
	BackendType, BackendXID, BackendXmin        *string
	RsgID                                       *int64
	RsgName, RsgQueueDuration                   *string
	// Query is cut to the receiver's query_max_length; QueryTruncated says
	// whether it was. Both are written only with a query.
	Query          *string
	QueryTruncated bool
	// Backends are the session's processes the receiver asked a host about
	// in this scrape, answered or not.
	Backends []BackendRef
}

// Running tells the states in which the query named is the statement
// being executed right now, not the last one finished.
func (s *SessionState) Running() bool {
	return s.State != nil && (*s.State == "active" || *s.State == "fastpath function call")
}

// put writes the state into a gpotel.session.info Metadata map.
func (s *SessionState) put(m pcommon.Map) {
	str := func(k string, v *string) {
		if v != nil {
			m.PutStr(k, *v)
		}
	}
	tm := func(k string, v *time.Time) {
		if v != nil {
			m.PutStr(k, v.UTC().Format(time.RFC3339Nano))
		}
	}
	num := func(k string, v *int64) {
		if v != nil {
			m.PutInt(k, *v)
		}
	}
	str(MetaApplicationName, s.ApplicationName)
	str(MetaClientAddr, s.ClientAddr)
	str(MetaClientHostname, s.ClientHostname)
	num(MetaClientPort, s.ClientPort)
	tm(MetaBackendStart, s.BackendStart)
	tm(MetaXactStart, s.XactStart)
	tm(MetaQueryStart, s.QueryStart)
	tm(MetaStateChange, s.StateChange)
	str(MetaState, s.State)
	if s.Waiting != nil {
		m.PutBool(MetaWaiting, *s.Waiting)
	}
	str(MetaWaitingReason, s.WaitingReason)
	str(MetaWaitEventType, s.WaitEventType)
	str(MetaWaitEvent, s.WaitEvent)
	str(MetaBackendType, s.BackendType)
	str(MetaBackendXID, s.BackendXID)
	str(MetaBackendXmin, s.BackendXmin)
	num(MetaRsgID, s.RsgID)
	str(MetaRsgName, s.RsgName)
	str(MetaRsgQueueDuration, s.RsgQueueDuration)
	if s.Query != nil {
		m.PutStr(MetaQuery, *s.Query)
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
	s.ApplicationName = attrStr(m, MetaApplicationName)
	s.ClientAddr = attrStr(m, MetaClientAddr)
	s.ClientHostname = attrStr(m, MetaClientHostname)
	s.ClientPort = attrInt(m, MetaClientPort)
	s.BackendStart = attrTime(m, MetaBackendStart)
	s.XactStart = attrTime(m, MetaXactStart)
	s.QueryStart = attrTime(m, MetaQueryStart)
	s.StateChange = attrTime(m, MetaStateChange)
	s.State = attrStr(m, MetaState)
	s.Waiting = attrBool(m, MetaWaiting)
	s.WaitingReason = attrStr(m, MetaWaitingReason)
	s.WaitEventType = attrStr(m, MetaWaitEventType)
	s.WaitEvent = attrStr(m, MetaWaitEvent)
	s.BackendType = attrStr(m, MetaBackendType)
	s.BackendXID = attrStr(m, MetaBackendXID)
	s.BackendXmin = attrStr(m, MetaBackendXmin)
	s.RsgID = attrInt(m, MetaRsgID)
	s.RsgName = attrStr(m, MetaRsgName)
	s.RsgQueueDuration = attrStr(m, MetaRsgQueueDuration)
	s.Query = attrStr(m, MetaQuery)
	if b := attrBool(m, MetaQueryTruncated); b != nil {
		s.QueryTruncated = *b
	}
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

func attrStr(m pcommon.Map, key string) *string {
	v, ok := m.Get(key)
	if !ok {
		return nil
	}
	s := v.AsString()
	return &s
}

// attrInt also reads an integer written as a string or an integral double.
func attrInt(m pcommon.Map, key string) *int64 {
	v, ok := m.Get(key)
	if !ok {
		return nil
	}
	var n int64
	switch v.Type() {
	case pcommon.ValueTypeInt:
		n = v.Int()
	case pcommon.ValueTypeDouble:
		d := v.Double()
		if d != math.Trunc(d) || math.Abs(d) > 1<<53 {
			return nil
		}
		n = int64(d)
	case pcommon.ValueTypeStr:
		var err error
		if n, err = strconv.ParseInt(v.Str(), 10, 64); err != nil {
			return nil
		}
	default:
		return nil
	}
	return &n
}

func attrBool(m pcommon.Map, key string) *bool {
	v, ok := m.Get(key)
	if !ok {
		return nil
	}
	if v.Type() == pcommon.ValueTypeBool {
		b := v.Bool()
		return &b
	}
	b, _ := strconv.ParseBool(v.AsString())
	return &b
}

// attrTime reads an RFC 3339 timestamp; absent or unparsable is nil.
func attrTime(m pcommon.Map, key string) *time.Time {
	v, ok := m.Get(key)
	if !ok {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, v.AsString())
	if err != nil {
		return nil
	}
	return &t
}
