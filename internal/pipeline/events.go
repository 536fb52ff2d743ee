// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"cmp"
	"fmt"
	"math"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
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

// EventType is the type of an event field's value.
type EventType uint8

// The value types: an attribute of that type, and a column of the
// matching SQL type in the history tables.
const (
	EventInt      EventType = iota + 1 // int attribute; bigint
	EventDouble                        // double attribute; double precision
	EventString                        // string attribute; text
	EventBool                          // bool attribute; boolean
	EventTime                          // string attribute, RFC 3339 with nanoseconds, UTC; timestamptz
	EventSegments                      // slice attribute of maps (QueryEventSegment keys); json
	EventStrings                       // slice attribute of strings; text[]
	EventDoubles                       // slice attribute of doubles; double precision[]
)

// EventField is one attribute of an event and one column of its history table.
type EventField struct {
	Key    string // the log record attribute
	Column string // the history table's column
	Type   EventType
	Unit   string // UCUM, as the metrics: s, By, 1, {fault}
	// Identity: the field is part of the event's key, the one a history
	// row is written under once (tm_id, session, and the query's or
	// session's start and command count).
	Identity bool
	// Optional: absent when not known (no text, not Greenplum, a figure
	// the host does not measure); every other field is always there.
	Optional bool
	Brief    string
	counter  Figure // the Figures row a counter field carries
	counted  bool   // the field is a counter's
}

// Counter is the Figures row of a counter field; ok false for the others.
func (f EventField) Counter() (fig Figure, ok bool) { return f.counter, f.counted }

// Attribute keys of the events beyond the pipeline's own names.
const (
	AttrEventQueryEnd         = "gpotel.query.end"
	AttrEventQueryStatus      = "gpotel.query.status"
	AttrEventDuration         = "gpotel.duration"
	AttrEventPartial          = "gpotel.partial"
	AttrEventApplication      = "gpotel.session.application"
	AttrEventClientAddress    = "client.address"
	AttrEventClientPort       = "client.port"
	AttrEventResourceGroup    = "gpotel.resource_group.name"
	AttrEventCPUCoordinator   = "gpotel.cpu.time.coordinator"
	AttrEventCPUSegments      = "gpotel.cpu.time.segments"
	AttrEventSegments         = "gpotel.segments"
	AttrEventSpillMax         = "gpotel.spill.size.max"
	AttrEventSpillFilesMax    = "gpotel.spill.files.max"
	AttrEventLockWait         = "gpotel.lock.wait.time"
	AttrEventLockBlocker      = "gpotel.lock.blocker.session.id"
	AttrEventVmemPeak         = "gpotel.vmem.peak"
	AttrEventSessionStart     = "gpotel.session.start"
	AttrEventSessionEnd       = "gpotel.session.end"
	AttrEventSessionQueries   = "gpotel.session.queries"
	AttrEventMemoryPeak       = "gpotel.memory.rss.max"
	AttrEventSkewCPUPrefix    = "gpotel.skew.cpu."
	AttrEventSkewIOPrefix     = "gpotel.skew.disk_io."
	AttrEventPartialReason    = "gpotel.partial.reason"
	AttrEventPartialHosts     = "gpotel.partial.hosts"
	AttrEventPartialSince     = "gpotel.partial.since"
	eventCounterPrefix        = "gpotel."
	eventColumnSessionFigures = "gpotel.session."
)

// The keys of one element of AttrEventSegments: what the query's processes
// used on one segment instance.
const (
	SegmentKeyHost    = "host"
	SegmentKeySegment = "segment"
	SegmentKeyCPU     = "cpu"   // seconds, user + system
	SegmentKeyRead    = "read"  // bytes
	SegmentKeyWritten = "write" // bytes
)

// The values of AttrEventQueryStatus: how a query ended, from what the
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

// The values of AttrEventCancelReason, from 57014's message.
const (
	CancelUserRequest      = "user_request"
	CancelStatementTimeout = "statement_timeout"
	CancelLockTimeout      = "lock_timeout"
	CancelOther            = "other"
)

// The values of AttrEventSessionEndReason.
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
	AttrEventErrorMessage     = "gpotel.error.message"
	AttrEventCancelReason     = "gpotel.query.cancel_reason"
	AttrEventSessionEndReason = "gpotel.session.end_reason"
)

