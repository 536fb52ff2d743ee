// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// A blocked session shows the chain of sessions it waits behind; a wait
// cycle ends in "…" instead of looping; each holder knows whom it blocks.
func TestBlockedSessionsShowTheChain(t *testing.T) {
	rows := []SessionRow{{Key: sessionKey{1, 1}, BlockedBy: 2}, {Key: sessionKey{1, 2}, BlockedBy: 3}, {Key: sessionKey{1, 3}},
		{Key: sessionKey{1, 4}, BlockedBy: 5}, {Key: sessionKey{1, 5}, BlockedBy: 4}, {Key: sessionKey{1, 6}, BlockedBy: 3}}
	markBlockChains(rows)
	for i, want := range []string{"<2<3", "<3", "", "<5…", "<4…", "<3"} {
		if rows[i].BlockChain != want {
			t.Errorf("session %d chain %q, want %q", rows[i].Key.sessID, rows[i].BlockChain, want)
		}
	}
	if got := blocksText(rows[2].Blocks); got != "2 sessions: 2, 6" {
		t.Errorf("session 3 blocks %q", got)
	}
}

// The VMEM column shows Greenplum's vmem from GetClusterTop for the
// sessions it lists, "-" for the others (and where the server keeps none).
func TestVmemComesFromTheClusterTop(t *testing.T) {
	rows := []SessionRow{{Key: sessionKey{1700000000, 11}}, {Key: sessionKey{1700000000, 12}}}
	addClusterTop(rows, &gpotelv1.GetClusterTopResponse{Sessions: []*gpotelv1.SessionTop{
		{TmId: 1700000000, SessId: 11, VmemBytes: proto.Uint64(45 << 20)}, {TmId: 1700000000, SessId: 12}}})
	if !rows[0].HasVmem || rows[0].Vmem != 45<<20 || rows[1].HasVmem {
		t.Errorf("vmem %v %v", rows[0], rows[1])
	}
}

func TestUnitsSayWhatTheyAre(t *testing.T) {
	for in, want := range map[float64]string{0: "0B", 406: "406B", 4096: "4.0K", 1023 << 20: "1023M", 3 << 30: "3.0G", 12.5 * (1 << 20): "12M"} {
		if got := bytesText(in); got != want {
			t.Errorf("bytesText(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[float64]string{0.4: "0.4s", 12.5: "12.5s", 184: "3m04s", 7260: "2h01m", 273600: "3d04h"} {
		if got := durationText(in); got != want {
			t.Errorf("durationText(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[float64]string{1.26: "1.3", 99.94: "99.9", 150: "150", 1334.4: "1334"} {
		if got := percentText(in); got != want {
			t.Errorf("percentText(%v) = %q, want %q", in, got, want)
		}
	}
}

// cleanText turns every terminal control into something seen, keeps the
// rest, and makes white space one line.
func TestCleanTextMakesControlsVisible(t *testing.T) {
	for in, want := range map[string]string{
		"select 1":                     "select 1",
		"\tSELECT a,\nb\r\n":           " SELECT a, b  ",
		"x\x1b]52;c;aGk=\x07y":         "x?]52;c;aGk=?y",
		"d\x1b[8m":                     "d?[8m",
		"\u009b2J\x7f\x00":             "?2J??",
		"bad \xff\xfe byte":            "bad ?? byte",
		"left \u202eright\u2066":       "left ?right?",
		"nom de rôle, 役割, emoji 😀":     "nom de rôle, 役割, emoji 😀",
		"line\u2028separator\u0085nel": "line separator nel",
	} {
		if got := cleanText(in); got != want {
			t.Errorf("cleanText(%q) = %q, want %q", in, got, want)
		}
	}
}

// The cleaning reaches every string of an answer: nested messages, lists,
// maps' keys and values.
func TestCleanMessageReachesEveryString(t *testing.T) {
	m := &gpotelv1.GetHostPressureResponse{Hosts: []*gpotelv1.HostPressure{{Hostname: "h\x1b", Groups: []*gpotelv1.GroupPressure{
		{Name: "g\x07", Tasks: map[string]int64{"k\x1b": 1}}}}}}
	s := &yagpcc.SessionState{SessionInfo: &yagpcc.SessionInfo{User: "u\x1b[8m"}}
	cleanMessage(m.ProtoReflect())
	cleanMessage(s.ProtoReflect())
	if m.Hosts[0].Hostname != "h?" || m.Hosts[0].Groups[0].Name != "g?" || m.Hosts[0].Groups[0].Tasks["k?"] != 1 || len(m.Hosts[0].Groups[0].Tasks) != 1 ||
		s.GetSessionInfo().GetUser() != "u?[8m" {
		t.Errorf("not cleaned: %v %v", m, s)
	}
}

// What the client remembers of gone sessions is bounded, by age and by
// count: a churn of short sessions must not grow it without end.
func TestRememberedSessionsAreBounded(t *testing.T) {
	at := snapshotTime
	var known map[sessionKey]knownSession
	known = remember(known, []SessionRow{{Key: sessionKey{1, 1}, User: "old"}}, at)
	rows := make([]SessionRow, maxKnown+5)
	for i := range rows {
		rows[i] = SessionRow{Key: sessionKey{1, int64(i + 10)}}
	}
	at = at.Add(time.Minute)
	known = remember(known, rows[:5], at)
	known = remember(known, rows[5:], at.Add(time.Second))
	if len(known) != maxKnown {
		t.Errorf("%d sessions remembered, want at most %d", len(known), maxKnown)
	}
	if _, ok := known[sessionKey{1, 1}]; ok {
		t.Error("the oldest session is still remembered")
	}
	known = remember(known, nil, at.Add(knownFor+2*time.Second))
	if len(known) != 0 {
		t.Errorf("%d sessions remembered past %v", len(known), knownFor)
	}
}
