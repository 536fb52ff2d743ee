// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipelinetest

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline/events"
)

// AppendQueryEvent writes q as one log record of lrs: event name, the
// end as its time, every field of pipeline.QueryEventFields it has.
func AppendQueryEvent(lrs plog.LogRecordSlice, q *events.FinishedQuery, observed pcommon.Timestamp) {
	rms := pmetric.NewResourceMetricsSlice()
	events.AppendFinishedQuery(rms, q)
	events.AppendEventOf(lrs, rms.At(0).Resource(), observed)
}

// AppendSessionEvent writes s as one log record of lrs.
func AppendSessionEvent(lrs plog.LogRecordSlice, s *events.EndedSession, observed pcommon.Timestamp) {
	rms := pmetric.NewResourceMetricsSlice()
	events.AppendEndedSession(rms, s)
	events.AppendEventOf(lrs, rms.At(0).Resource(), observed)
}

// DecodeQueryEvent reads a query event's attributes back
// (pipeline.DecodeQueryEvent).
func DecodeQueryEvent(attrs pcommon.Map) (events.FinishedQuery, error) {
	return events.DecodeQueryEvent(attrs)
}

// DecodeSessionEvent reads a session event's attributes back.
func DecodeSessionEvent(attrs pcommon.Map) (events.EndedSession, error) {
	return events.DecodeSessionEvent(attrs)
}
