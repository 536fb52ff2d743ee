// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gpotel/gpotel/internal/clientname"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// actionTokenEnv names the environment variable that may hold the action token.
const actionTokenEnv = "GPOTEL_ACTION_TOKEN" //nolint:gosec // the variable's name, not a credential

// pendingAction is a k or K waiting for its y/N.
type pendingAction struct {
	terminate bool // K: end the session; k: cancel its running query
	row       SessionRow
}

// prompt names the session, its user and its query.
func (p pendingAction) prompt() string {
	what := "cancel the running query of session"
	if p.terminate {
		what = "terminate session"
	}
	return fmt.Sprintf("%s %d (user %s): %s? y/N", what, p.row.SessID, firstLine(p.row.User), p.row.Query)
}

// actionDoneMsg carries the server's answer into the model, as one line
// without control characters (the text is the server's).
type actionDoneMsg struct{ text string }

// act sends the action with the action token (a client certificate, when
// configured, is on the connection already) and says what the server answered.
func (c *sessionClient) act(ctx context.Context, p pendingAction) string {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if c.actionToken != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, clientname.ActionTokenHeader, c.actionToken)
	}
	api := yagpcc.NewActionServiceClient(c.conn)
	var resp *yagpcc.TerminateResponse
	var err error
	if p.terminate {
		resp, err = api.TerminateSession(ctx, &yagpcc.TerminateSessionRequest{SessionKey: &yagpcc.SessionKey{SessId: p.row.SessID, TmId: p.row.TmID}})
	} else {
		resp, err = api.TerminateQuery(ctx, &yagpcc.TerminateQueryRequest{QueryKey: p.row.RunningQuery})
	}
	switch st := status.Convert(err); {
	case st.Code() == codes.Unimplemented:
		return "not done: this collector serves no actions (the sessionstate exporter's actions are off)"
	case err != nil:
		return fmt.Sprintf("not done: %s: %s", st.Code(), st.Message())
	case resp.GetStatusCode() != yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_SUCCESS:
		return "not done: " + resp.GetStatusText()
	}
	return resp.GetStatusText()
}
