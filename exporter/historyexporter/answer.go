// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.uber.org/zap"
)

// noAnswer is the answer of a database that did not answer (down, out of
// reach, or too slow).
const noAnswer = "no answer"

// answerOf is what the database (or the exporter's own check of what it
// answered) said to a failed attempt; refused is false when it said
// nothing.
func answerOf(err error) (answer string, refused bool) {
	var re *rightError
	if errors.As(err, &re) {
		return re.msg, true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return fmt.Sprintf("%s: %s (SQLSTATE %s)", pgErr.Severity, pgErr.Message, pgErr.Code), true
	}
	return noAnswer, false
}

// noteAnswer counts a refusal, and logs and reports as the exporter's
// status what the database answered when the answer is new: once per
// outage, and again when the answer changes.
func (e *historyExporter) noteAnswer(err error, wait time.Duration) {
	answer, refused := answerOf(err)
	if refused {
		e.telemetry.HistoryDatabaseRefusals.Add(context.Background(), 1)
	}
	e.mu.Lock()
	changed := e.answer != answer
	e.answer = answer
	e.mu.Unlock()
	if !changed {
		e.logger.Debug("History database still answers the same", zap.String("answer", answer), zap.Error(err), zap.Duration("retry_in", wait))
		return
	}
	componentstatus.ReportStatus(e.host, componentstatus.NewRecoverableErrorEvent(fmt.Errorf("history database: %w", err)))
	fields := []zap.Field{zap.String("answer", answer), zap.Error(err), zap.Duration("retry_in", wait)}
	switch {
	case !refused:
		e.logger.Warn("History database does not answer; the events stay queued until it does", fields...)
	case unreachable(err):
		e.logger.Warn("History database refused the exporter for now (starting up, in recovery or full); the events stay queued and it is tried again", fields...)
	default:
		e.logger.Error("History database refused the exporter, which needs a person; the events stay queued and it is tried again", fields...)
	}
}

// noteAnswered closes an outage: the database took an attempt.
func (e *historyExporter) noteAnswered() {
	e.mu.Lock()
	answer, dropped, failed := e.answer, e.droppedInOutage, e.failedAttempts
	e.answer, e.droppedInOutage, e.failedAttempts = "", 0, 0
	e.mu.Unlock()
	if answer == "" && failed == 0 && dropped == 0 {
		return
	}
	e.logger.Info("History database takes events again",
		zap.String("last_answer", answer), zap.Int64("failed_attempts", failed), zap.Int64("events_dropped", dropped))
	if answer != "" {
		componentstatus.ReportStatus(e.host, componentstatus.NewEvent(componentstatus.StatusOK))
	}
}