// AttrEventEndedByRule names the workload rule whose cancel or terminate
// ended the query (internal/sessionaction's ledger).
const AttrEventEndedByRule = "gpotel.query.ended_by_rule"

// The reasons AttrEventPartialReason lists, in this order.
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

// Reason is AttrEventPartialReason's value: the reasons, comma-separated.
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

// HostList is AttrEventPartialHosts' value: the hosts comma-separated,
// then "+N" for those not listed.
func (c *PartialCause) HostList() string {
	s := strings.Join(c.Hosts, ",")
	if c.MoreHosts > 0 {
		s += fmt.Sprintf(",+%d", c.MoreHosts)
	}
	return s
}

// QueryEventFields are the query event's fields, in the order of the
// history table's columns.
var QueryEventFields []EventField

// SessionEventFields are the session event's fields, in the order of the
// history table's columns.
var SessionEventFields []EventField

func init() {
	QueryEventFields = append(eventIdentity(true), eventWho()...)
	QueryEventFields = append(QueryEventFields,
		EventField{Key: AttrQueryStart, Column: "query_start", Type: EventTime, Identity: true, Brief: "query_start of the statement"},
		EventField{Key: AttrQueryCommandCount, Column: "ccnt", Type: EventInt, Identity: true, Optional: true, Brief: "the statement's command count " +
			"(yagpcc's QueryKey ccnt): cmd<N> of its coordinator backend's title while it ran, or of the idle title right after it; absent where the server " +
			"numbers none (PostgreSQL)"},
		EventField{Key: AttrEventQueryEnd, Column: "query_end", Type: EventTime, Brief: "when it ended: state_change after it, the log's time of its " +
			"failure, its backend's exit, the next statement's query_start, or, where nothing tells, the first snapshot without its session"},
		EventField{Key: AttrEventDuration, Column: "duration", Type: EventDouble, Unit: "s", Brief: "query_end - query_start"},
		EventField{Key: AttrEventQueryStatus, Column: "status", Type: EventString, Brief: "completed, error, cancelled, terminated, client_lost, aborted " +
			"or unknown (docs/pipeline.md, how it ended)"},
		EventField{Key: AttrSQLState, Column: "sqlstate", Type: EventString, Optional: true, Brief: "the SQLSTATE the server log gave its failure; absent " +
			"when it completed or nothing tells"},
		EventField{Key: AttrEventErrorMessage, Column: "error_message", Type: EventString, Optional: true, Brief: "the server log's message of its " +
			"failure, at most 512 bytes (a cut one ends in …)"},
		EventField{Key: AttrEventCancelReason, Column: "cancel_reason", Type: EventString, Optional: true, Brief: "of a cancelled one: user_request, " +
			"statement_timeout, lock_timeout or other, from the message"},
		EventField{Key: AttrEventEndedByRule, Column: "ended_by_rule", Type: EventString, Optional: true, Brief: "the workload rule whose " +
			"cancel or terminate ended it (it ended cancelled at a user's request, or terminated, after the rule's action was done); absent otherwise"},
		EventField{Key: AttrEventPartial, Column: "partial", Type: EventBool, Brief: "a host of its processes did not answer while it ran, or it started " +
			"before gpotel first saw its session: its figures are a lower bound"},
		EventField{Key: AttrDBQueryText, Column: "query_text", Type: EventString, Optional: true, Brief: "the statement's text, only with the processor's " +
			"queries::text"},
	)
	QueryEventFields = append(QueryEventFields, eventCounters()...)
	QueryEventFields = append(QueryEventFields,
		EventField{Key: AttrEventCPUCoordinator, Column: "cpu_time_coordinator", Type: EventDouble, Unit: "s", Brief: "user + system CPU of its processes " +
			"on the coordinator (segment -1)"},
		EventField{Key: AttrEventCPUSegments, Column: "cpu_time_segments", Type: EventDouble, Unit: "s", Brief: "user + system CPU of its processes on the segments"},
	)
	QueryEventFields = append(QueryEventFields, eventSkews(AttrEventSkewCPUPrefix, "skew_cpu_", "CPU")...)
	QueryEventFields = append(QueryEventFields, eventSkews(AttrEventSkewIOPrefix, "skew_disk_io_", "disk I/O")...)
	QueryEventFields = append(QueryEventFields,
		EventField{Key: AttrEventSegments, Column: "segments", Type: EventSegments, Brief: "per segment instance: host, segment, CPU seconds, bytes read " +
			"and written"},
		EventField{Key: AttrEventSpillMax, Column: "spill_size_max", Type: EventInt, Unit: "By", Optional: true, Brief: "the most workfile bytes it held " +
			"at once over every segment, as far as the Greenplum reads saw (Greenplum only)"},
		EventField{Key: AttrEventSpillFilesMax, Column: "spill_files_max", Type: EventInt, Unit: "{file}", Optional: true, Brief: "the most workfiles it " +
			"held at once"},
		EventField{Key: AttrEventLockWait, Column: "lock_wait_time", Type: EventDouble, Unit: "s", Brief: "time it was seen waiting for a lock: the " +
			"snapshot intervals in which pg_stat_activity showed it waiting"},
		EventField{Key: AttrEventLockBlocker, Column: "lock_blocker_sess_id", Type: EventInt, Optional: true, Brief: "the last session seen holding the " +
			"lock it waited for (Greenplum's pg_locks read)"},
		EventField{Key: AttrEventVmemPeak, Column: "vmem_peak", Type: EventInt, Unit: "By", Optional: true, Brief: "the largest vmem Greenplum accounted " +
			"to its session over every segment while it ran, where the server keeps it"},
	)
	QueryEventFields = append(QueryEventFields, eventPartialCause()...)

	SessionEventFields = append(eventIdentity(false), eventWho()...)
	SessionEventFields = append(SessionEventFields,
		EventField{Key: AttrEventSessionStart, Column: "session_start", Type: EventTime, Identity: true, Brief: "backend_start of its coordinator " +
			"backend; the first snapshot that saw it when the server has none"},
		EventField{Key: AttrEventSessionEnd, Column: "session_end", Type: EventTime, Brief: "its coordinator backend's exit; without an exit record, the " +
			"first snapshot without it"},
		EventField{Key: AttrEventSessionEndReason, Column: "end_reason", Type: EventString, Brief: "client_disconnect, terminated, connection_lost, " +
			"server_shutdown or unknown (docs/pipeline.md, how it ended)"},
		EventField{Key: AttrSQLState, Column: "sqlstate", Type: EventString, Optional: true, Brief: "the SQLSTATE of the FATAL that ended it"},
		EventField{Key: AttrEventErrorMessage, Column: "error_message", Type: EventString, Optional: true, Brief: "the message of the FATAL that ended " +
			"it, at most 512 bytes"},
		EventField{Key: AttrEventDuration, Column: "duration", Type: EventDouble, Unit: "s", Brief: "session_end - session_start"},
		EventField{Key: AttrEventPartial, Column: "partial", Type: EventBool, Brief: "it started before gpotel first saw it, or a host of its processes " +
			"was still silent when its event was written: its figures are a lower bound"},
		EventField{Key: AttrEventSessionQueries, Column: "queries", Type: EventInt, Unit: "{query}", Brief: "queries gpotel saw it run"},
	)
	SessionEventFields = append(SessionEventFields, eventCounters()...)
	SessionEventFields = append(SessionEventFields,
		EventField{Key: AttrEventMemoryPeak, Column: "memory_rss_max", Type: EventInt, Unit: "By", Brief: "the largest resident memory of all its " +
			"processes together in one snapshot"},
		EventField{Key: AttrEventSpillMax, Column: "spill_size_max", Type: EventInt, Unit: "By", Optional: true, Brief: "the most workfile bytes one of " +
			"its queries held at once (Greenplum only)"},
		EventField{Key: AttrEventLockWait, Column: "lock_wait_time", Type: EventDouble, Unit: "s", Brief: "time its queries were seen waiting for a lock"},
		EventField{Key: AttrEventVmemPeak, Column: "vmem_peak", Type: EventInt, Unit: "By", Optional: true, Brief: "the largest vmem Greenplum accounted " +
			"to it over every segment, where the server keeps it"},
	)
	SessionEventFields = append(SessionEventFields, eventPartialCause()...)
}

