// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
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

// RuleActionEventFields are the fields of a rule's firing. Its key is the
// rule, the query's key and the firing's time: a rule fires once per
// query, and a replayed firing is the same row.
var RuleActionEventFields = []EventField{
	{Key: AttrRuleTime, Column: "fired_at", Type: EventTime, Identity: true, Brief: "the time of the snapshot the rule fired on"},
	{Key: AttrRuleName, Column: "rule_name", Type: EventString, Identity: true, Brief: "the rule's name"},
	{Key: AttrRuleMode, Column: "rule_mode", Type: EventString, Brief: "observe or enforce"},
	{Key: AttrRuleAction, Column: "rule_action", Type: EventString, Brief: "log, move, cancel or terminate"},
	{Key: AttrRuleResourceGroup, Column: "rule_resource_group", Type: EventString, Optional: true, Brief: "where move moves the session"},
	{Key: AttrRuleOutcome, Column: "outcome", Type: EventString, Brief: "observed (observe mode), logged, done, failed or superseded"},
	{Key: AttrRuleOutcomeDetail, Column: "outcome_detail", Type: EventString, Optional: true, Brief: "why it failed, what observe mode " +
		"would have done, or the rule that acted instead"},
	{Key: AttrTmID, Column: "tm_id", Type: EventInt, Identity: true, Brief: "the coordinator's start (yagpcc's tm_id)"},
	{Key: AttrSessionID, Column: "sess_id", Type: EventInt, Identity: true, Brief: "sess_id of the session (the leader's pid on PostgreSQL)"},
	{Key: AttrQueryCommandCount, Column: "ccnt", Type: EventInt, Identity: true, Optional: true, Brief: "the running query's command count; " +
		"absent where the server numbers none"},
	{Key: AttrQueryStart, Column: "query_start", Type: EventTime, Identity: true, Optional: true, Brief: "query_start of the running query; " +
		"absent for a session that runs none"},
	{Key: AttrSessionPID, Column: "pid", Type: EventInt, Brief: "the coordinator backend's pid"},
	{Key: AttrSessionUser, Column: "username", Type: EventString, Brief: "usename"},
	{Key: AttrDBNamespace, Column: "database", Type: EventString, Brief: "datname"},
	{Key: AttrEventApplication, Column: "application", Type: EventString, Optional: true, Brief: "application_name"},
	{Key: AttrEventResourceGroup, Column: "resource_group", Type: EventString, Optional: true, Brief: "rsgname (Greenplum)"},
	{Key: AttrRulePredicates, Column: "predicates", Type: EventStrings, Brief: "each predicate as configured"},
	{Key: AttrRuleValues, Column: "predicate_values", Type: EventDoubles, Brief: "each predicate's figure when it fired, in its order, " +
		"in seconds, bytes, bytes per second or the number"},
}

// RuleAction is one firing of a rule.
type RuleAction struct {
	Time                      int64 // unix ns: the snapshot's
	Rule, Mode, Action        string
	ResourceGroup             string // "": not a move
	Outcome, OutcomeDetail    string // OutcomeDetail "": none
	Session                   SessionKey
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
func PutRuleActionEvent(attrs pcommon.Map, a *RuleAction) {
	for _, f := range RuleActionEventFields {
		switch f.Key {
		case AttrRuleTime:
			attrs.PutStr(f.Key, EventTimeValue(a.Time))
		case AttrRuleName:
			attrs.PutStr(f.Key, a.Rule)
		case AttrRuleMode:
			attrs.PutStr(f.Key, a.Mode)
		case AttrRuleAction:
			attrs.PutStr(f.Key, a.Action)
		case AttrRuleResourceGroup:
			putNonEmpty(attrs, f.Key, a.ResourceGroup)
		case AttrRuleOutcome:
			attrs.PutStr(f.Key, a.Outcome)
		case AttrRuleOutcomeDetail:
			putNonEmpty(attrs, f.Key, a.OutcomeDetail)
		case AttrTmID, AttrSessionID:
			putSessionKey(attrs, f.Key, a.Session)
		case AttrQueryCommandCount:
			if a.CommandCount != 0 {
				attrs.PutInt(f.Key, a.CommandCount)
			}
		case AttrQueryStart:
			if a.QueryStart != 0 {
				attrs.PutStr(f.Key, EventTimeValue(a.QueryStart))
			}
		case AttrSessionPID:
			attrs.PutInt(f.Key, a.PID)
		case AttrSessionUser:
			attrs.PutStr(f.Key, a.User)
		case AttrDBNamespace:
			attrs.PutStr(f.Key, a.Database)
		case AttrEventApplication:
			putNonEmpty(attrs, f.Key, a.Application)
		case AttrEventResourceGroup:
			putNonEmpty(attrs, f.Key, a.SessionGroup)
		case AttrRulePredicates:
			sl := attrs.PutEmptySlice(f.Key)
			sl.EnsureCapacity(len(a.Predicates))
			for _, p := range a.Predicates {
				sl.AppendEmpty().SetStr(p)
			}
		case AttrRuleValues:
			sl := attrs.PutEmptySlice(f.Key)
			sl.EnsureCapacity(len(a.Values))
			for _, v := range a.Values {
				sl.AppendEmpty().SetDouble(v)
			}
		default:
			panic(fmt.Sprintf("pipeline: rule event field %s has no value", f.Key))
		}
	}
}
