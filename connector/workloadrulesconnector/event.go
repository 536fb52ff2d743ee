// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workloadrulesconnector

import (
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/rulefirings"
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
	ra := events.RuleAction{Time: at.UnixNano(), Rule: r.name, Mode: r.mode(), Action: r.action.String(), ResourceGroup: r.group,
		Outcome: outcome, OutcomeDetail: detail, Session: t.key.session, PID: t.pid, CommandCount: t.key.ccnt,
		User: t.user, Database: t.database, Application: t.application, SessionGroup: t.group,
		Predicates: make([]string, len(r.predicates)), Values: f.values[:len(r.predicates)]}
	if !t.queryStart.IsZero() {
		ra.QueryStart = t.queryStart.UnixNano()
	}
	for i := range r.predicates {
		ra.Predicates[i] = r.predicates[i].text
	}
	rulefirings.Publish(&ra)
	lr := events.AppendRuleAction(lrs, &ra, observed)
	if outcome == outcomeFailed {
		lr.SetSeverityNumber(plog.SeverityNumberWarn)
	}
	lr.Body().SetStr(fmt.Sprintf("rule %q (%s): %s on session {sess_id %d, tm_id %d} pid %d: %s",
		r.name, r.mode(), r.action, t.key.session.ID, t.key.session.TmID, t.pid, outcome))
}