// eventPartialCause are the fields that say why an event is partial; all
// absent when it is not.
func eventPartialCause() []EventField {
	return []EventField{
		{Key: AttrEventPartialReason, Column: "partial_reason", Type: EventString, Optional: true,
			Brief: "why it is partial, comma-separated: " + PartialStartedBefore + " (it started before gpotel first saw it), " +
				PartialHostSilent + " (a host of its processes did not answer)"},
		{Key: AttrEventPartialHosts, Column: "partial_hosts", Type: EventString, Optional: true,
			Brief: fmt.Sprintf("the hosts that did not answer, comma-separated, at most %d, then +N for the others", MaxPartialHosts)},
		{Key: AttrEventPartialSince, Column: "partial_since", Type: EventTime, Optional: true,
			Brief: "when what it lacks began: the first snapshot in which a host of it did not answer, else the first snapshot that saw it"},
	}
}

// eventIdentity are the fields that name the session.
func eventIdentity(query bool) []EventField {
	whose := "the session"
	if query {
		whose = "its session"
	}
	return []EventField{
		{Key: AttrTmID, Column: "tm_id", Type: EventInt, Identity: true, Brief: "the coordinator's start (yagpcc's tm_id)"},
		{Key: AttrSessionID, Column: "sess_id", Type: EventInt, Identity: true, Brief: "sess_id of " + whose + " (the leader's pid on PostgreSQL)"},
	}
}

