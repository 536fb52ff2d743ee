// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gpotel/gpotel/internal/clientname"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// fixedActions is an in-process ActionService: it records what it was
// asked, with the action token, and cancels but refuses to terminate.
type fixedActions struct {
	yagpcc.UnimplementedActionServiceServer

	// answer is TerminateQuery's status text; empty: a plain success text.
	answer string

	mu        sync.Mutex
	cancelled []*yagpcc.QueryKey
	ended     []*yagpcc.SessionKey
	tokens    []string
}

func (f *fixedActions) token(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.tokens = append(f.tokens, strings.Join(md.Get(clientname.ActionTokenHeader), ","))
}

func (f *fixedActions) TerminateQuery(ctx context.Context, req *yagpcc.TerminateQueryRequest) (*yagpcc.TerminateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.token(ctx)
	f.cancelled = append(f.cancelled, req.GetQueryKey())
	text := f.answer
	if text == "" {
		text = "sent a cancel to the running query of session {sess_id 11}"
	}
	return &yagpcc.TerminateResponse{StatusCode: yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_SUCCESS, StatusText: text}, nil
}

func (f *fixedActions) TerminateSession(ctx context.Context, req *yagpcc.TerminateSessionRequest) (*yagpcc.TerminateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.token(ctx)
	f.ended = append(f.ended, req.GetSessionKey())
	return nil, status.Error(codes.FailedPrecondition, "session {sess_id 12}: gpotel does not act on it: it is a system process")
}

// serveOn starts an in-process gRPC server with what register adds.
func serveOn(t *testing.T, register func(*grpc.Server)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// actionScreen is the sessions screen over threeSessions, session 11
// running query ccnt 3, with the action token in a file.
func actionScreen(t *testing.T, a *fixedActions) tea.Model {
	t.Helper()
	sessions := threeSessions()
	sessions.states[0].RunningQuery = &yagpcc.QueryKey{Tmid: 1700000000, Ssid: 11, Ccnt: 3}
	tokenFile := filepath.Join(t.TempDir(), "action.token")
	if err := os.WriteFile(tokenFile, []byte("act-now\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := serveOn(t, func(srv *grpc.Server) {
		yagpcc.RegisterGetGPInfoServer(srv, sessions)
		yagpcc.RegisterActionServiceServer(srv, a)
	})
	c, err := dial(context.Background(), clientOptions{Addr: addr, CallTimeout: 5 * time.Second, ActionTokenFile: tokenFile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	var m tea.Model = topModel{ctx: context.Background(), client: c, interval: time.Second, sort: SortCPU, width: 160, height: 30}
	m, _ = m.Update(m.(topModel).fetch()())
	return m
}

// pressAndRun presses key and feeds the model what the key's command answers.
func pressAndRun(m tea.Model, key string) tea.Model {
	m, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(key)})
	if cmd != nil {
		m, _ = m.Update(cmd())
	}
	return m
}

// k cancels the selected session's running query and K ends the session,
// each only after y at a prompt naming the session, its user and query;
// the status line shows the server's answer or refusal.
func TestKeysKAndShiftKActOnlyAfterConfirmation(t *testing.T) {
	a := &fixedActions{}
	m := actionScreen(t, a)
	if sel := m.(topModel).rows[0].SessID; sel != 11 {
		t.Fatalf("session %d selected first, want 11 (the most CPU)", sel)
	}

	m = pressAndRun(m, "k")
	if v := m.View(); !strings.Contains(v, "cancel the running query of session 11 (user alice): select burn_cpu(30)? y/N") {
		t.Fatalf("no confirmation prompt:\n%s", v)
	}
	m = pressAndRun(m, "n")
	if len(a.cancelled) != 0 || !strings.Contains(m.View(), "not sent") {
		t.Fatalf("n must send nothing: %v\n%s", a.cancelled, m.View())
	}

	m = pressAndRun(pressAndRun(m, "k"), "y")
	if len(a.cancelled) != 1 || !proto.Equal(a.cancelled[0], &yagpcc.QueryKey{Tmid: 1700000000, Ssid: 11, Ccnt: 3}) || a.tokens[0] != "act-now" {
		t.Fatalf("cancelled %v with tokens %v, want session 11's query ccnt 3 with the action token", a.cancelled, a.tokens)
	}
	if v := m.View(); !strings.Contains(v, "sent a cancel to the running query of session {sess_id 11}") {
		t.Fatalf("the answer is not shown:\n%s", v)
	}

	m, _ = m.Update(tea.KeyMsg{Type: tea.KeyDown})
	m = pressAndRun(m, "K")
	if v := m.View(); !strings.Contains(v, "terminate session 12 (user bob): insert into t select") {
		t.Fatalf("no confirmation prompt for K:\n%s", v)
	}
	m = pressAndRun(m, "y")
	if len(a.ended) != 1 || a.ended[0].GetSessId() != 12 {
		t.Fatalf("ended %v, want session 12", a.ended)
	}
	if v := m.View(); !strings.Contains(v, "it is a system process") {
		t.Fatalf("the refusal is not shown:\n%s", v)
	}

	// An idle session has no query to cancel: nothing is asked.
	m, _ = m.Update(tea.KeyMsg{Type: tea.KeyDown})
	m = pressAndRun(m, "k")
	if v := m.View(); !strings.Contains(v, "session 13 runs no query") || strings.Contains(v, "y/N") {
		t.Fatalf("k on an idle session:\n%s", v)
	}
}

// The action token, like the bearer token, goes only over TLS or to loopback.
func TestActionTokenNeedsTLSBeyondLoopback(t *testing.T) {
	file := filepath.Join(t.TempDir(), "action.token")
	if err := os.WriteFile(file, []byte("act-now"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"--once", "--addr", "10.0.0.5:1432", "--action-token-file", file, "--timeout", "1s"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--tls") {
		t.Errorf("--action-token-file: err = %v, want a refusal to send it in plaintext", err)
	}
	t.Setenv(actionTokenEnv, "act-now")
	err = run(context.Background(), []string{"--once", "--addr", "10.0.0.5:1432", "--timeout", "1s"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--tls") {
		t.Errorf("token from %s: err = %v, want a refusal to send it in plaintext", actionTokenEnv, err)
	}
}

// The server's answer is shown as one line without control characters.
func TestActionAnswerCannotDrawOnTheScreen(t *testing.T) {
	m := actionScreen(t, &fixedActions{answer: "sent\x1b[2J a cancel\nsecond line"})
	m = pressAndRun(pressAndRun(m, "k"), "y")
	if v := m.View(); strings.Contains(v, "\x1b[2J") || strings.Contains(v, "second line") || !strings.Contains(v, "sent [2J a cancel") {
		t.Fatalf("the answer reached the screen as %q", v)
	}
}
