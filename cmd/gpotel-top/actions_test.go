// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gpotel/gpotel/proto/yagpcc"
)

// actionScreen is the sessions screen over threeSessions, session 11
// running query ccnt 3, with the action token in a file.
func actionScreen(t *testing.T, f *fakeAPI, width int) *tui {
	t.Helper()
	f.sessions[0].RunningQuery = &yagpcc.QueryKey{Tmid: 1700000000, Ssid: 11, Ccnt: 3}
	tokenFile := filepath.Join(t.TempDir(), "action.token")
	if err := os.WriteFile(tokenFile, []byte("act-now\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return newTUIWith(t, clientOptions{Addr: serveAPI(t, f), CallTimeout: 5 * time.Second, ActionTokenFile: tokenFile}, width, 30)
}

// k cancels the selected session's running query and K ends the session,
// each only after y at a prompt naming the session, its user and query;
// the status line then says what became of it, and clears on the next key.
func TestKeysKAndShiftKActOnlyAfterConfirmation(t *testing.T) {
	f := threeSessions()
	h := actionScreen(t, f, 160)
	h.press("k") // the first row is selected: session 11, the most CPU
	if l := h.line("y/N"); l != "cancel the query of session 11 (user alice): select burn_cpu(30) from gp_dist_random('gp_id')? y/N" {
		t.Fatalf("prompt %q", l)
	}
	h.press("n")
	if len(f.cancelled) != 0 || !strings.Contains(h.screen(), "not sent: cancel the query of session 11") {
		t.Fatalf("n must send nothing: %v\n%s", f.cancelled, h.screen())
	}
	h.press("k", "y")
	if len(f.cancelled) != 1 || !proto.Equal(f.cancelled[0], &yagpcc.QueryKey{Tmid: 1700000000, Ssid: 11, Ccnt: 3}) || f.actionTokens[0] != "act-now" {
		t.Fatalf("cancelled %v with tokens %v, want session 11's query ccnt 3 with the action token", f.cancelled, f.actionTokens)
	}
	if !strings.Contains(h.screen(), "done: the query of session 11 was sent a cancel") {
		t.Fatalf("the answer is not shown:\n%s", h.screen())
	}
	h.press("down")
	if strings.Contains(h.screen(), "done:") {
		t.Fatalf("the answer stays after the next key:\n%s", h.screen())
	}

	f.set(func(f *fakeAPI) {
		f.actionErr = status.Error(codes.FailedPrecondition, "session 12: gpotel does not act on it: it is a system process")
	})
	h.press("K")
	if l := h.line("y/N"); !strings.HasPrefix(l, "terminate session 12 (user bob): insert into t select") {
		t.Fatalf("no confirmation prompt for K: %q", l)
	}
	h.press("y")
	if len(f.ended) != 1 || f.ended[0].GetSessId() != 12 {
		t.Fatalf("ended %v, want session 12", f.ended)
	}
	if !strings.Contains(h.screen(), "not done: session 12: gpotel does not act on it: it is a system process") {
		t.Fatalf("the refusal is not shown:\n%s", h.screen())
	}

	// An idle session has no query to cancel: nothing is asked.
	h.press("down", "k")
	if !strings.Contains(h.screen(), "session 13 runs no query") || h.line("y/N") != "" {
		t.Fatalf("k on an idle session:\n%s", h.screen())
	}
}

// A session that ended between the refresh and the y is said so, not as
// the collector's NotFound text.
func TestActingOnASessionThatJustEndedSaysSo(t *testing.T) {
	f := threeSessions()
	f.actionErr = status.Error(codes.NotFound, "no session {sess_id 11, tm_id 1700000000}")
	h := actionScreen(t, f, 160)
	h.press("K", "y")
	if !strings.Contains(h.screen(), "not done: session 11 is not in the collector's newest snapshot: it has ended") || strings.Contains(h.screen(), "{") {
		t.Fatalf("status line:\n%s", h.screen())
	}
}

// The prompt names the session whole and ends in y/N at any width: the
// query and the user give way first.
func TestThePromptFitsAnyWidth(t *testing.T) {
	p := pendingAction{terminate: true, t: actionTarget{session: SessionRow{Key: sessionKey{1700000000, 16237}, User: "a_rather_long_role_name"},
		queryText: "select a_rather_long_column_name from a_table_with_a_long_name"}}
	for _, width := range []int{200, 80, 60, 40, 30, 20} {
		l := p.prompt(width)
		if ansi.StringWidth(l) > width || !strings.HasSuffix(l, "? y/N") || !strings.Contains(l, "16237") {
			t.Errorf("width %d: %q", width, l)
		}
	}
	if l := p.prompt(80); !strings.HasPrefix(l, "terminate session 16237 (user a_rather_long_role_name): select a_rather") {
		t.Errorf("at 80 the user and the start of the query fit: %q", l)
	}
}

// A refusal's reason is drawn as one line without control characters.
func TestActionAnswerCannotDrawOnTheScreen(t *testing.T) {
	f := threeSessions()
	f.actionErr = status.Error(codes.FailedPrecondition, "refused\x1b[2J here\nsecond line")
	h := actionScreen(t, f, 160)
	h.press("k", "y")
	if v := h.raw(); strings.Contains(v, "\x1b[2J") || !strings.Contains(v, "not done: refused?[2J here second line") {
		t.Fatalf("the answer reached the screen as %q", v)
	}
}

// k and K in the queries view act on the query's session; k cancels the
// query shown, by its key.
func TestKeysActOnTheSelectedQuery(t *testing.T) {
	f := sixHosts()
	h := actionScreen(t, f, 160)
	h.press("tab", "down") // the second query: session 12's, command 5
	h.press("k")
	if l := h.line("y/N"); !strings.HasPrefix(l, "cancel the query of session 12 (user bob): select * from big_table_1") {
		t.Fatalf("prompt %q\n%s", l, h.screen())
	}
	h.press("y")
	if len(f.cancelled) != 1 || !proto.Equal(f.cancelled[0], &yagpcc.QueryKey{Tmid: 1700000000, Ssid: 12, Ccnt: 5}) {
		t.Fatalf("cancelled %v", f.cancelled)
	}
}