// eventWho are the fields that say whose work it was; a database user
// chooses every one of them.
func eventWho() []EventField {
	return []EventField{
		{Key: AttrDBNamespace, Column: "database", Type: EventString, Brief: "datname"},
		{Key: AttrSessionUser, Column: "username", Type: EventString, Brief: "usename"},
		{Key: AttrEventApplication, Column: "application", Type: EventString, Optional: true, Brief: "application_name, as last seen"},
		{Key: AttrEventClientAddress, Column: "client_address", Type: EventString, Optional: true, Brief: "client_addr; absent for a local socket"},
		{Key: AttrEventClientPort, Column: "client_port", Type: EventInt, Optional: true, Brief: "client_port"},
		{Key: AttrEventResourceGroup, Column: "resource_group", Type: EventString, Optional: true, Brief: "rsgname (Greenplum), as last seen"},
	}
}

// eventCounters are one field per counter of Figures: the query's or the
// session's total, named after the session figure and its attribute value
// (gpotel.session.cpu.time, user → gpotel.cpu.time.user, cpu_time_user).
func eventCounters() []EventField {
	var out []EventField
	for f := range Figure(NumCounters) {
		row := &Figures[f]
		key := eventCounterPrefix + strings.TrimPrefix(row.Metric.Session, eventColumnSessionFigures)
		if row.Value != "" {
			key += "." + row.Value
		}
		typ := EventInt
		if row.Metric.Double {
			typ = EventDouble
		}
		brief := "its total of " + row.Metric.Session
		if row.Value != "" {
			brief += " " + row.Value
		}
		out = append(out, EventField{Key: key, Column: columnOf(key), Type: typ, Unit: row.Metric.Unit, Optional: true, counter: f, counted: true,
			Brief: brief + ", over every process it had"})
	}
	return out
}

// eventSkews are the skew figures of one figure over the segments.
func eventSkews(keyPrefix, columnPrefix, what string) []EventField {
	return []EventField{
		{Key: keyPrefix + "ratio", Column: columnPrefix + "ratio", Type: EventDouble, Unit: "1", Optional: true,
			Brief: "1 - avg/max of " + what + " over the segments that took part"},
		{Key: keyPrefix + "max_over_avg", Column: columnPrefix + "max_over_avg", Type: EventDouble, Unit: "1", Optional: true,
			Brief: "max/avg of " + what + " over the segments"},
		{Key: keyPrefix + "hottest_segment", Column: columnPrefix + "hottest_segment", Type: EventInt, Optional: true, Brief: "the segment that used the " +
			"most " + what},
		{Key: keyPrefix + "segments", Column: columnPrefix + "segments", Type: EventInt, Unit: "{segment}", Optional: true, Brief: "segments that took part"},
	}
}

// columnOf is the history column of an attribute key: without the gpotel.
// prefix, dots as underscores.
func columnOf(key string) string {
	return strings.ReplaceAll(strings.TrimPrefix(key, eventCounterPrefix), ".", "_")
}

// EventTimeValue writes a time as an EventTime attribute holds it.
func EventTimeValue(unixNano int64) string {
	return time.Unix(0, unixNano).UTC().Format(time.RFC3339Nano)
}

