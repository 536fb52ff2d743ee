// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package finishedworkconnector

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/connector/finishedworkconnector/internal/metadata"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
)

// scopeName is the instrumentation scope of the events.
const scopeName = "github.com/gpotel/gpotel/connector/finishedworkconnector"

// finishedWork writes one log record per finished_query and ended_session
// resource of the processor's output; everything else it reads past.
type finishedWork struct {
	component.StartFunc
	component.ShutdownFunc
	next      consumer.Logs
	telemetry *metadata.TelemetryBuilder
}

func (*finishedWork) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

// ConsumeMetrics hands on the events of one processor output in one call,
// under a resource naming the coordinator and the dialect of its snapshot.
func (c *finishedWork) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	var logs plog.Logs
	var records plog.LogRecordSlice
	observed := pcommon.NewTimestampFromTime(time.Now())
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		res := rms.At(i).Resource()
		if k := pipeline.KindOf(res.Attributes()); k != pipeline.KindFinishedQuery && k != pipeline.KindEndedSession {
			continue
		}
		if records == (plog.LogRecordSlice{}) {
			logs = plog.NewLogs()
			rl := logs.ResourceLogs().AppendEmpty()
			copySnapshotIdentity(rms, rl.Resource().Attributes())
			sl := rl.ScopeLogs().AppendEmpty()
			sl.Scope().SetName(scopeName)
			records = sl.LogRecords()
		}
		events.AppendEventOf(records, res, observed)
	}
	if records == (plog.LogRecordSlice{}) {
		return nil
	}
	c.telemetry.FinishedworkEvents.Add(ctx, int64(records.Len()))
	return c.next.ConsumeLogs(ctx, logs)
}

// copySnapshotIdentity puts the snapshot resource's coordinator host and
// dialect on the events' resource.
func copySnapshotIdentity(rms pmetric.ResourceMetricsSlice, to pcommon.Map) {
	for i := range rms.Len() {
		attrs := rms.At(i).Resource().Attributes()
		if pipeline.KindOf(attrs) != pipeline.KindSnapshot {
			continue
		}
		for _, k := range []string{pipeline.AttrHostName, pipeline.AttrDialect} {
			if v, ok := attrs.Get(k); ok {
				v.CopyTo(to.PutEmpty(k))
			}
		}
		return
	}
}
