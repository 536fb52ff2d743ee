// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import "testing"

func TestQueryMetricNamesTheSessionFiguresSiblingAndBack(t *testing.T) {
	for _, session := range []string{MetricSessionCPUTime, MetricSessionDiskIO, MetricSessionSkewRatio, MetricSessionPartial} {
		q := QueryMetric(session)
		back, ok := SessionMetricOfQuery(q)
		if !ok || back != session {
			t.Errorf("%s → %s → %s (%v), want the session name back", session, q, back, ok)
		}
	}
	if got := QueryMetric(MetricSessionCPUTime); got != "gpotel.query.cpu.time" {
		t.Errorf("QueryMetric(cpu.time) = %s", got)
	}
	if _, ok := SessionMetricOfQuery(MetricSessionCPUTime); ok {
		t.Error("a session metric read as a query metric")
	}
}
