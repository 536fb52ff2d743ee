// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpotel/gpotel/internal/gpsql"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// u and D show one user's, one database's sessions (and queries); g shows
// gpotel's own sessions, hidden at first and counted in the title.
func TestFiltersShowOneUserOrDatabaseAndHideGpotelsOwn(t *testing.T) {
	f := sixHosts()
	addOwn(f, state(sessionFigures{sessID: 99, user: "gpotel", db: "postgres", state: "active", query: "select from pg_stat_activity", userCPU: 1, window: 10}))
	h := newTUI(t, f, 160, 40)
	if h.line("pg_stat_activity") != "" || !strings.Contains(h.lines()[0], "gpotel's own 1 hidden") {
		t.Errorf("gpotel's own session is shown, or not counted:\n%s", h.screen())
	}
	h.press("g")
	if h.line("pg_stat_activity") == "" {
		t.Errorf("g does not show gpotel's own session:\n%s", h.screen())
	}
	h.press("g")

	h.press("u", "ctrl+u")
	h.typeText("bob")
	h.press("enter")
	if h.line("alice") != "" || h.line("carol") != "" || h.line(" bob ") == "" || !strings.Contains(h.lines()[0], "user bob (of 3)") {
		t.Errorf("u bob:\n%s", h.screen())
	}
	h.press("tab")
	if h.line("big_table_0") != "" || h.line("big_table_1") == "" {
		t.Errorf("the queries view is not filtered by user:\n%s", h.screen())
	}
	h.press("tab", "tab", "tab", "u", "ctrl+u", "enter") // back to the sessions; empty: everyone again
	h.press("D")
	h.typeText("hr")
	h.press("enter")
	if h.line("alice") != "" || h.line("carol") == "" {
		t.Errorf("D hr:\n%s", h.screen())
	}
	h.press("D", "esc")
	if h.line("carol") == "" || h.line("alice") != "" {
		t.Errorf("esc leaves the filter as it was:\n%s", h.screen())
	}
}

// addOwn adds s to f's sessions as one of the collector's own: what
// GetClusterTop marks own (the receiver knows it by backend pid).
func addOwn(f *fakeAPI, s *yagpcc.SessionState) {
	f.sessions = append(f.sessions, s)
	if f.top == nil {
		f.top = &gpotelv1.GetClusterTopResponse{}
	}
	f.top.Sessions = append(f.top.Sessions, &gpotelv1.SessionTop{TmId: s.GetSessionKey().GetTmId(), SessId: s.GetSessionKey().GetSessId(), Own: true})
}

// gpotel's own sessions are the ones GetClusterTop marks own, never the
// ones named like the collector: application_name is anyone's to set, and
// a session that took the collector's name must not vanish from the view.
func TestASessionNamedLikeTheCollectorIsShownAndItsOwnHidden(t *testing.T) {
	f := sixHosts()
	for i, app := range []string{gpsql.ApplicationName, gpsql.ActionsApplicationName} {
		s := state(sessionFigures{sessID: int64(97 + i), user: "mallory", db: "sales", state: "active", query: "select runaway_" + app, userCPU: 1, window: 10})
		s.SessionInfo.ApplicationName = app
		f.sessions = append(f.sessions, s)
	}
	addOwn(f, state(sessionFigures{sessID: 99, user: "gpotel", db: "postgres", state: "active", query: "select from pg_stat_activity", userCPU: 1, window: 10}))
	for _, once := range []bool{false, true} {
		var screen string
		if once {
			screen = runOnce(t, "--addr", serveAPI(t, f), "--width", "160")
		} else {
			screen = newTUI(t, f, 160, 40).screen()
		}
		for _, app := range []string{gpsql.ApplicationName, gpsql.ActionsApplicationName} {
			if !strings.Contains(screen, "runaway_"+app) {
				t.Errorf("once %v: the session named %q is hidden:\n%s", once, app, screen)
			}
		}
		if strings.Contains(screen, "pg_stat_activity") || !strings.Contains(screen, "gpotel's own 1 hidden") {
			t.Errorf("once %v: the collector's own session is shown, or not counted:\n%s", once, screen)
		}
	}
}

// The filter prompt starts from the selected session's user: the likely
// next filter is "only this one's".
func TestUserFilterStartsFromTheSelectedSession(t *testing.T) {
	h := newTUI(t, &fakeAPI{sessions: []*yagpcc.SessionState{busy(11, "alice", 50), busy(12, "bob", 10)}}, 120, 20)
	h.press("down", "u")
	if !strings.Contains(h.screen(), "show only the user: bob_") {
		t.Errorf("prompt:\n%s", h.screen())
	}
	h.press("enter")
	if h.line("alice") != "" {
		t.Errorf("enter applies bob:\n%s", h.screen())
	}
}

func TestAFailedRefreshKeepsTheLastSessionListAndSaysWhy(t *testing.T) {
	h := newTUI(t, sixHosts(), 160, 40)
	if h.line("alice") == "" {
		t.Fatalf("no session of alice before the failure:\n%s", h.screen())
	}
	h.send(fetchedMsg{at: time.Now(), err: errors.New("collector unavailable")})
	if h.line("alice") == "" || h.line("collector unavailable") == "" {
		t.Errorf("a failed refresh emptied the list or hid its failure:\n%s", h.screen())
	}
}

// A terminal delivers text typed quickly, or pasted, as one key of many
// runes: a filter takes all of it.
func TestAFilterTakesTextThatArrivesAtOnce(t *testing.T) {
	h := newTUI(t, sixHosts(), 160, 40)
	h.press("u", "ctrl+u", "bob")
	h.press("enter")
	if !strings.Contains(h.lines()[0], "user bob") {
		t.Errorf("u with \"bob\" in one key does not filter by bob:\n%s", h.screen())
	}
}
