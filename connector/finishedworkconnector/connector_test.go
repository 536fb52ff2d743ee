// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package finishedworkconnector

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/gpotel/gpotel/connector/finishedworkconnector/internal/metadata"
	"github.com/gpotel/gpotel/internal/pipeline"
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
	assert.Equal(t, pipeline.EventQueryEnd, q.EventName())
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
	assert.Equal(t, pipeline.EventSessionEnd, s.EventName())
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