// FinishedQuery is one ended query's event.
type FinishedQuery struct {
	Session      SessionKey
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
	Totals       Counters
	Known        uint32 // the counters some process of it reported (bit per Figure)
	Segments     []SegmentUse
	Skew         SkewPair
	Spill        *QuerySpill // nil: no Greenplum read saw it hold workfiles
	LockWait     int64       // ns
	LockBlocker  int64       // sess_id; 0: none seen
	VmemPeak     int64       // bytes; 0: the server keeps no such figure
}

// EndedSession is one ended session's event.
type EndedSession struct {
	Session      SessionKey
	Who          SessionWho
	Start, End   int64 // unix ns
	EndReason    string
	SQLState     string // "": none
	Message      string // "": none
	Partial      bool
	PartialCause PartialCause // why Partial
	Queries      int64
	Totals       Counters
	Known        uint32
	MemoryPeak   int64 // bytes
	SpillMax     int64 // bytes; 0: none seen
	LockWait     int64 // ns
	VmemPeak     int64 // bytes; 0: none
}

// SessionWho is whose work a session's is, as pg_stat_activity last said.
type SessionWho struct {
	Database, User             string
	Application, ClientAddress Null[string]
	ClientPort                 Null[int64]
	ResourceGroup              Null[string]
}

// PutQueryEvent writes every field of QueryEventFields that q has into attrs.
func PutQueryEvent(attrs pcommon.Map, q *FinishedQuery) {
	for _, f := range QueryEventFields {
		if putSessionField(attrs, f, &q.Totals, q.Known, q.Session, &q.Who) {
			continue
		}
		switch f.Key {
		case AttrQueryStart:
			attrs.PutStr(f.Key, EventTimeValue(q.Start))
		case AttrQueryCommandCount:
			if q.CommandCount > 0 {
				attrs.PutInt(f.Key, q.CommandCount)
			}
		case AttrEventQueryEnd:
			attrs.PutStr(f.Key, EventTimeValue(q.End))
		case AttrEventDuration:
			attrs.PutDouble(f.Key, nsSeconds(q.End-q.Start))
		case AttrEventQueryStatus:
			attrs.PutStr(f.Key, q.Status)
		case AttrSQLState:
			putNonEmpty(attrs, f.Key, q.SQLState)
		case AttrEventErrorMessage:
			putNonEmpty(attrs, f.Key, q.ErrorMessage)
		case AttrEventCancelReason:
			putNonEmpty(attrs, f.Key, q.CancelReason)
		case AttrEventEndedByRule:
			putNonEmpty(attrs, f.Key, q.EndedByRule)
		case AttrEventPartial:
			attrs.PutBool(f.Key, q.Partial)
		case AttrDBQueryText:
			if q.Text != nil {
				attrs.PutStr(f.Key, *q.Text)
			}
		case AttrEventCPUCoordinator, AttrEventCPUSegments:
			attrs.PutDouble(f.Key, nsSeconds(segmentCPU(q.Segments, f.Key == AttrEventCPUCoordinator)))
		case AttrEventSegments:
			putSegments(attrs.PutEmptySlice(f.Key), q.Segments)
		case AttrEventSpillMax:
			if q.Spill != nil {
				attrs.PutInt(f.Key, q.Spill.MaxBytes)
			}
		case AttrEventSpillFilesMax:
			if q.Spill != nil {
				attrs.PutInt(f.Key, q.Spill.MaxFiles)
			}
		case AttrEventLockWait:
			attrs.PutDouble(f.Key, nsSeconds(q.LockWait))
		case AttrEventLockBlocker:
			if q.LockBlocker != 0 {
				attrs.PutInt(f.Key, q.LockBlocker)
			}
		case AttrEventVmemPeak:
			if q.VmemPeak > 0 {
				attrs.PutInt(f.Key, q.VmemPeak)
			}
		case AttrEventPartialReason, AttrEventPartialHosts, AttrEventPartialSince:
			putPartialCause(attrs, f.Key, &q.PartialCause)
		default:
			if !putSkew(attrs, f.Key, q.Skew) {
				panic(fmt.Sprintf("pipeline: query event field %s has no value", f.Key))
			}
		}
	}
}

