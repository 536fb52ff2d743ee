// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package events

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// Finished work (docs/pipeline.md, finished work): one OpenTelemetry log
// record, an event, per ended query and per ended session, with every
// final figure. The fields of each event are declared once here, from
// Figures for the counters: the connector writes them, the history
// exporter makes one column of each, the docs list them.
const (
	EventQueryEnd   = "gpotel.query.end"
	EventSessionEnd = "gpotel.session.end"
)

// Attribute keys of the events beyond the pipeline's own names.
const (
	AttrQueryEnd              = "gpotel.query.end"
	AttrQueryStatus           = "gpotel.query.status"
	AttrDuration              = "gpotel.duration"
	AttrPartial               = "gpotel.partial"
	AttrApplication           = "gpotel.session.application"
	AttrClientAddress         = "client.address"
	AttrClientPort            = "client.port"
	AttrResourceGroup         = "gpotel.resource_group.name"
	AttrCPUCoordinator        = "gpotel.cpu.time.coordinator"
	AttrCPUSegments           = "gpotel.cpu.time.segments"
	AttrSegments              = "gpotel.segments"
	AttrSpillMax              = "gpotel.spill.size.max"
	AttrSpillFilesMax         = "gpotel.spill.files.max"
	AttrLockWait              = "gpotel.lock.wait.time"
	AttrLockBlocker           = "gpotel.lock.blocker.session.id"
	AttrVmemPeak              = "gpotel.vmem.peak"
	AttrSessionStart          = "gpotel.session.start"
	AttrSessionEnd            = "gpotel.session.end"
	AttrSessionQueries        = "gpotel.session.queries"
	AttrMemoryPeak            = "gpotel.memory.rss.max"
	AttrSkewCPUPrefix         = "gpotel.skew.cpu."
	AttrSkewIOPrefix          = "gpotel.skew.disk_io."
	AttrPartialReason         = "gpotel.partial.reason"
	AttrPartialHosts          = "gpotel.partial.hosts"
	AttrPartialSince          = "gpotel.partial.since"
	eventCounterPrefix        = "gpotel."
	eventColumnSessionFigures = "gpotel.session."
)

// The keys of one element of AttrSegments: what the query's processes
// used on one segment instance.
const (
	SegmentKeyHost    = "host"
	SegmentKeySegment = "segment"
	SegmentKeyCPU     = "cpu"   // seconds, user + system
	SegmentKeyRead    = "read"  // bytes
	SegmentKeyWritten = "write" // bytes
)

// The values of AttrQueryStatus: how a query ended, from what the
// server said (docs/pipeline.md, how it ended).
const (
	// QueryCompleted: it ran to its end: the session was seen idle after it,
	// or its backend exited cleanly (code 0: it was idle), and the server
	// log, read past its end, names no failure of it.
	QueryCompleted = "completed"
	// QueryError: the log names its failure (SQLSTATE and message).
	QueryError = "error"
	// QueryCancelled: SQLSTATE 57014 (user request, statement timeout, ...).
	QueryCancelled = "cancelled"
	// QueryTerminated: the server ended its session while it ran (57P01 and
	// the other 57P codes, another FATAL, or a signal killed the backend).
	QueryTerminated = "terminated"
	// QueryClientLost: the connection to the client was lost (SQLSTATE
	// class 08).
	QueryClientLost = "client_lost"
	// QueryAborted: the session was seen idle in an aborted transaction
	// after it, and no server log is read: it failed or was cancelled.
	QueryAborted = "aborted"
	// QueryUnknown: nothing tells how it ended (the next statement had
	// started before a snapshot saw this one end and the log is not read,
	// or its session left and neither its exit nor the log tell why).
	QueryUnknown = "unknown"
)

// The values of AttrCancelReason, from 57014's message.
const (
	CancelUserRequest      = "user_request"
	CancelStatementTimeout = "statement_timeout"
	CancelLockTimeout      = "lock_timeout"
	CancelOther            = "other"
)

// The values of AttrSessionEndReason.
const (
	// SessionClientDisconnect: its backend exited with code 0, as it does
	// when the client says goodbye or closes the connection while idle.
	SessionClientDisconnect = "client_disconnect"
	// SessionTerminated: a FATAL (57P01, 57P04, 57P05, 25P03, ...) ended it,
	// or a signal killed its backend.
	SessionTerminated = "terminated"
	// SessionConnectionLost: the log says the connection was lost (class 08).
	SessionConnectionLost = "connection_lost"
	// SessionServerShutdown: the server went down under it (57P02, 57P03,
	// or the exit code 2 of a backend told to quit at once).
	SessionServerShutdown = "server_shutdown"
	// SessionEndUnknown: nothing tells.
	SessionEndUnknown = "unknown"
)

