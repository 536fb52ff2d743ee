// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// finishedWork is two finished queries and an ended session between them:
// query 21 has every figure, query 22 has no CPU, disk or spill figure
// (its processes reported none), and its text and the session's
// application came from a hostile user.
func finishedWork() *fakeAPI {
	f := twoHostsOfTwoCPUs()
	at := func(ago time.Duration) *timestamppb.Timestamp { return timestamppb.New(snapshotTime.Add(-ago)) }
	f.finished = []*gpotelv1.FinishedQuery{
		{TmId: 1700000000, SessId: 22, Username: "bob", Database: "hr", Ccnt: new(int64(3)), QueryStart: at(40 * time.Second), QueryEnd: at(30 * time.Second),
			Duration: 10, Status: "aborted", QueryText: proto.String("select\n" + hostile + " from t_bob")},
		{TmId: 1700000000, SessId: 21, Username: "alice", Database: "sales", Ccnt: new(int64(7)), QueryStart: at(100 * time.Second), QueryEnd: at(10 * time.Second),
			Duration: 90, Status: "completed", QueryText: proto.String("select count(*) from t_alice"),
			CpuTime: proto.Float64(123.4), DiskIoRead: proto.Int64(3 << 30), DiskIoWrite: proto.Int64(5 << 20), SpillSizeMax: proto.Int64(2 << 30)},
	}
	f.endedSessions = []*gpotelv1.EndedSession{
		{TmId: 1700000000, SessId: 23, Username: "carol", Database: "sales", Application: proto.String(hostile + "app_carol"),
			SessionStart: at(time.Hour), SessionEnd: at(20 * time.Second), Duration: 3580, Queries: 12,
			CpuTime: proto.Float64(7.5), DiskIoRead: proto.Int64(1 << 20), DiskIoWrite: proto.Int64(0)},
	}
	return f
}

// The history view lists finished queries and ended sessions together,
// newest first, with the figures their events carry and '-' for those
// they lack; nothing a server sent reaches the terminal raw; it fits 80x24.
func TestHistoryListsFinishedWorkNewestFirst(t *testing.T) {
	lipgloss.SetColorProfile(termenv.Ascii) // only the server's bytes could be controls
	for _, size := range [][2]int{{200, 50}, {80, 24}} {
		h := newTUI(t, finishedWork(), size[0], size[1])
		h.press("tab", "tab", "tab")
		if !strings.Contains(h.lines()[0], "history  newest first") {
			t.Fatalf("%v: three tabs from the sessions are not the history:\n%s", size, h.screen())
		}
		h.fits("history")
		if c, bad := rawControl(h.raw()); bad {
			t.Errorf("%v: %s reaches the terminal:\n%q", size, c, h.raw())
		}
		var order []string
		for _, l := range h.lines() {
			for _, who := range []string{"alice", "carol", "bob"} {
				if strings.Contains(l, " "+who+" ") {
					order = append(order, who)
				}
			}
		}
		if strings.Join(order, ",") != "alice,carol,bob" {
			t.Errorf("%v: rows %v, want alice's query, carol's session, bob's query (newest first):\n%s", size, order, h.screen())
		}
		header := h.line("END")
		alice, bob, carol := h.line(" alice "), h.line(" bob "), h.line(" carol ")
		for _, c := range []struct{ row, title, want string }{
			{alice, "CPU", "2m03s"}, {alice, "READ", "3.0G"}, {alice, "SPILL", "2.0G"},
			{bob, "CPU", absentText}, {bob, "READ", absentText}, {bob, "SPILL", absentText},
			{carol, "CPU", "7.5s"}, {carol, "READ", "1.0M"}, {carol, "SPILL", absentText},
		} {
			if got := cellUnder(header, c.row, c.title); got != c.want {
				t.Errorf("%v: %s under %s in %q, want %q\n%s", size, got, c.title, c.row, c.want, h.screen())
			}
		}
		for _, want := range []string{"completed", "aborted", "ended", "select count(*)", clockText(snapshotTime.Add(-10 * time.Second).Local())} {
			if !strings.Contains(h.screen(), want) {
				t.Errorf("%v: %q is not on the screen:\n%s", size, want, h.screen())
			}
		}
	}
}
