// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package events_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
)

func fullQueryEvent() *events.FinishedQuery {
	text := "select 1"
	q := &events.FinishedQuery{
		Session: pipeline.SessionKey{TmID: 1700000000, ID: 42},
		Who: events.SessionWho{Database: "db", User: "u", Application: pipeline.NullOf(new("psql")), ClientAddress: pipeline.NullOf(new("10.0.0.1")),
			ClientPort: pipeline.NullOf(new(int64(5000))), ResourceGroup: pipeline.NullOf(new("default_group"))},
		CommandCount: 7, Start: time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC).UnixNano(),
		Status: events.QueryCancelled, SQLState: "57014", ErrorMessage: "canceling statement due to statement timeout",
		CancelReason: events.CancelStatementTimeout, EndedByRule: "runaway-spill",
		Partial: true, Text: &text, Known: 1<<pipeline.NumCounters - 1,
		PartialCause: events.PartialCause{StartedBefore: true, Hosts: []string{"sdw1"}, Since: time.Date(2026, 11, 26, 3, 0, 1, 0, time.UTC).UnixNano()},
		Segments: []pipeline.SegmentUse{{Host: "mdw", Segment: -1, CPU: 1e9}, {Host: "sdw1", Segment: 0, CPU: 3e9, Read: 10, Written: 20},
			{Host: "sdw1", Segment: 1, CPU: 1e9}},
		Skew: pipeline.SkewPair{CPU: pipeline.Skew{Ratio: 0.5, MaxOverAvg: 1.5, Hottest: 0, Segments: 2, OK: true},
			IO: pipeline.Skew{Ratio: 1, MaxOverAvg: 2, Hottest: 0, Segments: 2, OK: true}},
		Spill: &pipeline.QuerySpill{MaxBytes: 1 << 20, MaxFiles: 3}, LockWait: 2e9, LockBlocker: 41, VmemPeak: 1 << 25,
	}
	q.End = q.Start + 5e9
	for c := range q.Totals {
		q.Totals[c] = int64(c+1) * 1e9
	}
	return q
}

// Every field of an event is written with its declared type, so that the
// history exporter reads each into its column.
func TestEveryEventFieldIsWrittenWithItsType(t *testing.T) {
	logs := plog.NewLogRecordSlice()
	pipelinetest.AppendQueryEvent(logs, fullQueryEvent(), 1)
	pipelinetest.AppendSessionEvent(logs, &events.EndedSession{Session: pipeline.SessionKey{TmID: 1, ID: 2}, Who: events.SessionWho{Database: "d", User: "u",
		Application: pipeline.NullOf(new("a")), ClientAddress: pipeline.NullOf(new("::1")), ClientPort: pipeline.NullOf(new(int64(1))),
		ResourceGroup: pipeline.NullOf(new("g"))},
		Start: 1e18, End: 1e18 + 1e9, EndReason: events.SessionTerminated, SQLState: "57P01", Message: "terminating connection due to administrator command",
		Queries: 3, Known: 1<<pipeline.NumCounters - 1, MemoryPeak: 5, SpillMax: 6, LockWait: 7, VmemPeak: 8,
		Partial: true, PartialCause: events.PartialCause{Hosts: []string{"sdw2"}, Since: 1e18 + 5e8}}, 1)
	for i, fields := range [][]events.Field{events.QueryEventFields, events.SessionEventFields} {
		lr := logs.At(i)
		assert.Equal(t, []string{events.EventQueryEnd, events.EventSessionEnd}[i], lr.EventName())
		assert.Equal(t, len(fields), lr.Attributes().Len(), "an attribute no field declares, or a field written twice")
		for _, f := range fields {
			_, ok := events.Value(lr.Attributes(), f)
			assert.True(t, ok, "%s: %s missing or of another type", lr.EventName(), f.Key)
		}
	}
}

func TestQueryEventFigures(t *testing.T) {
	q := fullQueryEvent()
	logs := plog.NewLogRecordSlice()
	pipelinetest.AppendQueryEvent(logs, q, 1)
	attrs := logs.At(0).Attributes()
	get := func(key string) any {
		for _, f := range events.QueryEventFields {
			if f.Key == key {
				v, ok := events.Value(attrs, f)
				require.True(t, ok, key)
				return v
			}
		}
		t.Fatalf("no field %s", key)
		return nil
	}
	assert.Equal(t, 1.0, get("gpotel.cpu.time.user"), "CPUUser is the first counter: 1 s")
	assert.Equal(t, int64(3e9), get("gpotel.disk.io.read"), "bytes are integers")
	assert.Equal(t, 1.0, get(events.AttrCPUCoordinator))
	assert.Equal(t, 4.0, get(events.AttrCPUSegments))
	assert.Equal(t, 5.0, get(events.AttrDuration))
	assert.Equal(t, q.Segments, get(events.AttrSegments))
	assert.Equal(t, time.Unix(0, q.End).UTC(), get(events.AttrQueryEnd))
	assert.Equal(t, q.End, logs.At(0).Timestamp().AsTime().UnixNano(), "the record's time is the end")
}