// Attribute keys of how a query or session ended.
const (
	AttrErrorMessage     = "gpotel.error.message"
	AttrCancelReason     = "gpotel.query.cancel_reason"
	AttrSessionEndReason = "gpotel.session.end_reason"
)

// AttrEndedByRule names the workload rule whose cancel or terminate
// ended the query (internal/sessionaction's ledger).
const AttrEndedByRule = "gpotel.query.ended_by_rule"

// The reasons AttrPartialReason lists, in this order.
const (
	// PartialStartedBefore: it started before gpotel first saw it (before
	// the collector started, or before the first snapshot that saw its
	// session), so what it did before is not in its figures.
	PartialStartedBefore = "started_before"
	// PartialHostSilent: a host of its processes did not answer while it
	// ran (a query), or was still silent when its event was written.
	PartialHostSilent = "host_silent"
)

// MaxPartialHosts bounds the silent hosts an event names; more are counted
// ("+N").
const MaxPartialHosts = 8

// PartialCause says why an event's figures are a lower bound; the zero
// value: they are not.
type PartialCause struct {
	StartedBefore bool
	// Hosts are the silent hosts, in the order they went silent, at most
	// MaxPartialHosts; MoreHosts counts those beyond.
	Hosts     []string
	MoreHosts int
	// Since is when what it lacks began (unix ns): the first snapshot in
	// which a host of it did not answer; else the first snapshot that saw it.
	Since int64
}

// Partial tells whether there is a cause.
func (c *PartialCause) Partial() bool { return c.StartedBefore || len(c.Hosts) > 0 }

// Reason is AttrPartialReason's value: the reasons, comma-separated.
func (c *PartialCause) Reason() string {
	var r []string
	if c.StartedBefore {
		r = append(r, PartialStartedBefore)
	}
	if len(c.Hosts) > 0 {
		r = append(r, PartialHostSilent)
	}
	return strings.Join(r, ",")
}

// HostList is AttrPartialHosts' value: the hosts comma-separated,
// then "+N" for those not listed.
func (c *PartialCause) HostList() string {
	s := strings.Join(c.Hosts, ",")
	if c.MoreHosts > 0 {
		s += fmt.Sprintf(",+%d", c.MoreHosts)
	}
	return s
}

