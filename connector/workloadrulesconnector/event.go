// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workloadrulesconnector

import (
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// EventRuleAction is the event name of a rule's firing.
const EventRuleAction = "gpotel.rule.action"

// The event's own attributes; the session's key and who it was use the
// contract's names (internal/pipeline).
const (
	AttrRuleName          = "gpotel.rule.name"
	AttrRuleMode          = "gpotel.rule.mode"
	AttrRuleAction        = "gpotel.rule.action"
	AttrRuleResourceGroup = "gpotel.rule.resource_group"
	AttrRulePredicates    = "gpotel.rule.predicates" // each predicate as configured
	AttrRuleValues        = "gpotel.rule.values"     // each predicate's figure when it fired, in the figure's unit
	AttrRuleOutcome       = "gpotel.rule.outcome"
	AttrRuleOutcomeDetail = "gpotel.rule.outcome.detail"
)

// The outcomes of a firing (the telemetry's outcome attribute).
const (
	outcomeObserved   = "observed"
	outcomeLogged     = "logged"
	outcomeDone       = "done"
	outcomeFailed     = "failed"
	outcomeSuperseded = "superseded"
)

// appendEvent writes one gpotel.rule.action record of a firing at the
// snapshot's time.
func appendEvent(lrs plog.LogRecordSlice, f *firing, outcome, detail string, at time.Time, observed pcommon.Timestamp) {
	r, t := f.rule, f.target
	lr := lrs.AppendEmpty()
	lr.SetEventName(EventRuleAction)
	lr.SetTimestamp(pcommon.NewTimestampFromTime(at))
	lr.SetObservedTimestamp(observed)
	lr.SetSeverityNumber(plog.SeverityNumberInfo)
	if outcome == outcomeFailed {
		lr.SetSeverityNumber(plog.SeverityNumberWarn)
	}
	lr.Body().SetStr(fmt.Sprintf("rule %q (%s): %s on session {sess_id %d, tm_id %d} pid %d: %s",
		r.name, r.mode(), r.action, t.key.session.ID, t.key.session.TmID, t.pid, outcome))
	a := lr.Attributes()
	a.PutStr(AttrRuleName, r.name)
	a.PutStr(AttrRuleMode, r.mode())
	a.PutStr(AttrRuleAction, r.action.String())
	if r.group != "" {
		a.PutStr(AttrRuleResourceGroup, r.group)
	}
	a.PutStr(AttrRuleOutcome, outcome)
	if detail != "" {
		a.PutStr(AttrRuleOutcomeDetail, detail)
	}
	a.PutInt(pipeline.AttrTmID, t.key.session.TmID)
	a.PutInt(pipeline.AttrSessionID, t.key.session.ID)
	a.PutInt(pipeline.AttrSessionPID, t.pid)
	if t.key.ccnt != 0 {
		a.PutInt(pipeline.AttrQueryCommandCount, t.key.ccnt)
	}
	if !t.queryStart.IsZero() {
		a.PutStr(pipeline.AttrQueryStart, t.queryStart.UTC().Format(time.RFC3339Nano))
	}
	a.PutStr(pipeline.AttrSessionUser, t.user)
	a.PutStr(pipeline.AttrDBNamespace, t.database)
	if t.application != "" {
		a.PutStr(pipeline.AttrEventApplication, t.application)
	}
	if t.group != "" {
		a.PutStr(pipeline.AttrEventResourceGroup, t.group)
	}
	preds := a.PutEmptySlice(AttrRulePredicates)
	values := a.PutEmptySlice(AttrRuleValues)
	for i := range r.predicates {
		preds.AppendEmpty().SetStr(r.predicates[i].text)
		values.AppendEmpty().SetDouble(f.values[i])
	}
}