// PutSessionEvent writes every field of SessionEventFields that s has into attrs.
func PutSessionEvent(attrs pcommon.Map, s *EndedSession) {
	for _, f := range SessionEventFields {
		if putSessionField(attrs, f, &s.Totals, s.Known, s.Session, &s.Who) {
			continue
		}
		switch f.Key {
		case AttrEventSessionStart:
			attrs.PutStr(f.Key, EventTimeValue(s.Start))
		case AttrEventSessionEnd:
			attrs.PutStr(f.Key, EventTimeValue(s.End))
		case AttrEventSessionEndReason:
			attrs.PutStr(f.Key, cmp.Or(s.EndReason, SessionEndUnknown))
		case AttrSQLState:
			putNonEmpty(attrs, f.Key, s.SQLState)
		case AttrEventErrorMessage:
			putNonEmpty(attrs, f.Key, s.Message)
		case AttrEventDuration:
			attrs.PutDouble(f.Key, nsSeconds(s.End-s.Start))
		case AttrEventPartial:
			attrs.PutBool(f.Key, s.Partial)
		case AttrEventSessionQueries:
			attrs.PutInt(f.Key, s.Queries)
		case AttrEventMemoryPeak:
			attrs.PutInt(f.Key, s.MemoryPeak)
		case AttrEventSpillMax:
			if s.SpillMax > 0 {
				attrs.PutInt(f.Key, s.SpillMax)
			}
		case AttrEventLockWait:
			attrs.PutDouble(f.Key, nsSeconds(s.LockWait))
		case AttrEventVmemPeak:
			if s.VmemPeak > 0 {
				attrs.PutInt(f.Key, s.VmemPeak)
			}
		case AttrEventPartialReason, AttrEventPartialHosts, AttrEventPartialSince:
			putPartialCause(attrs, f.Key, &s.PartialCause)
		default:
			panic(fmt.Sprintf("pipeline: session event field %s has no value", f.Key))
		}
	}
}

func putNonEmpty(attrs pcommon.Map, key, v string) {
	if v != "" {
		attrs.PutStr(key, v)
	}
}

// putPartialCause writes one field of c; none when it is not partial.
func putPartialCause(attrs pcommon.Map, key string, c *PartialCause) {
	if !c.Partial() {
		return
	}
	switch key {
	case AttrEventPartialReason:
		attrs.PutStr(key, c.Reason())
	case AttrEventPartialHosts:
		if len(c.Hosts) > 0 {
			attrs.PutStr(key, c.HostList())
		}
	case AttrEventPartialSince:
		if c.Since != 0 {
			attrs.PutStr(key, EventTimeValue(c.Since))
		}
	}
}

func newEvent(lrs plog.LogRecordSlice, name string, at int64, observed pcommon.Timestamp) plog.LogRecord {
	lr := lrs.AppendEmpty()
	lr.SetEventName(name)
	lr.SetTimestamp(pcommon.Timestamp(at))
	lr.SetObservedTimestamp(observed)
	lr.SetSeverityNumber(plog.SeverityNumberInfo)
	return lr
}

// putSessionField writes f when both events have it (a counter, the
// session's key, who it was); false for the event's own fields.
func putSessionField(attrs pcommon.Map, f EventField, totals *Counters, known uint32, session SessionKey, who *SessionWho) bool {
	if c, ok := f.Counter(); ok {
		putCounter(attrs, f, c, totals, known)
		return true
	}
	switch f.Key {
	case AttrTmID, AttrSessionID:
		putSessionKey(attrs, f.Key, session)
	case AttrDBNamespace, AttrSessionUser, AttrEventApplication, AttrEventClientAddress, AttrEventClientPort, AttrEventResourceGroup:
		putWho(attrs, f.Key, who)
	default:
		return false
	}
	return true
}

func putCounter(attrs pcommon.Map, f EventField, c Figure, totals *Counters, known uint32) {
	if known&(1<<c) == 0 {
		return
	}
	if f.Type == EventDouble {
		attrs.PutDouble(f.Key, nsSeconds(totals[c]))
	} else {
		attrs.PutInt(f.Key, totals[c])
	}
}

func putSessionKey(attrs pcommon.Map, key string, s SessionKey) {
	if key == AttrTmID {
		attrs.PutInt(key, s.TmID)
	} else {
		attrs.PutInt(key, s.ID)
	}
}

