// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshot_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

func TestEndingsRoundTrip(t *testing.T) {
	h := snapshot.HostEndings{Host: "mdw", LogReadThrough: 3e18, Endings: []snapshot.Ending{
		{Session: 14, PID: 100, Time: 2e18, SessionStart: 1e18, CommandCount: 5, Severity: "ERROR", SQLState: "42703", Message: "column t1.b does not exist"},
		{Session: 14, PID: 100, Time: 2e18 + 1, Exited: true, ExitCode: 1},
		{Session: 15, PID: 101, Time: 2e18 + 2, Exited: true, Signal: 9},
	}}
	rms := pmetric.NewResourceMetricsSlice()
	snapshot.AppendEndings(rms, snapshot.Scope{Name: "test"}, 7, &h)
	assert.Equal(t, pipeline.KindEndings, pipeline.KindOf(rms.At(0).Resource().Attributes()))
	got, tmID, skipped, err := snapshot.DecodeEndings(rms.At(0))
	require.NoError(t, err)
	assert.Zero(t, skipped)
	assert.Equal(t, int64(7), tmID)
	assert.Equal(t, h, got)
}

// A message a database user chose is bounded, without cutting a character.
func TestEndingMessageIsBounded(t *testing.T) {
	long := strings.Repeat("é", snapshot.MaxEndingMessage)
	cut := snapshot.CutMessage(long)
	assert.LessOrEqual(t, len(cut), snapshot.MaxEndingMessage)
	assert.True(t, utf8.ValidString(cut))
	assert.True(t, strings.HasSuffix(cut, "…"))
	assert.Equal(t, "short", snapshot.CutMessage("short"))
}

// A point without an identity, or neither a record nor an exit, is skipped.
func TestEndingWithoutIdentityIsSkipped(t *testing.T) {
	h := snapshot.HostEndings{Host: "mdw", Endings: []snapshot.Ending{{Session: 1, PID: 2, Time: 3, Severity: "ERROR", SQLState: "22012",
		Message: "division by zero"}}}
	rms := pmetric.NewResourceMetricsSlice()
	snapshot.AppendEndings(rms, snapshot.Scope{Name: "test"}, 7, &h)
	dps := rms.At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints()
	bad := dps.AppendEmpty()
	bad.SetTimestamp(3)
	bad.Attributes().PutInt(pipeline.AttrProcessPID, 2)
	bad.Attributes().PutInt(pipeline.AttrSessionID, 1)
	got, _, skipped, err := snapshot.DecodeEndings(rms.At(0))
	require.Error(t, err)
	assert.Equal(t, 1, skipped)
	assert.Len(t, got.Endings, 1)
}
