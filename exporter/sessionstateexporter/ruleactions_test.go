// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/paging"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/rulefirings"
	"github.com/gpotel/gpotel/internal/statustest"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// fire publishes firing i of rule on session sess, as the workloadrules
// connector does.
func fire(i int, rule string, sess int64) {
	values := []float64{float64(i)}
	rulefirings.Publish(&events.RuleAction{Time: t0.UnixNano() + int64(i), Rule: rule, Mode: "enforce", Action: "cancel",
		Outcome: "done", Session: pipeline.SessionKey{TmID: 1700000000, ID: sess}, PID: 1000 + sess, CommandCount: 3,
		QueryStart: t0.UnixNano(), User: "alice", Database: "sales", Predicates: []string{"gpotel.query.spill.size > 1GiB"}, Values: values})
	values[0] = -1 // the keeper holds its own copy
}

func numbers(resp *gpotelv1.ListRuleActionsResponse) []uint64 {
	var out []uint64
	for _, a := range resp.GetRuleActions() {
		out = append(out, a.GetNumber())
	}
	return out
}

// TestListRuleActionsKeepsTheLatestFirings: ListRuleActions answers the
// latest rule_actions::max_firings firings newest first, each with its
// number and figures; the ones the bound dropped are counted.
func TestListRuleActionsKeepsTheLatestFirings(t *testing.T) {
	cfg := testConfig()
	cfg.RuleActions.MaxFirings = 3
	srv := startServer(t, cfg, nopHost())
	for i := 1; i <= 5; i++ {
		fire(i, "runaway-spill", 7)
	}
	resp, err := gpotelv1.NewRuleActionsClient(srv.conn).ListRuleActions(ctxTimeout(t), &gpotelv1.ListRuleActionsRequest{})
	require.NoError(t, err)
	assert.Equal(t, []uint64{5, 4, 3}, numbers(resp))
	assert.EqualValues(t, 2, resp.GetDropped())
	a := resp.GetRuleActions()[0]
	assert.Equal(t, "runaway-spill", a.GetRuleName())
	assert.Equal(t, "done", a.GetOutcome())
	assert.Equal(t, int64(7), a.GetSessId())
	assert.Equal(t, int64(3), a.GetCcnt())
	assert.Equal(t, []float64{5}, a.GetPredicateValues())
	assert.Equal(t, t0.UnixNano()+5, a.GetFiredAt().AsTime().UnixNano())
	assert.Nil(t, a.Application, "absent, not empty")
}

// TestListRuleActionsFiltersAndPages: by rule and by session, in pages
// whose token is good only for the same request.
func TestListRuleActionsFiltersAndPages(t *testing.T) {
	srv := startDefault(t)
	client := gpotelv1.NewRuleActionsClient(srv.conn)
	for i := 1; i <= 10; i++ {
		fire(i, []string{"spill", "skew"}[i%2], int64(i%3))
	}
	var got []string
	req := &gpotelv1.ListRuleActionsRequest{RuleNames: []string{"spill"}, SessIds: []int64{0, 1}, PageSize: 2}
	for range 10 {
		resp, err := client.ListRuleActions(ctxTimeout(t), req)
		require.NoError(t, err)
		for _, a := range resp.GetRuleActions() {
			got = append(got, fmt.Sprintf("%d %s %d", a.GetNumber(), a.GetRuleName(), a.GetSessId()))
		}
		if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
			break
		}
	}
	assert.Equal(t, []string{"10 spill 1", "6 spill 0", "4 spill 1"}, got)

	first, err := client.ListRuleActions(ctxTimeout(t), &gpotelv1.ListRuleActionsRequest{PageSize: 1})
	require.NoError(t, err)
	_, err = client.ListRuleActions(ctxTimeout(t), &gpotelv1.ListRuleActionsRequest{RuleNames: []string{"skew"}, PageToken: first.GetNextPageToken()})
	statustest.AssertCode(t, err, codes.InvalidArgument, "different request")
	_, err = client.ListRuleActions(ctxTimeout(t), &gpotelv1.ListRuleActionsRequest{PageToken: "!!"})
	statustest.AssertCode(t, err, codes.InvalidArgument, "not one this server issued")
	_, err = client.ListRuleActions(ctxTimeout(t), &gpotelv1.ListRuleActionsRequest{SessIds: make([]int64, paging.MaxFilterValues+1)})
	statustest.AssertCode(t, err, codes.InvalidArgument, "filter values")
}
