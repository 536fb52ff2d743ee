// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipelinetest

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// AppendQueryEvent writes q as one log record of lrs: event name, the
// end as its time, every field of pipeline.QueryEventFields it has.
func AppendQueryEvent(lrs plog.LogRecordSlice, q *pipeline.FinishedQuery, observed pcommon.Timestamp) {
	rms := pmetric.NewResourceMetricsSlice()
	pipeline.AppendFinishedQuery(rms, q)
	pipeline.AppendEventOf(lrs, rms.At(0).Resource(), observed)
}

// AppendSessionEvent writes s as one log record of lrs.
func AppendSessionEvent(lrs plog.LogRecordSlice, s *pipeline.EndedSession, observed pcommon.Timestamp) {
	rms := pmetric.NewResourceMetricsSlice()
	pipeline.AppendEndedSession(rms, s)
	pipeline.AppendEventOf(lrs, rms.At(0).Resource(), observed)
}

// DecodeQueryEvent reads a query event's attributes back
// (pipeline.DecodeQueryEvent).
func DecodeQueryEvent(attrs pcommon.Map) (pipeline.FinishedQuery, error) {
	return pipeline.DecodeQueryEvent(attrs)
}

// DecodeSessionEvent reads a session event's attributes back.
func DecodeSessionEvent(attrs pcommon.Map) (pipeline.EndedSession, error) {
	return pipeline.DecodeSessionEvent(attrs)
}
