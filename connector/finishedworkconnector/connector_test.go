// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package finishedworkconnector

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/gpotel/gpotel/connector/finishedworkconnector/internal/metadata"
	"github.com/gpotel/gpotel/connector/finishedworkconnector/internal/metadatatest"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor"
)

var epoch = time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return epoch.Add(time.Duration(sec * float64(time.Second))) }

// snapshotAt is session 7 with one backend on sdw1 that used cpu seconds,
// running a query that started at 0 until idleAt (0: still running), or
// gone when gone is true.
func snapshotAt(sec, cpu, idleAt float64, gone bool) pipelinetest.Snapshot {
	s := pipelinetest.Snapshot{Time: at(sec), TmID: 1700000000, Coordinator: "mdw",
		Hosts: []pipelinetest.Host{{Name: "sdw1", Up: true}}}
	if !gone {
		s.Processes = []pipelinetest.Process{{Host: "sdw1", Segment: 0, Session: 7, PID: 4242, Created: at(-1), CPUUser: cpu}}
		ses := pipelinetest.Session{ID: 7, PID: 1007, DB: "sales", User: "alice", State: "active", QueryStart: at(0),
			BackendStart: at(-1), Query: "select 1"}
		if idleAt != 0 {
			ses.State, ses.StateChange = "idle", at(idleAt)
		}
		s.Sessions = []pipelinetest.Session{ses}
	}
	return s
}

// The processor's output through the connector: one event per ended query
// and session, under the snapshot's coordinator and dialect, and nothing
// for a snapshot in which nothing ended.
func TestOneEventPerEndedQueryAndSession(t *testing.T) {
	logs := new(consumertest.LogsSink)
	conn, err := NewFactory().CreateMetricsToLogs(context.Background(), connectortest.NewNopSettings(metadata.Type), createDefaultConfig(), logs)
	require.NoError(t, err)
	pcfg := snapshotdiffprocessor.NewFactory().CreateDefaultConfig().(*snapshotdiffprocessor.Config)
	pcfg.Queries.Text = true
	proc, err := snapshotdiffprocessor.NewFactory().CreateMetrics(context.Background(),
		processortest.NewNopSettings(snapshotdiffprocessor.NewFactory().Type()), pcfg, conn)
	require.NoError(t, err)

	snaps := []pipelinetest.Snapshot{
		snapshotAt(1, 0.2, 0, false), snapshotAt(2, 1, 0, false),
		snapshotAt(3, 1.5, 2.5, false), // the query ended at 2.5
		snapshotAt(4, 1.5, 2.5, false), // its event
		snapshotAt(5, 0, 0, true),      // the session left
		snapshotAt(6, 0, 0, true),      // its event
		snapshotAt(7, 0, 0, true),
	}
	wantEvents := []int{0, 0, 0, 1, 1, 2, 2}
	for i, s := range snaps {
		for _, md := range s.Batches() {
			require.NoError(t, proc.ConsumeMetrics(context.Background(), md))
		}
		assert.Equal(t, wantEvents[i], logs.LogRecordCount(), "events after snapshot %d", i)
	}
	all := logs.AllLogs()
	require.Len(t, all, 2, "one ConsumeLogs per output that has events")

	res := all[0].ResourceLogs().At(0).Resource().Attributes().AsRaw()
	assert.Equal(t, "mdw", res[pipeline.AttrHostName])
	assert.Equal(t, "gp6", res[pipeline.AttrDialect])

	q := all[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	assert.Equal(t, events.EventQueryEnd, q.EventName())
	assert.Equal(t, at(2.5), q.Timestamp().AsTime())
	fq, err := pipelinetest.DecodeQueryEvent(q.Attributes())
	require.NoError(t, err)
	assert.Equal(t, "sales", fq.Who.Database)
	assert.Equal(t, "alice", fq.Who.User)
	require.NotNil(t, fq.Text)
	assert.Equal(t, "select 1", *fq.Text)
	assert.InDelta(t, 2.5, float64(fq.End-fq.Start)/1e9, 1e-9)
	// The backend used 1.5 s, 0.2 of it before the first snapshot (the
	// query started at 0, before gpotel saw the session: partial).
	assert.True(t, fq.Partial)
	assert.InDelta(t, 1.3, float64(fq.Totals[pipeline.CPUUser])/1e9, 1e-6)

	s := all[1].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	assert.Equal(t, events.EventSessionEnd, s.EventName())
	es, err := pipelinetest.DecodeSessionEvent(s.Attributes())
	require.NoError(t, err)
	assert.Equal(t, int64(1), es.Queries)
	assert.InDelta(t, 1.5, float64(es.Totals[pipeline.CPUUser])/1e9, 1e-6, "the session's lifetime: the backend's whole CPU")
	assert.Equal(t, at(-1).UnixNano(), es.Start)
	assert.Equal(t, at(5).UnixNano(), es.End)
}

// Only the two event kinds become records.
func TestOtherResourcesAreNoEvents(t *testing.T) {
	logs := new(consumertest.LogsSink)
	conn, err := NewFactory().CreateMetricsToLogs(context.Background(), connectortest.NewNopSettings(metadata.Type), createDefaultConfig(), logs)
	require.NoError(t, err)
	for _, md := range snapshotAt(1, 1, 0, false).Batches() {
		require.NoError(t, conn.ConsumeMetrics(context.Background(), md))
	}
	assert.Zero(t, logs.LogRecordCount())
}

// The events of one processor output go on in one batch of logs, each
// observed when the connector read it, and the connector counts them.
func TestEventsOfOneOutputGoInOneBatchAndAreCounted(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	set := connectortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tt.NewTelemetrySettings()
	logs := new(consumertest.LogsSink)
	conn, err := NewFactory().CreateMetricsToLogs(context.Background(), set, createDefaultConfig(), logs)
	require.NoError(t, err)

	md := pmetric.NewMetrics()
	rms := md.ResourceMetrics()
	snapshot := rms.AppendEmpty().Resource().Attributes()
	snapshot.PutStr(pipeline.AttrResourceKind, pipeline.KindSnapshot.String())
	snapshot.PutStr(pipeline.AttrHostName, "mdw")
	snapshot.PutStr(pipeline.AttrDialect, "gp6")
	key := pipeline.SessionKey{TmID: 1700000000, ID: 7}
	events.AppendFinishedQuery(rms, &events.FinishedQuery{Session: key, Start: at(1).UnixNano(), End: at(2).UnixNano(), Status: events.QueryCompleted})
	events.AppendEndedSession(rms, &events.EndedSession{Session: key, Start: at(0).UnixNano(), End: at(3).UnixNano()})
	before := time.Now()
	require.NoError(t, conn.ConsumeMetrics(context.Background(), md))

	all := logs.AllLogs()
	require.Len(t, all, 1, "one ConsumeLogs for the output")
	records := all[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
	require.Equal(t, 2, records.Len())
	assert.Equal(t, events.EventQueryEnd, records.At(0).EventName())
	assert.Equal(t, at(2), records.At(0).Timestamp().AsTime())
	assert.Equal(t, events.EventSessionEnd, records.At(1).EventName())
	assert.Equal(t, at(3), records.At(1).Timestamp().AsTime())
	for i := range records.Len() {
		assert.False(t, records.At(i).ObservedTimestamp().AsTime().Before(before.Truncate(time.Microsecond)), "record %d observed before it was read", i)
	}
	metadatatest.AssertEqualFinishedworkEvents(t, tt, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
}