// queryEvent is the query event's table: each field with its accessors
// on FinishedQuery. A figure the processor puts in FinishedQuery is one
// row here; the event, its read back, the history column and the API
// item follow from it.
var queryEvent = func() eventTable[FinishedQuery] {
	type q = FinishedQuery
	t := sessionKeyFields(func(q *q) *pipeline.SessionKey { return &q.Session }, "its session")
	t = append(t, whoFields(func(q *q) *SessionWho { return &q.Who })...)
	t = append(t,
		timeAt(Field{Key: pipeline.AttrQueryStart, Column: "query_start", Identity: true, Brief: "query_start of the statement"},
			func(q *q) *int64 { return &q.Start }),
		positive(Field{Key: pipeline.AttrQueryCommandCount, Column: "ccnt", Identity: true, Brief: "the statement's command count " +
			"(yagpcc's QueryKey ccnt): cmd<N> of its coordinator backend's title while it ran, or of the idle title right after it; absent where the server " +
			"numbers none (PostgreSQL)"},
			func(q *q) *int64 { return &q.CommandCount }),
		timeAt(Field{Key: AttrQueryEnd, Column: "query_end", Brief: "when it ended: state_change after it, the log's time of its " +
			"failure, its backend's exit, the next statement's query_start, or, where nothing tells, the first snapshot without its session"},
			func(q *q) *int64 { return &q.End }),
		derived(Field{Key: AttrDuration, Column: "duration", Unit: "s", Brief: "query_end - query_start"},
			func(q *q) float64 { return nsSeconds(q.End - q.Start) }),
		always(Field{Key: AttrQueryStatus, Column: "status", Brief: "completed, error, cancelled, terminated, client_lost, aborted " +
			"or unknown (docs/pipeline.md, how it ended)"},
			func(q *q) *string { return &q.Status }),
		unlessZero(Field{Key: pipeline.AttrSQLState, Column: "sqlstate", Brief: "the SQLSTATE the server log gave its failure; absent " +
			"when it completed or nothing tells"},
			func(q *q) *string { return &q.SQLState }),
		unlessZero(Field{Key: AttrErrorMessage, Column: "error_message", Brief: "the server log's message of its " +
			"failure, at most 512 bytes (a cut one ends in …)"},
			func(q *q) *string { return &q.ErrorMessage }),
		unlessZero(Field{Key: AttrCancelReason, Column: "cancel_reason", Brief: "of a cancelled one: user_request, " +
			"statement_timeout, lock_timeout or other, from the message"},
			func(q *q) *string { return &q.CancelReason }),
		unlessZero(Field{Key: AttrEndedByRule, Column: "ended_by_rule", Brief: "the workload rule whose " +
			"cancel or terminate ended it (it ended cancelled at a user's request, or terminated, after the rule's action was done); absent otherwise"},
			func(q *q) *string { return &q.EndedByRule }),
		always(Field{Key: AttrPartial, Column: "partial", Brief: "a host of its processes did not answer while it ran, or it started " +
			"before gpotel first saw its session: its figures are a lower bound"},
			func(q *q) *bool { return &q.Partial }),
		field(Field{Key: pipeline.AttrDBQueryText, Column: "query_text", Optional: true, Brief: "the statement's text, only with the processor's " +
			"queries::text"},
			func(q *q) (string, bool) { return deref(q.Text), q.Text != nil }, func(q *q, v string) { q.Text = &v }),
	)
	t = append(t, counterFields(func(q *q) (*pipeline.Counters, *uint32) { return &q.Totals, &q.Known })...)
	t = append(t,
		derived(Field{Key: AttrCPUCoordinator, Column: "cpu_time_coordinator", Unit: "s", Brief: "user + system CPU of its processes " +
			"on the coordinator (segment -1)"},
			func(q *q) float64 { return nsSeconds(segmentCPU(q.Segments, true)) }),
		derived(Field{Key: AttrCPUSegments, Column: "cpu_time_segments", Unit: "s", Brief: "user + system CPU of its processes on the segments"},
			func(q *q) float64 { return nsSeconds(segmentCPU(q.Segments, false)) }),
	)
	t = append(t, skewFields(AttrSkewCPUPrefix, "skew_cpu_", "CPU", func(q *q) *pipeline.Skew { return &q.Skew.CPU })...)
	t = append(t, skewFields(AttrSkewIOPrefix, "skew_disk_io_", "disk I/O", func(q *q) *pipeline.Skew { return &q.Skew.IO })...)
	spill := func(q *q) *pipeline.QuerySpill {
		if q.Spill == nil {
			q.Spill = &pipeline.QuerySpill{}
		}
		return q.Spill
	}
	t = append(t,
		always(Field{Key: AttrSegments, Column: "segments", Brief: "per segment instance: host, segment, CPU seconds, bytes read " +
			"and written"},
			func(q *q) *[]pipeline.SegmentUse { return &q.Segments }),
		field(Field{Key: AttrSpillMax, Column: "spill_size_max", Unit: "By", Optional: true, Brief: "the most workfile bytes it held " +
			"at once over every segment, as far as the Greenplum reads saw (Greenplum only)"},
			func(q *q) (int64, bool) { return deref(q.Spill).MaxBytes, q.Spill != nil }, func(q *q, v int64) { spill(q).MaxBytes = v }),
		field(Field{Key: AttrSpillFilesMax, Column: "spill_files_max", Unit: "{file}", Optional: true, Brief: "the most workfiles it " +
			"held at once"},
			func(q *q) (int64, bool) { return deref(q.Spill).MaxFiles, q.Spill != nil }, func(q *q, v int64) { spill(q).MaxFiles = v }),
		secondsAt(Field{Key: AttrLockWait, Column: "lock_wait_time", Brief: "time it was seen waiting for a lock: the " +
			"snapshot intervals in which pg_stat_activity showed it waiting"},
			func(q *q) *int64 { return &q.LockWait }),
		unlessZero(Field{Key: AttrLockBlocker, Column: "lock_blocker_sess_id", Brief: "the last session seen holding the " +
			"lock it waited for (Greenplum's pg_locks read)"},
			func(q *q) *int64 { return &q.LockBlocker }),
		positive(Field{Key: AttrVmemPeak, Column: "vmem_peak", Unit: "By", Brief: "the largest vmem Greenplum accounted " +
			"to its session over every segment while it ran, where the server keeps it"},
			func(q *q) *int64 { return &q.VmemPeak }),
	)
	return append(t, partialCauseFields(func(q *q) *PartialCause { return &q.PartialCause })...)
}()

