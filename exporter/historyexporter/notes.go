// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
)

// noteFailure counts a failed write and notes what the database answered.
func (e *historyExporter) noteFailure(err error, wait time.Duration) {
	e.telemetry.HistoryWritesFailed.Add(context.Background(), 1)
	e.mu.Lock()
	e.failedAttempts++
	e.mu.Unlock()
	e.noteAnswer(err, wait)
}

// noteDropped counts dropped events; queue_full drops are logged once
// per outage, the others once per reason.
func (e *historyExporter) noteDropped(ctx context.Context, reason string, n int64) {
	e.telemetry.HistoryEventsDropped.Add(ctx, n, metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reason))))
	e.mu.Lock()
	first := false
	if reason == reasonQueueFull {
		first = e.droppedInOutage == 0
		e.droppedInOutage += n
	} else {
		first = !e.rejectionLogged[reason]
		e.rejectionLogged[reason] = true
	}
	e.mu.Unlock()
	if first {
		e.logger.Warn("History events dropped", zap.String("reason", reason), zap.Int64("events", n),
			zap.Int64("queue_max_bytes", e.cfg.Queue.MaxBytes))
	}
}

// noteReplaced logs, once, that characters were replaced.
func (e *historyExporter) noteReplaced(n int64) {
	e.mu.Lock()
	first := !e.replacedLogged
	e.replacedLogged = true
	e.mu.Unlock()
	if first {
		e.logger.Warn("History text holds characters the database's encoding cannot: each is written as '?' (logged once; history_characters_replaced counts them)",
			zap.String("server_encoding", e.store.charset.name), zap.Int64("characters", n))
	}
}

// noteRejected counts events a batch left out, logging each reason once
// with its first explanation.
func (e *historyExporter) noteRejected(ctx context.Context, reason string, n int64, why string) {
	e.telemetry.HistoryEventsDropped.Add(ctx, n, metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reason))))
	e.mu.Lock()
	first := !e.rejectionLogged[reason]
	e.rejectionLogged[reason] = true
	e.mu.Unlock()
	if first {
		e.logger.Warn("History events not written (logged once per reason; history_events_dropped counts them)",
			zap.String("reason", reason), zap.Int64("events", n), zap.String("first", why))
	}
}
