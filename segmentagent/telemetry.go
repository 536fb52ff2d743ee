// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"context"
	"errors"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Names of the agent's own metrics. They describe the agent, not the
// database, so they are not part of the pipeline contract (internal/pipeline).
const (
	meterName = "github.com/gpotel/gpotel/segmentagent"

	MetricRequests        = "gpotel.agent.requests"
	MetricProcesses       = "gpotel.agent.processes"
	MetricReadErrors      = "gpotel.agent.read.errors"
	MetricRequestDuration = "gpotel.agent.request.duration"

	// AttrOutcome is on requests (ok, partial, failed, invalid, cancelled) and
	// on processes (answered, vanished, denied, failed, invalid: a pid that
	// names no process on this host, dropped from its request).
	AttrOutcome = "outcome"
	// AttrFile names the /proc/<pid> file a read error was about.
	AttrFile = "file"
)

// Request outcomes.
const (
	requestOK        = "ok"
	requestPartial   = "partial"
	requestFailed    = "failed"
	requestInvalid   = "invalid"
	requestCancelled = "cancelled"
)

type telemetry struct {
	requests   metric.Int64Counter
	processes  metric.Int64Counter
	readErrors metric.Int64Counter
	duration   metric.Float64Histogram
}

func newTelemetry(mp metric.MeterProvider) (*telemetry, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter(meterName)
	var t telemetry
	var errs [4]error
	t.requests, errs[0] = m.Int64Counter(MetricRequests, metric.WithUnit("{request}"),
		metric.WithDescription("GetPidProcStat calls, by outcome."))
	t.processes, errs[1] = m.Int64Counter(MetricProcesses, metric.WithUnit("{process}"),
		metric.WithDescription("Distinct processes requested, by what became of them."))
	t.readErrors, errs[2] = m.Int64Counter(MetricReadErrors, metric.WithUnit("{error}"),
		metric.WithDescription("Files of existing processes that could not be read or parsed, by file."))
	t.duration, errs[3] = m.Float64Histogram(MetricRequestDuration, metric.WithUnit("s"),
		metric.WithDescription("Time to read every process of one GetPidProcStat call."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
	return &t, errors.Join(errs[:]...)
}

var (
	processOutcomeAttrs = [...]metric.AddOption{
		metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrOutcome, "answered"))),
		metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrOutcome, "vanished"))),
		metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrOutcome, "denied"))),
		metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrOutcome, "failed"))),
		metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrOutcome, "invalid"))),
	}
)

func (t *telemetry) record(ctx context.Context, outcome string, seconds float64, counts *counts) {
	attrs := metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrOutcome, outcome)))
	t.requests.Add(ctx, 1, attrs)
	t.duration.Record(ctx, seconds, metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrOutcome, outcome))))
	if counts == nil {
		return
	}
	for i, n := range [...]int64{counts.answered, counts.vanished, counts.denied, counts.failed, counts.invalid} {
		if n > 0 {
			t.processes.Add(ctx, n, processOutcomeAttrs[i])
		}
	}
	for file, n := range counts.unreadByFile {
		t.readErrors.Add(ctx, n, metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrFile, file))))
	}
}

// unreadFile is the file an Unread entry ("io: reason") is about.
func unreadFile(entry string) string {
	if file, _, ok := strings.Cut(entry, ":"); ok {
		return file
	}
	return "unknown"
}