// sessionEvent is the session event's table, on EndedSession.
var sessionEvent = func() eventTable[EndedSession] {
	type s = EndedSession
	t := sessionKeyFields(func(s *s) *pipeline.SessionKey { return &s.Session }, "the session")
	t = append(t, whoFields(func(s *s) *SessionWho { return &s.Who })...)
	t = append(t,
		timeAt(Field{Key: AttrSessionStart, Column: "session_start", Identity: true, Brief: "backend_start of its coordinator " +
			"backend; the first snapshot that saw it when the server has none"},
			func(s *s) *int64 { return &s.Start }),
		timeAt(Field{Key: AttrSessionEnd, Column: "session_end", Brief: "its coordinator backend's exit; without an exit record, the " +
			"first snapshot without it"},
			func(s *s) *int64 { return &s.End }),
		field(Field{Key: AttrSessionEndReason, Column: "end_reason", Brief: "client_disconnect, terminated, connection_lost, " +
			"server_shutdown or unknown (docs/pipeline.md, how it ended)"},
			func(s *s) (string, bool) { return cmp.Or(s.EndReason, SessionEndUnknown), true }, func(s *s, v string) { s.EndReason = v }),
		unlessZero(Field{Key: pipeline.AttrSQLState, Column: "sqlstate", Brief: "the SQLSTATE of the FATAL that ended it"},
			func(s *s) *string { return &s.SQLState }),
		unlessZero(Field{Key: AttrErrorMessage, Column: "error_message", Brief: "the message of the FATAL that ended " +
			"it, at most 512 bytes"},
			func(s *s) *string { return &s.Message }),
		derived(Field{Key: AttrDuration, Column: "duration", Unit: "s", Brief: "session_end - session_start"},
			func(s *s) float64 { return nsSeconds(s.End - s.Start) }),
		always(Field{Key: AttrPartial, Column: "partial", Brief: "it started before gpotel first saw it, or a host of its processes " +
			"was still silent when its event was written: its figures are a lower bound"},
			func(s *s) *bool { return &s.Partial }),
		always(Field{Key: AttrSessionQueries, Column: "queries", Unit: "{query}", Brief: "queries gpotel saw it run"},
			func(s *s) *int64 { return &s.Queries }),
	)
	t = append(t, counterFields(func(s *s) (*pipeline.Counters, *uint32) { return &s.Totals, &s.Known })...)
	t = append(t,
		always(Field{Key: AttrMemoryPeak, Column: "memory_rss_max", Unit: "By", Brief: "the largest resident memory of all its " +
			"processes together in one snapshot"},
			func(s *s) *int64 { return &s.MemoryPeak }),
		positive(Field{Key: AttrSpillMax, Column: "spill_size_max", Unit: "By", Brief: "the most workfile bytes one of " +
			"its queries held at once (Greenplum only)"},
			func(s *s) *int64 { return &s.SpillMax }),
		secondsAt(Field{Key: AttrLockWait, Column: "lock_wait_time", Brief: "time its queries were seen waiting for a lock"},
			func(s *s) *int64 { return &s.LockWait }),
		positive(Field{Key: AttrVmemPeak, Column: "vmem_peak", Unit: "By", Brief: "the largest vmem Greenplum accounted " +
			"to it over every segment, where the server keeps it"},
			func(s *s) *int64 { return &s.VmemPeak }),
	)
	return append(t, partialCauseFields(func(s *s) *PartialCause { return &s.PartialCause })...)
}()

// QueryEventFields are the query event's fields, in the order of the
// history table's columns.
var QueryEventFields = queryEvent.fields()

// SessionEventFields are the session event's fields, in the order of the
// history table's columns.
var SessionEventFields = sessionEvent.fields()

// PutQueryEvent writes every field of QueryEventFields that q has into attrs.
func PutQueryEvent(attrs pcommon.Map, q *FinishedQuery) { queryEvent.put(attrs, q) }

// PutSessionEvent writes every field of SessionEventFields that s has into attrs.
func PutSessionEvent(attrs pcommon.Map, s *EndedSession) { sessionEvent.put(attrs, s) }

// DecodeQueryEvent reads a query event's attributes back (a finished_query
// resource's, or a log record's); an error names the first field that is
// required and missing or of another type. The fields worked out from
// others (duration, CPU per side) are not read.
func DecodeQueryEvent(attrs pcommon.Map) (FinishedQuery, error) { return queryEvent.decode(attrs) }

// DecodeSessionEvent reads a session event's attributes back.
func DecodeSessionEvent(attrs pcommon.Map) (EndedSession, error) { return sessionEvent.decode(attrs) }