func putWho(attrs pcommon.Map, key string, w *SessionWho) {
	putNull := func(v Null[string]) {
		if v.Valid {
			attrs.PutStr(key, v.V)
		}
	}
	switch key {
	case AttrDBNamespace:
		attrs.PutStr(key, w.Database)
	case AttrSessionUser:
		attrs.PutStr(key, w.User)
	case AttrEventApplication:
		putNull(w.Application)
	case AttrEventClientAddress:
		putNull(w.ClientAddress)
	case AttrEventClientPort:
		if w.ClientPort.Valid {
			attrs.PutInt(key, w.ClientPort.V)
		}
	case AttrEventResourceGroup:
		putNull(w.ResourceGroup)
	}
}

// putSkew writes one skew field; false when key is none.
func putSkew(attrs pcommon.Map, key string, p SkewPair) bool {
	var sk Skew
	var rest string
	if r, ok := strings.CutPrefix(key, AttrEventSkewCPUPrefix); ok {
		sk, rest = p.CPU, r
	} else if r, ok := strings.CutPrefix(key, AttrEventSkewIOPrefix); ok {
		sk, rest = p.IO, r
	} else {
		return false
	}
	if !sk.OK {
		return true
	}
	switch rest {
	case "ratio":
		attrs.PutDouble(key, sk.Ratio)
	case "max_over_avg":
		attrs.PutDouble(key, sk.MaxOverAvg)
	case "hottest_segment":
		attrs.PutInt(key, int64(sk.Hottest))
	case "segments":
		attrs.PutInt(key, int64(sk.Segments))
	default:
		return false
	}
	return true
}

func putSegments(sl pcommon.Slice, segs []SegmentUse) {
	sl.EnsureCapacity(len(segs))
	for _, u := range segs {
		m := sl.AppendEmpty().SetEmptyMap()
		m.PutStr(SegmentKeyHost, u.Host)
		m.PutInt(SegmentKeySegment, int64(u.Segment))
		m.PutDouble(SegmentKeyCPU, nsSeconds(u.CPU))
		m.PutInt(SegmentKeyRead, u.Read)
		m.PutInt(SegmentKeyWritten, u.Written)
	}
}

// segmentCPU sums the CPU of the coordinator's (segment -1) or the segments' entries.
func segmentCPU(segs []SegmentUse, coordinator bool) int64 {
	var ns int64
	for _, u := range segs {
		if (u.Segment == -1) == coordinator {
			ns += u.CPU
		}
	}
	return ns
}

func nsSeconds(ns int64) float64 { return float64(ns) / 1e9 }

// EventValue reads field f of an event's attributes as its type's Go
// value: int64, float64, string, bool, time.Time, []SegmentUse (CPU in
// ns), []string or []float64. ok is false when it is absent or of another type (the record was
// not written by this version).
func EventValue(attrs pcommon.Map, f EventField) (v any, ok bool) {
	a, ok := attrs.Get(f.Key)
	if !ok {
		return nil, false
	}
	return EventValueOf(a, f)
}

// EventValueOf reads a, the attribute of field f, as EventValue does: a
// reader that walks the attributes in order (the writers put them in the
// fields' order) need not look each one up.
func EventValueOf(a pcommon.Value, f EventField) (v any, ok bool) {
	switch f.Type {
	case EventInt:
		if a.Type() == pcommon.ValueTypeInt {
			return a.Int(), true
		}
	case EventDouble:
		if a.Type() == pcommon.ValueTypeDouble && !math.IsNaN(a.Double()) && !math.IsInf(a.Double(), 0) {
			return a.Double(), true
		}
	case EventString:
		if a.Type() == pcommon.ValueTypeStr {
			return a.Str(), true
		}
	case EventBool:
		if a.Type() == pcommon.ValueTypeBool {
			return a.Bool(), true
		}
	case EventTime:
		if a.Type() == pcommon.ValueTypeStr {
			if t, err := time.Parse(time.RFC3339Nano, a.Str()); err == nil {
				return t, true
			}
		}
	case EventSegments:
		if a.Type() == pcommon.ValueTypeSlice {
			return readSegments(a.Slice()), true
		}
	case EventStrings:
		if a.Type() == pcommon.ValueTypeSlice {
			return readSlice(a.Slice(), stringOf)
		}
	case EventDoubles:
		if a.Type() == pcommon.ValueTypeSlice {
			return readSlice(a.Slice(), finiteDoubleOf)
		}
	}
	return nil, false
}

// readSlice reads a slice element by element; ok is false when one is not
// of the type read takes.
func readSlice[T any](sl pcommon.Slice, read func(pcommon.Value) (T, bool)) (v any, ok bool) {
	out := make([]T, sl.Len())
	for i := range sl.Len() {
		if out[i], ok = read(sl.At(i)); !ok {
			return nil, false
		}
	}
	return out, true
}

