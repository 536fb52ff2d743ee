// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// TestSessionsViewMarksTheSessionsARuleActedOn: a session a rule's action
// was done on shows the action and the rule; one a rule only observed does
// not.
func TestSessionsViewMarksTheSessionsARuleActedOn(t *testing.T) {
	f := twoHostsOfTwoCPUs()
	fired := timestamppb.New(snapshotTime)
	f.firings = []*gpotelv1.RuleAction{
		{Number: 2, TmId: 1700000000, SessId: 12, RuleName: "runaway-spill", RuleMode: "enforce", RuleAction: "cancel", Outcome: "done", FiredAt: fired},
		{Number: 1, TmId: 1700000000, SessId: 11, RuleName: "cpu-hog", RuleMode: "observe", RuleAction: "terminate", Outcome: "observed", FiredAt: fired},
	}
	h := newTUI(t, f, 220, 30)
	if l := h.line(" bob "); !strings.Contains(l, "cancel runaway") {
		t.Errorf("the session the rule cancelled is not marked: %q\n%s", l, h.screen())
	}
	if l := h.line(" alice "); strings.Contains(l, "cpu-hog") {
		t.Errorf("a session a rule only observed is marked: %q", l)
	}
}

// TestFinishedQueryDetailsNameTheRuleThatActed: a finished query's page
// names the rule that ended it, and each firing on it (rule, mode, action,
// outcome, when); a firing on another query of its session is not its.
func TestFinishedQueryDetailsNameTheRuleThatActed(t *testing.T) {
	q := &gpotelv1.FinishedQuery{TmId: 1, SessId: 41, Ccnt: proto.Int64(3), Username: "dave", Database: "sales",
		QueryStart: endedAgo(time.Minute), QueryEnd: endedAgo(30 * time.Second), Duration: 30, Status: "cancelled",
		Sqlstate: proto.String("57014"), CancelReason: proto.String("user_request"), EndedByRule: proto.String("runaway-spill")}
	f := twoHostsOfTwoCPUs()
	f.finished = []*gpotelv1.FinishedQuery{q}
	f.firings = []*gpotelv1.RuleAction{
		{TmId: 1, SessId: 41, Ccnt: proto.Int64(3), RuleName: "runaway-spill", RuleMode: "enforce", RuleAction: "cancel", Outcome: "done",
			FiredAt: endedAgo(40 * time.Second)},
		{TmId: 1, SessId: 41, Ccnt: proto.Int64(2), RuleName: "earlier-rule", RuleMode: "enforce", RuleAction: "move", Outcome: "done",
			FiredAt: endedAgo(2 * time.Minute)},
	}
	h := newTUI(t, f, 200, 60)
	h.press("tab", "tab", "tab", "enter")
	if l := h.line("ended by rule "); !strings.Contains(l, "runaway-spill") {
		t.Errorf("the page does not name the rule that ended the query:\n%s", h.screen())
	}
	if !strings.Contains(h.screen(), field("rule", "runaway-spill (enforce): cancel, done at ", 0)) {
		t.Errorf("the page does not show the rule's firing:\n%s", h.screen())
	}
	if strings.Contains(h.screen(), "earlier-rule") {
		t.Errorf("a firing on another query of the session is shown:\n%s", h.screen())
	}
}