// FinishedQuery is one ended query's event.
type FinishedQuery struct {
	Session      pipeline.SessionKey
	Who          SessionWho
	CommandCount int64 // 0: the server numbers none
	Start, End   int64 // unix ns
	Status       string
	SQLState     string // "": none
	ErrorMessage string // "": none
	CancelReason string // "": not cancelled
	EndedByRule  string // "": no workload rule ended it
	Partial      bool
	PartialCause PartialCause // why Partial
	Text         *string      // only with queries::text
	Totals       pipeline.Counters
	Known        uint32 // the counters some process of it reported (bit per Figure)
	Segments     []pipeline.SegmentUse
	Skew         pipeline.SkewPair
	Spill        *pipeline.QuerySpill // nil: no Greenplum read saw it hold workfiles
	LockWait     int64                // ns
	LockBlocker  int64                // sess_id; 0: none seen
	VmemPeak     int64                // bytes; 0: the server keeps no such figure
}

// EndedSession is one ended session's event.
type EndedSession struct {
	Session      pipeline.SessionKey
	Who          SessionWho
	Start, End   int64 // unix ns
	EndReason    string
	SQLState     string // "": none
	Message      string // "": none
	Partial      bool
	PartialCause PartialCause // why Partial
	Queries      int64
	Totals       pipeline.Counters
	Known        uint32
	MemoryPeak   int64 // bytes
	SpillMax     int64 // bytes; 0: none seen
	LockWait     int64 // ns
	VmemPeak     int64 // bytes; 0: none
}

// SessionWho is whose work a session's is, as pg_stat_activity last said.
type SessionWho struct {
	Database, User             string
	Application, ClientAddress pipeline.Null[string]
	ClientPort                 pipeline.Null[int64]
	ResourceGroup              pipeline.Null[string]
}

func newEvent(lrs plog.LogRecordSlice, name string, at int64, observed pcommon.Timestamp) plog.LogRecord {
	lr := lrs.AppendEmpty()
	lr.SetEventName(name)
	lr.SetTimestamp(pcommon.Timestamp(at))
	lr.SetObservedTimestamp(observed)
	lr.SetSeverityNumber(plog.SeverityNumberInfo)
	return lr
}

// segmentCPU sums the CPU of the coordinator's (segment -1) or the segments' entries.
func segmentCPU(segs []pipeline.SegmentUse, coordinator bool) int64 {
	var ns int64
	for _, u := range segs {
		if (u.Segment == -1) == coordinator {
			ns += u.CPU
		}
	}
	return ns
}

// AppendFinishedQuery appends q as a finished_query resource: the event's
// fields as resource attributes, no metrics (docs/pipeline.md, finished work).
func AppendFinishedQuery(rms pmetric.ResourceMetricsSlice, q *FinishedQuery) {
	attrs := rms.AppendEmpty().Resource().Attributes()
	attrs.PutStr(pipeline.AttrResourceKind, pipeline.KindFinishedQuery.String())
	PutQueryEvent(attrs, q)
}

// AppendEndedSession appends s as an ended_session resource.
func AppendEndedSession(rms pmetric.ResourceMetricsSlice, s *EndedSession) {
	attrs := rms.AppendEmpty().Resource().Attributes()
	attrs.PutStr(pipeline.AttrResourceKind, pipeline.KindEndedSession.String())
	PutSessionEvent(attrs, s)
}

// AppendEventOf writes the event a finished_query or ended_session
// resource carries as one log record of lrs; false for any other resource.
func AppendEventOf(lrs plog.LogRecordSlice, res pcommon.Resource, observed pcommon.Timestamp) bool {
	var name string
	var end Field
	switch pipeline.KindOf(res.Attributes()) {
	case pipeline.KindFinishedQuery:
		name, end = EventQueryEnd, eventEnd(QueryEventFields, AttrQueryEnd)
	case pipeline.KindEndedSession:
		name, end = EventSessionEnd, eventEnd(SessionEventFields, AttrSessionEnd)
	default:
		return false
	}
	var at int64
	if v, ok := Value(res.Attributes(), end); ok {
		at = v.(time.Time).UnixNano()
	}
	lr := newEvent(lrs, name, at, observed)
	lr.Attributes().EnsureCapacity(res.Attributes().Len() - 1)
	res.Attributes().Range(func(k string, v pcommon.Value) bool {
		if k != pipeline.AttrResourceKind {
			v.CopyTo(lr.Attributes().PutEmpty(k))
		}
		return true
	})
	return true
}

func eventEnd(fields []Field, key string) Field {
	for _, f := range fields {
		if f.Key == key {
			return f
		}
	}
	panic("pipeline: no event field " + key)
}
