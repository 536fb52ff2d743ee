// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package events_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
)

// A rule's firing reads back from its record as it was written: every
// field of the rule table has its accessors.
func TestRuleActionEventRoundTrips(t *testing.T) {
	fired := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC).UnixNano()
	a := &events.RuleAction{Time: fired, Rule: "spill", Mode: "enforce", Action: "move", ResourceGroup: "slow", Outcome: "done",
		OutcomeDetail: "moved", Session: pipeline.SessionKey{TmID: 1700000000, ID: 42}, PID: 4242, CommandCount: 7, QueryStart: fired - 5e9,
		User: "u", Database: "db", Application: "psql", SessionGroup: "default_group", Predicates: []string{"spill > 1GB", "cpu > 10s"},
		Values: []float64{2e9, 12.5}}
	logs := plog.NewLogRecordSlice()
	lr := events.AppendRuleAction(logs, a, 1)
	assert.Equal(t, events.EventRuleAction, lr.EventName())
	assert.Equal(t, len(events.RuleActionEventFields), lr.Attributes().Len(), "every field written once")
	got, err := events.DecodeRuleActionEvent(lr.Attributes())
	require.NoError(t, err)
	assert.Equal(t, *a, got)

	// The optional fields are absent at their zero value and read back so.
	bare := events.RuleAction{Time: fired, Rule: "r", Mode: "observe", Action: "log", Outcome: "observed", Session: a.Session, PID: 1,
		User: "u", Database: "db", Predicates: []string{}, Values: []float64{}}
	lr = events.AppendRuleAction(logs, &bare, 1)
	got, err = events.DecodeRuleActionEvent(lr.Attributes())
	require.NoError(t, err)
	assert.Equal(t, bare, got)
	_, ok := lr.Attributes().Get(pipeline.AttrQueryCommandCount)
	assert.False(t, ok, "a firing on a session without a query carries no command count")
}
