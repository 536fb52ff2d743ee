// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package events

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// EventRuleAction is the event of a workload rule's firing
// (connector/workloadrulesconnector); the history exporter writes it into
// rule_actions, one column per field of RuleActionEventFields.
const EventRuleAction = "gpotel.rule.action"

// The rule event's own attributes; its session's key and who it was use
// the contract's names.
const (
	AttrRuleTime          = "gpotel.rule.time"
	AttrRuleName          = "gpotel.rule.name"
	AttrRuleMode          = "gpotel.rule.mode"
	AttrRuleAction        = "gpotel.rule.action"
	AttrRuleResourceGroup = "gpotel.rule.resource_group"
	AttrRulePredicates    = "gpotel.rule.predicates"
	AttrRuleValues        = "gpotel.rule.values"
	AttrRuleOutcome       = "gpotel.rule.outcome"
	AttrRuleOutcomeDetail = "gpotel.rule.outcome.detail"
)

// ruleActionEvent is the rule event's table, on RuleAction. Its key is the
// rule, the query's key and the firing's time: a rule fires once per
// query, and a replayed firing is the same row.
var ruleActionEvent = func() eventTable[RuleAction] {
	type a = RuleAction
	t := eventTable[a]{
		timeAt(Field{Key: AttrRuleTime, Column: "fired_at", Identity: true, Brief: "the time of the snapshot the rule fired on"},
			func(a *a) *int64 { return &a.Time }),
		always(Field{Key: AttrRuleName, Column: "rule_name", Identity: true, Brief: "the rule's name"}, func(a *a) *string { return &a.Rule }),
		always(Field{Key: AttrRuleMode, Column: "rule_mode", Brief: "observe or enforce"}, func(a *a) *string { return &a.Mode }),
		always(Field{Key: AttrRuleAction, Column: "rule_action", Brief: "log, move, cancel or terminate"}, func(a *a) *string { return &a.Action }),
		unlessZero(Field{Key: AttrRuleResourceGroup, Column: "rule_resource_group", Brief: "where move moves the session"},
			func(a *a) *string { return &a.ResourceGroup }),
		always(Field{Key: AttrRuleOutcome, Column: "outcome", Brief: "observed (observe mode), logged, done, failed or superseded"},
			func(a *a) *string { return &a.Outcome }),
		unlessZero(Field{Key: AttrRuleOutcomeDetail, Column: "outcome_detail", Brief: "why it failed, what observe mode " +
			"would have done, or the rule that acted instead"},
			func(a *a) *string { return &a.OutcomeDetail }),
	}
	t = append(t, sessionKeyFields(func(a *a) *pipeline.SessionKey { return &a.Session }, "the session")...)
	return append(t,
		unlessZero(Field{Key: pipeline.AttrQueryCommandCount, Column: "ccnt", Identity: true, Brief: "the running query's command count; " +
			"absent where the server numbers none"},
			func(a *a) *int64 { return &a.CommandCount }),
		timeAt(Field{Key: pipeline.AttrQueryStart, Column: "query_start", Identity: true, Optional: true, Brief: "query_start of the running query; " +
			"absent for a session that runs none"},
			func(a *a) *int64 { return &a.QueryStart }),
		always(Field{Key: pipeline.AttrSessionPID, Column: "pid", Brief: "the coordinator backend's pid"}, func(a *a) *int64 { return &a.PID }),
		always(Field{Key: pipeline.AttrSessionUser, Column: "username", Brief: "usename"}, func(a *a) *string { return &a.User }),
		always(Field{Key: pipeline.AttrDBNamespace, Column: "database", Brief: "datname"}, func(a *a) *string { return &a.Database }),
		unlessZero(Field{Key: AttrApplication, Column: "application", Brief: "application_name"},
			func(a *a) *string { return &a.Application }),
		unlessZero(Field{Key: AttrResourceGroup, Column: "resource_group", Brief: "rsgname (Greenplum)"},
			func(a *a) *string { return &a.SessionGroup }),
		always(Field{Key: AttrRulePredicates, Column: "predicates", Brief: "each predicate as configured"},
			func(a *a) *[]string { return &a.Predicates }),
		always(Field{Key: AttrRuleValues, Column: "predicate_values", Brief: "each predicate's figure when it fired, in its order, " +
			"in seconds, bytes, bytes per second or the number"},
			func(a *a) *[]float64 { return &a.Values }),
	)
}()

// RuleActionEventFields are the fields of a rule's firing, in the order
// of rule_actions' columns.
var RuleActionEventFields = ruleActionEvent.fields()

// RuleAction is one firing of a rule.
type RuleAction struct {
	Time                      int64 // unix ns: the snapshot's
	Rule, Mode, Action        string
	ResourceGroup             string // "": not a move
	Outcome, OutcomeDetail    string // OutcomeDetail "": none
	Session                   pipeline.SessionKey
	PID                       int64
	CommandCount              int64 // 0: the server numbers none
	QueryStart                int64 // unix ns; 0: no query runs
	User, Database            string
	Application, SessionGroup string // "": none
	Predicates                []string
	Values                    []float64 // Predicates' figures, in order
}

// AppendRuleAction appends a's event to lrs, at its time.
func AppendRuleAction(lrs plog.LogRecordSlice, a *RuleAction, observed pcommon.Timestamp) plog.LogRecord {
	lr := newEvent(lrs, EventRuleAction, a.Time, observed)
	PutRuleActionEvent(lr.Attributes(), a)
	return lr
}

// PutRuleActionEvent writes every field of RuleActionEventFields that a has
// into attrs.
func PutRuleActionEvent(attrs pcommon.Map, a *RuleAction) { ruleActionEvent.put(attrs, a) }

// DecodeRuleActionEvent reads a rule event's attributes back; an error
// names the first field that is required and missing or of another type.
func DecodeRuleActionEvent(attrs pcommon.Map) (RuleAction, error) {
	return ruleActionEvent.decode(attrs)
}
