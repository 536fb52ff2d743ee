// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gpotel/gpotel/internal/clientname"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// actionTokenEnv names the environment variable that may hold the action token.
const actionTokenEnv = "GPOTEL_ACTION_TOKEN" //nolint:gosec // the variable's name, not a credential

// actionTarget is what k, K and x act on: a session as the newest answer
// showed it, and its running query.
type actionTarget struct {
	session   SessionRow
	query     *yagpcc.QueryKey // what k cancels; nil: none runs
	queryText string
}

// pendingAction is a k or K waiting for its y/N.
type pendingAction struct {
	terminate bool // K: end the session; k: cancel its running query
	t         actionTarget
}

// askToAct prompts for k (cancel the target's running query) or K
// (terminate its session); nothing is sent before y. An ended session, or
// one running nothing to cancel, is refused at once.
func (m topModel) askToAct(t actionTarget, terminate bool) topModel {
	id := t.session.Key.sessID
	switch {
	case t.session.Ended:
		m.say(fmt.Sprintf("session %d has ended: nothing to %s", id, map[bool]string{false: "cancel", true: "terminate"}[terminate]))
	case !terminate && t.query == nil:
		m.say(fmt.Sprintf("session %d runs no query: nothing to cancel", id))
	default:
		m.pending = &pendingAction{terminate: terminate, t: t}
	}
	return m
}

// confirm sends the pending action on y; any other key drops it.
func (m topModel) confirm(key string) (tea.Model, tea.Cmd) {
	p := *m.pending
	m.pending = nil
	if key != "y" && key != "Y" {
		m.say("not sent: " + p.what())
		return m, nil
	}
	m.say("sending: " + p.what() + "…")
	return m, func() tea.Msg { return actionDoneMsg{text: m.client.act(m.ctx, p)} }
}

// what the action does, in a few words.
func (p pendingAction) what() string {
	if p.terminate {
		return fmt.Sprintf("terminate session %d", p.t.session.Key.sessID)
	}
	return fmt.Sprintf("cancel the query of session %d", p.t.session.Key.sessID)
}

// prompt asks on one line that fits width: what is done to which session
// (whole, always), then whose it is and its query as far as they fit, then
// "? y/N", always.
func (p pendingAction) prompt(width int) string {
	const ask = "? y/N"
	head := p.what()
	who := " (user " + p.t.session.User + ")"
	query := ": " + p.t.queryText
	if p.t.queryText == "" {
		query = ""
	}
	if width <= 0 {
		return head + who + query + ask
	}
	room := width - ansi.StringWidth(head) - ansi.StringWidth(ask)
	switch {
	case ansi.StringWidth(who)+ansi.StringWidth(query) <= room:
		return head + who + query + ask
	case ansi.StringWidth(who)+12 <= room && query != "":
		return head + who + ansi.Truncate(query, room-ansi.StringWidth(who), "…") + ask
	case ansi.StringWidth(who) <= room:
		return head + who + ask
	case room >= 0:
		return head + ask
	}
	// Narrower than the sentence: the id and the question still show.
	short := fmt.Sprintf("%s %d%s", map[bool]string{false: "cancel", true: "end"}[p.terminate], p.t.session.Key.sessID, ask)
	return cutLine(short, width)
}

// actionDoneMsg carries what became of an action into the model, as a sentence.
type actionDoneMsg struct{ text string }

// act sends the action with the action token (a client certificate, when
// configured, is on the connection already) and says what became of it.
func (c *sessionClient) act(ctx context.Context, p pendingAction) string {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if c.actionToken != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, clientname.ActionTokenHeader, c.actionToken)
	}
	api := yagpcc.NewActionServiceClient(c.conn)
	id := p.t.session.Key.sessID
	var resp *yagpcc.TerminateResponse
	var err error
	if p.terminate {
		resp, err = api.TerminateSession(ctx, &yagpcc.TerminateSessionRequest{SessionKey: &yagpcc.SessionKey{SessId: id, TmId: p.t.session.Key.tmID}})
	} else {
		resp, err = api.TerminateQuery(ctx, &yagpcc.TerminateQueryRequest{QueryKey: p.t.query})
	}
	st := status.Convert(err)
	switch {
	case err == nil && resp.GetStatusCode() == yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_SUCCESS:
		if p.terminate {
			return fmt.Sprintf("done: session %d was sent a terminate; it leaves the list when the collector sees it gone", id)
		}
		return fmt.Sprintf("done: the query of session %d was sent a cancel; it stops at its next interrupt check", id)
	case err == nil:
		return fmt.Sprintf("not done: %s (the collector said: %s)", p.what(), resp.GetStatusText())
	case st.Code() == codes.Unimplemented:
		return "not done: this collector serves no actions (the sessionstate exporter's actions are off)"
	case st.Code() == codes.NotFound:
		return fmt.Sprintf("not done: session %d is not in the collector's newest snapshot: it has ended", id)
	case st.Code() == codes.PermissionDenied:
		return "not done: the collector does not let this client act: " + st.Message()
	case st.Code() == codes.FailedPrecondition:
		return "not done: " + st.Message()
	}
	return "not done: " + c.callError("an answer to "+p.what(), err).Error()
}