func stringOf(a pcommon.Value) (string, bool) { return a.Str(), a.Type() == pcommon.ValueTypeStr }

func finiteDoubleOf(a pcommon.Value) (float64, bool) {
	d := a.Double()
	return d, a.Type() == pcommon.ValueTypeDouble && !math.IsNaN(d) && !math.IsInf(d, 0)
}

// readSegments reads AttrEventSegments; an element that is not a map of
// the right types is left out.
func readSegments(sl pcommon.Slice) []SegmentUse {
	out := make([]SegmentUse, 0, sl.Len())
	for i := range sl.Len() {
		e := sl.At(i)
		if e.Type() != pcommon.ValueTypeMap {
			continue
		}
		m := e.Map()
		host, ok1 := m.Get(SegmentKeyHost)
		seg, ok2 := m.Get(SegmentKeySegment)
		cpu, ok3 := m.Get(SegmentKeyCPU)
		read, ok4 := m.Get(SegmentKeyRead)
		written, ok5 := m.Get(SegmentKeyWritten)
		if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || host.Type() != pcommon.ValueTypeStr || seg.Type() != pcommon.ValueTypeInt ||
			cpu.Type() != pcommon.ValueTypeDouble || read.Type() != pcommon.ValueTypeInt || written.Type() != pcommon.ValueTypeInt ||
			seg.Int() < math.MinInt32 || seg.Int() > math.MaxInt32 {
			continue
		}
		out = append(out, SegmentUse{Host: host.Str(), Segment: int32(seg.Int()), CPU: int64(math.Round(cpu.Double() * 1e9)),
			Read: read.Int(), Written: written.Int()})
	}
	return out
}

// String names a value type in an error.
func (t EventType) String() string {
	switch t {
	case EventInt:
		return "int"
	case EventDouble:
		return "double"
	case EventString:
		return "string"
	case EventBool:
		return "bool"
	case EventTime:
		return "RFC 3339 time string"
	case EventSegments:
		return "slice of segment maps"
	case EventStrings:
		return "slice of strings"
	case EventDoubles:
		return "slice of doubles"
	}
	return "value"
}

// AppendFinishedQuery appends q as a finished_query resource: the event's
// fields as resource attributes, no metrics (docs/pipeline.md, finished work).
func AppendFinishedQuery(rms pmetric.ResourceMetricsSlice, q *FinishedQuery) {
	attrs := rms.AppendEmpty().Resource().Attributes()
	attrs.PutStr(AttrResourceKind, KindFinishedQuery.String())
	PutQueryEvent(attrs, q)
}

// AppendEndedSession appends s as an ended_session resource.
func AppendEndedSession(rms pmetric.ResourceMetricsSlice, s *EndedSession) {
	attrs := rms.AppendEmpty().Resource().Attributes()
	attrs.PutStr(AttrResourceKind, KindEndedSession.String())
	PutSessionEvent(attrs, s)
}

// AppendEventOf writes the event a finished_query or ended_session
// resource carries as one log record of lrs; false for any other resource.
func AppendEventOf(lrs plog.LogRecordSlice, res pcommon.Resource, observed pcommon.Timestamp) bool {
	var name string
	var end EventField
	switch KindOf(res.Attributes()) {
	case KindFinishedQuery:
		name, end = EventQueryEnd, eventEnd(QueryEventFields, AttrEventQueryEnd)
	case KindEndedSession:
		name, end = EventSessionEnd, eventEnd(SessionEventFields, AttrEventSessionEnd)
	default:
		return false
	}
	var at int64
	if v, ok := EventValue(res.Attributes(), end); ok {
		at = v.(time.Time).UnixNano()
	}
	lr := newEvent(lrs, name, at, observed)
	lr.Attributes().EnsureCapacity(res.Attributes().Len() - 1)
	res.Attributes().Range(func(k string, v pcommon.Value) bool {
		if k != AttrResourceKind {
			v.CopyTo(lr.Attributes().PutEmpty(k))
		}
		return true
	})
	return true
}

func eventEnd(fields []EventField, key string) EventField {
	for _, f := range fields {
		if f.Key == key {
			return f
		}
	}
	panic("pipeline: no event field " + key)
}