// A counter no process reported is absent, not 0 (a host without delay
// accounting measures no delays).
func TestEventLeavesUnmeasuredCountersOut(t *testing.T) {
	q := fullQueryEvent()
	q.Known = 1 << pipeline.CPUUser
	logs := plog.NewLogRecordSlice()
	pipelinetest.AppendQueryEvent(logs, q, 1)
	attrs := logs.At(0).Attributes()
	_, ok := attrs.Get("gpotel.cpu.time.user")
	assert.True(t, ok)
	_, ok = attrs.Get("gpotel.delay.swapin")
	assert.False(t, ok)
}

// A server that numbers no command (PostgreSQL) gives its queries no
// command count: the field is absent, never 0.
func TestQueryEventHasNoCommandCountWhereTheServerNumbersNone(t *testing.T) {
	q := fullQueryEvent()
	q.CommandCount = 0
	logs := plog.NewLogRecordSlice()
	pipelinetest.AppendQueryEvent(logs, q, 1)
	_, ok := logs.At(0).Attributes().Get(pipeline.AttrQueryCommandCount)
	assert.False(t, ok, "a query without a command count carries %s", pipeline.AttrQueryCommandCount)
}

// Column names are SQL identifiers that need no quoting, unique per table.
func TestEventColumnsAreIdentifiers(t *testing.T) {
	for _, fields := range [][]events.Field{events.QueryEventFields, events.SessionEventFields, events.RuleActionEventFields} {
		seen := map[string]bool{}
		keys := map[string]bool{}
		for _, f := range fields {
			assert.False(t, seen[f.Column], "column %s twice", f.Column)
			assert.False(t, keys[f.Key], "key %s twice", f.Key)
			seen[f.Column], keys[f.Key] = true, true
			assert.Equal(t, strings.ToLower(f.Column), f.Column)
			assert.NotContains(t, f.Column, ".")
			assert.LessOrEqual(t, len(f.Column), 63, "PostgreSQL's NAMEDATALEN")
		}
	}
}

// What the processor writes into a finished_query or ended_session
// resource is what the connector's log record and the exporter read back.
func TestEventsRoundTripThroughResourcesAndLogs(t *testing.T) {
	q := fullQueryEvent()
	s := &events.EndedSession{Session: pipeline.SessionKey{TmID: 1, ID: 2}, Who: events.SessionWho{Database: "d", User: "u"},
		Start: 1e18, End: 1e18 + 1e9, EndReason: events.SessionTerminated, SQLState: "57P01", Message: "terminating connection due to administrator " +
			"command", Queries: 3, Known: 1 << pipeline.CPUSystem, MemoryPeak: 5, LockWait: 7,
		SpillMax: 6, VmemPeak: 8 << 20, Partial: true, PartialCause: events.PartialCause{Hosts: []string{"sdw2"}, MoreHosts: 2, Since: 1e18 + 5e8}}
	s.Totals[pipeline.CPUSystem] = 2e9
	rms := pmetric.NewResourceMetricsSlice()
	events.AppendFinishedQuery(rms, q)
	events.AppendEndedSession(rms, s)
	logs := plog.NewLogRecordSlice()
	for i := range rms.Len() {
		require.True(t, events.AppendEventOf(logs, rms.At(i).Resource(), 9))
	}
	require.False(t, events.AppendEventOf(logs, pmetric.NewResourceMetrics().Resource(), 9), "a resource of another kind carries no event")
	require.Equal(t, 2, logs.Len())

	gotQ, err := pipelinetest.DecodeQueryEvent(logs.At(0).Attributes())
	require.NoError(t, err)
	assert.Equal(t, *q, gotQ)
	assert.Equal(t, events.EventQueryEnd, logs.At(0).EventName())
	assert.Equal(t, q.End, int64(logs.At(0).Timestamp()))
	_, hasKind := logs.At(0).Attributes().Get(pipeline.AttrResourceKind)
	assert.False(t, hasKind, "the resource kind is the processor's framing, not the event's")

	gotS, err := pipelinetest.DecodeSessionEvent(logs.At(1).Attributes())
	require.NoError(t, err)
	assert.Equal(t, *s, gotS)
	assert.Equal(t, events.EventSessionEnd, logs.At(1).EventName())
	assert.Equal(t, s.End, int64(logs.At(1).Timestamp()))
}

