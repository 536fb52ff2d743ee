// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// ruleActionsLimit is how many of the latest rule firings each refresh asks
// for: what the marks and the details pages draw on.
const ruleActionsLimit = 500

// ruleActions asks for the workload rules' latest firings, newest first;
// none from a collector that predates gpotel.v1.RuleActions.
func (c *sessionClient) ruleActions(ctx context.Context) ([]*gpotelv1.RuleAction, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := gpotelv1.NewRuleActionsClient(c.conn).ListRuleActions(ctx, &gpotelv1.ListRuleActionsRequest{PageSize: ruleActionsLimit})
	if status.Code(err) == codes.Unimplemented {
		return nil, nil
	}
	if err != nil {
		return nil, c.callError("the rule firings", err)
	}
	return resp.GetRuleActions(), nil
}

// ruleColumn is the sessions' column of the marks, shown only while a
// session has one.
const ruleColumn = "RULE"

// outcomeDone is the outcome of a firing whose action the server did.
const outcomeDone = "done"

// addRuleActions marks each session a rule acted on (its action done) with
// the newest such firing: "cancel runaway-spill".
func addRuleActions(rows []SessionRow, firings []*gpotelv1.RuleAction) {
	acted := map[sessionKey]string{}
	for _, f := range firings { // newest first: the first one stays
		k := sessionKey{f.GetTmId(), f.GetSessId()}
		if _, seen := acted[k]; !seen && f.GetOutcome() == outcomeDone {
			acted[k] = f.GetRuleAction() + " " + f.GetRuleName()
		}
	}
	for i := range rows {
		rows[i].RuleMark = acted[rows[i].Key]
	}
}

// firingsOn are the firings on query q (by its session and its command
// count, else its start), newest first.
func firingsOn(firings []*gpotelv1.RuleAction, q *gpotelv1.FinishedQuery) []*gpotelv1.RuleAction {
	var out []*gpotelv1.RuleAction
	for _, f := range firings {
		if f.GetTmId() != q.GetTmId() || f.GetSessId() != q.GetSessId() {
			continue
		}
		if q.Ccnt != nil && f.Ccnt != nil {
			if f.GetCcnt() == q.GetCcnt() {
				out = append(out, f)
			}
		} else if f.GetQueryStart() != nil && f.GetQueryStart().AsTime().Equal(q.GetQueryStart().AsTime()) {
			out = append(out, f)
		}
	}
	return out
}

// ruleLines say which rules acted on a finished query: the one that ended
// it, then each firing on it (rule, mode, action, outcome, when).
func ruleLines(q *gpotelv1.FinishedQuery, firings []*gpotelv1.RuleAction, width int) []string {
	var out []string
	if q.EndedByRule != nil {
		out = append(out, field("ended by rule", q.GetEndedByRule(), width))
	}
	for _, f := range firingsOn(firings, q) {
		text := fmt.Sprintf("%s (%s): %s, %s at %s", f.GetRuleName(), f.GetRuleMode(), f.GetRuleAction(), f.GetOutcome(), whenText(f.GetFiredAt()))
		if f.OutcomeDetail != nil {
			text += ": " + f.GetOutcomeDetail()
		}
		out = append(out, hanging2("rule", text, width)...)
	}
	return out
}