// A record that lacks a required field is refused with the field's name.
func TestDecodeEventNamesTheMissingField(t *testing.T) {
	logs := plog.NewLogRecordSlice()
	pipelinetest.AppendQueryEvent(logs, fullQueryEvent(), 1)
	logs.At(0).Attributes().PutStr(events.AttrQueryStatus+"x", "")
	logs.At(0).Attributes().Remove(events.AttrDuration)
	_, err := pipelinetest.DecodeQueryEvent(logs.At(0).Attributes())
	require.ErrorContains(t, err, events.AttrDuration)
	logs.At(0).Attributes().PutStr(events.AttrDuration, "5")
	_, err = pipelinetest.DecodeQueryEvent(logs.At(0).Attributes())
	require.ErrorContains(t, err, "not a double")
}

// partial_reason names every cause an event has, and nothing when it is
// complete; partial_hosts counts the hosts it does not name.
func TestPartialReasonNamesEveryCause(t *testing.T) {
	since := time.Date(2026, 11, 26, 3, 0, 1, 0, time.UTC)
	for _, c := range []struct {
		cause                       events.PartialCause
		reason, hosts               string
		partial, hasHosts, hasSince bool
	}{
		{cause: events.PartialCause{}},
		{cause: events.PartialCause{StartedBefore: true, Since: since.UnixNano()}, reason: "started_before", partial: true, hasSince: true},
		{cause: events.PartialCause{Hosts: []string{"sdw1", "sdw2"}, MoreHosts: 4, Since: since.UnixNano()}, reason: "host_silent", hosts: "sdw1,sdw2,+4",
			partial: true, hasHosts: true, hasSince: true},
		{cause: events.PartialCause{StartedBefore: true, Hosts: []string{"sdw3"}, Since: since.UnixNano()}, reason: "started_before,host_silent", hosts: "sdw3",
			partial: true, hasHosts: true, hasSince: true},
	} {
		attrs := pmetric.NewMetrics().ResourceMetrics().AppendEmpty().Resource().Attributes()
		events.PutSessionEvent(attrs, &events.EndedSession{Start: 1, End: 2, Partial: c.cause.Partial(), PartialCause: c.cause})
		reason, ok := attrs.Get(events.AttrPartialReason)
		assert.Equal(t, c.partial, ok, "%+v: partial_reason present", c.cause)
		if ok {
			assert.Equal(t, c.reason, reason.Str(), "%+v", c.cause)
		}
		hosts, ok := attrs.Get(events.AttrPartialHosts)
		assert.Equal(t, c.hasHosts, ok, "%+v: partial_hosts present", c.cause)
		if ok {
			assert.Equal(t, c.hosts, hosts.Str(), "%+v", c.cause)
		}
		at, ok := attrs.Get(events.AttrPartialSince)
		assert.Equal(t, c.hasSince, ok, "%+v: partial_since present", c.cause)
		if ok {
			assert.Equal(t, events.TimeValue(since.UnixNano()), at.Str(), "%+v", c.cause)
		}
	}
}

// A count the server gave below 1 (a command count, a vmem or spill peak
// read from a hostile or broken catalog) is absent, as 0 is: the event
// claims no figure it does not have.
func TestEventCountsBelowOneAreAbsent(t *testing.T) {
	q := fullQueryEvent()
	q.CommandCount, q.VmemPeak = -1, -5
	s := &events.EndedSession{Start: 1, End: 2, SpillMax: -1, VmemPeak: -1}
	attrs := pmetric.NewMetrics().ResourceMetrics().AppendEmpty().Resource().Attributes()
	events.PutQueryEvent(attrs, q)
	for _, key := range []string{pipeline.AttrQueryCommandCount, events.AttrVmemPeak} {
		_, ok := attrs.Get(key)
		assert.False(t, ok, "query event carries %s", key)
	}
	attrs.Clear()
	events.PutSessionEvent(attrs, s)
	for _, key := range []string{events.AttrSpillMax, events.AttrVmemPeak} {
		_, ok := attrs.Get(key)
		assert.False(t, ok, "session event carries %s", key)
	}
}
