// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/internal/pipeline/events"
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
			{alice, "CPU", "2m03s"}, {alice, "READ", "3.0G"}, {alice, "WRITE", "5.0M"},
			{bob, "CPU", absentText}, {bob, "READ", absentText}, {bob, "WRITE", absentText},
			{carol, "CPU", "7.5s"}, {carol, "READ", "1.0M"}, {carol, "WRITE", "0B"},
		} {
			if got := cellUnder(header, c.row, c.title); got != c.want {
				t.Errorf("%v: %s under %s in %q, want %q\n%s", size, got, c.title, c.row, c.want, h.screen())
			}
		}
		for _, want := range []string{"completed", "aborted", "ended", "select count(", endText(snapshotTime.Add(-10*time.Second), time.Now())} {
			if !strings.Contains(h.screen(), want) {
				t.Errorf("%v: %q is not on the screen:\n%s", size, want, h.screen())
			}
		}
	}
}

// endedAgo is a timestamp ago before the test's snapshot.
func endedAgo(ago time.Duration) *timestamppb.Timestamp {
	return timestamppb.New(snapshotTime.Add(-ago))
}

// historyOf is the screen at the history view, of a collector that
// answers these finished queries and ended sessions.
func historyOf(t *testing.T, queries []*gpotelv1.FinishedQuery, sessions []*gpotelv1.EndedSession, width, height int) *tui {
	t.Helper()
	f := twoHostsOfTwoCPUs()
	f.finished, f.endedSessions = queries, sessions
	h := newTUI(t, f, width, height)
	h.press("tab", "tab", "tab")
	if !strings.Contains(h.lines()[0], "history") {
		t.Fatalf("three tabs from the sessions are not the history:\n%s", h.screen())
	}
	return h
}

// rowsBelow are the screen's lines under the line holding title, up to
// the first empty one.
func rowsBelow(h *tui, title string) []string {
	var rows []string
	in := false
	for _, l := range h.lines() {
		switch {
		case !in:
			in = strings.Contains(l, title)
		case strings.TrimSpace(l) == "":
			return rows
		default:
			rows = append(rows, l)
		}
	}
	return rows
}

// Enter on a finished query shows how it ended, its figures, its waits,
// spill and lock wait, every segment instance's CPU, reads and writes
// with the hottest marked, and its text, from the history item itself.
func TestHistoryDetailsShowEverySegment(t *testing.T) {
	segments := []*gpotelv1.SegmentUse{
		{Hostname: "mdw", Segment: -1, CpuSeconds: 0.5},
		{Hostname: "sdw1", Segment: 0, CpuSeconds: 5, ReadBytes: 1 << 20, WriteBytes: 2 << 20},
		{Hostname: "sdw1", Segment: 1, CpuSeconds: 6, ReadBytes: 3 << 20, WriteBytes: 4 << 20},
		{Hostname: "sdw2", Segment: 2, CpuSeconds: 30, ReadBytes: 5 << 20, WriteBytes: 6 << 20},
		{Hostname: "sdw2", Segment: 3, CpuSeconds: 3.5, ReadBytes: 700 << 20, WriteBytes: 8 << 20},
	}
	q := &gpotelv1.FinishedQuery{TmId: 1700000000, SessId: 31, Username: "dora", Database: "sales", Ccnt: proto.Int64(4),
		QueryStart: endedAgo(70 * time.Second), QueryEnd: endedAgo(10 * time.Second), Duration: 60, Status: "aborted",
		QueryText:   proto.String("select * from big join bigger using (id)"),
		CpuTimeUser: proto.Float64(40), CpuTimeSystem: proto.Float64(5), CpuTime: proto.Float64(45),
		DiskIoRead: proto.Int64(709 << 20), DiskIoWrite: proto.Int64(20 << 20), CpuRunDelay: proto.Float64(1.5), DiskDelay: proto.Float64(2.25),
		SpillSizeMax: proto.Int64(3 << 30), SpillFilesMax: proto.Int64(12), LockWaitTime: 4.5, LockBlockerSessId: proto.Int64(17),
		SkewCpuRatio: proto.Float64(0.6), SkewCpuHottestSegment: proto.Int64(2), Segments: segments}
	for _, size := range [][2]int{{200, 60}, {80, 24}} {
		h := historyOf(t, []*gpotelv1.FinishedQuery{q}, nil, size[0], size[1])
		h.press("enter")
		h.fits("the finished query's page")
		if !strings.Contains(h.lines()[0], "finished query of session 31") {
			t.Fatalf("%v: enter on the history's row does not open its page:\n%s", size, h.screen())
		}
		if size[0] < 200 {
			continue
		}
		for _, want := range [][]string{
			{"how it ended", "aborted"}, {"CPU user / system", "40.00s", "5.00s"}, {"waits", "run queue 1.50s", "block I/O 2.25s"},
			{"spill, most at once", "3.0G", "12 files"}, {"lock wait", "4.50s", "session 17"}, {"select * from big join bigger using (id)"},
		} {
			if l := h.line(want[0]); l == "" || !containsAll(l, want[1:]) {
				t.Errorf("no line with %q showing %q:\n%s", want[0], want[1:], h.screen())
			}
		}
		rows := rowsBelow(h, "SEG")
		if len(rows) != len(segments) {
			t.Fatalf("%d segment lines, want %d:\n%s", len(rows), len(segments), h.screen())
		}
		for i, s := range segments {
			want := []string{strconv.Itoa(int(s.Segment)), s.Hostname, millisecondsText(s.CpuSeconds),
				bytesText(float64(s.ReadBytes)), bytesText(float64(s.WriteBytes))}
			if !containsAll(rows[i], want) {
				t.Errorf("segment %d: %q, want %q", s.Segment, rows[i], want)
			}
			if hot := strings.Contains(rows[i], "most CPU"); hot != (s.Segment == 2) {
				t.Errorf("segment %d: %q: only segment 2 is the hottest by CPU", s.Segment, rows[i])
			}
			if hot := strings.Contains(rows[i], "most I/O"); hot != (s.Segment == 3) {
				t.Errorf("segment %d: %q: only segment 3 is the hottest by I/O", s.Segment, rows[i])
			}
		}
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// Enter on an ended session shows how it ended and its lifetime figures.
func TestHistoryDetailsOfAnEndedSession(t *testing.T) {
	s := &gpotelv1.EndedSession{TmId: 1700000000, SessId: 23, Username: "carol", Database: "sales", Application: proto.String("psql"),
		SessionStart: endedAgo(time.Hour), SessionEnd: endedAgo(20 * time.Second), Duration: 3580, Queries: 1, Partial: true,
		CpuTimeUser: proto.Float64(7), CpuTimeSystem: proto.Float64(0.5), CpuTime: proto.Float64(7.5), MemoryRssMax: 64 << 20, LockWaitTime: 1}
	h := historyOf(t, nil, []*gpotelv1.EndedSession{s}, 200, 60)
	if !strings.Contains(h.line(" carol "), "session of 1 query,") {
		t.Errorf("the session's row does not count its one query in the singular: %q", h.line(" carol "))
	}
	h.press("enter")
	for _, want := range [][]string{{"how it ended", "ended", "partial"}, {"queries", "1 query"}, {"CPU user / system", "7.00s", "0.50s"},
		{"lock wait", "1.00s"}} {
		if l := h.line(want[0] + "  "); l == "" || !containsAll(l, want[1:]) {
			t.Errorf("no line with %q showing %q:\n%s", want[0], want[1:], h.screen())
		}
	}
}

// At 80x24 the history keeps END, SESS, USER, STATUS, DUR, CPU, READ,
// WRITE and the text, whatever its rows: SPILL gives way first.
func TestHistoryKeepsItsColumnsAt80x24(t *testing.T) {
	queries := []*gpotelv1.FinishedQuery{
		{TmId: 1, SessId: 1234567, Username: "a_long_user_name", Database: "sales", QueryStart: endedAgo(74 * time.Hour), QueryEnd: endedAgo(73 * time.Hour),
			Duration: 3599, Status: "client_lost", Partial: true, QueryText: proto.String("select 1"),
			CpuTime: proto.Float64(86399), DiskIoRead: proto.Int64(1023 << 20), DiskIoWrite: proto.Int64(999 << 20), SpillSizeMax: proto.Int64(1)},
		{TmId: 1, SessId: 7, Username: "bob", Database: "hr", QueryStart: endedAgo(time.Minute), QueryEnd: endedAgo(0),
			Duration: 60, Status: "completed", Partial: true, QueryText: proto.String("select 2"), DiskIoWrite: proto.Int64(5 << 10)},
	}
	h := historyOf(t, queries, nil, 80, 24)
	h.fits("history")
	header := h.line("END")
	for _, title := range []string{"END", "SESS", "USER", "STATUS", "DUR", "CPU", "READ", "WRITE", "QUERY"} {
		if !strings.Contains(header, title) {
			t.Errorf("no %s column at 80x24: %q", title, header)
		}
	}
	if strings.Contains(header, "SPILL") {
		t.Errorf("SPILL kept at 80x24 where WRITE or the text should be: %q", header)
	}
	for _, c := range []struct{ row, want string }{{" a_long_", "999M"}, {" bob ", "5.0K"}} {
		if got := cellUnder(header, h.line(c.row), "WRITE"); got != c.want {
			t.Errorf("WRITE of %q is %q, want %q\n%s", c.row, got, c.want, h.screen())
		}
	}
	for _, text := range []string{"select 1", "select 2"} {
		if !strings.Contains(h.screen(), text) {
			t.Errorf("the text %q is not on the screen:\n%s", text, h.screen())
		}
	}
}

// A row that did not end today says its date; today's say the time alone.
func TestHistoryShowsTheDateWhenNotToday(t *testing.T) {
	now := time.Now()
	old := now.Add(-72 * time.Hour)
	queries := []*gpotelv1.FinishedQuery{
		{TmId: 1, SessId: 8, Username: "old", QueryStart: timestamppb.New(old), QueryEnd: timestamppb.New(old), Status: "completed"},
		{TmId: 1, SessId: 9, Username: "new", QueryStart: timestamppb.New(now), QueryEnd: timestamppb.New(now), Status: "completed"},
	}
	h := historyOf(t, queries, nil, 120, 30)
	if l := h.line(" old "); !strings.HasPrefix(strings.TrimLeft(l, selectionMark+" "), old.Format("01-02 15:04")) {
		t.Errorf("the row of 3 days ago %q does not start with its date %s", l, old.Format("01-02 15:04"))
	}
	if l := h.line(" new "); !strings.HasPrefix(strings.TrimLeft(l, selectionMark+" "), now.Format("15:04:05 ")) {
		t.Errorf("today's row %q does not start with its time %s alone", l, now.Format("15:04:05"))
	}
}

// A duration and a CPU time of the same length read the same: both
// rounded, 89.996 s is 1m30s.
func TestHistoryRoundsDurationAndCPUAlike(t *testing.T) {
	queries := []*gpotelv1.FinishedQuery{{TmId: 1, SessId: 5, Username: "eve", QueryStart: endedAgo(100 * time.Second), QueryEnd: endedAgo(10 * time.Second),
		Duration: 89.996, CpuTime: proto.Float64(89.996), Status: "completed"}}
	h := historyOf(t, queries, nil, 120, 30)
	header, row := h.line("END"), h.line(" eve ")
	for _, title := range []string{"DUR", "CPU"} {
		if got := cellUnder(header, row, title); got != "1m30s" {
			t.Errorf("%s of 89.996 s reads %q, want 1m30s\n%s", title, got, h.screen())
		}
	}
	for seconds, want := range map[float64]string{59.96: "1m00s", 89.4: "1m29s", 3599.6: "1h00m", 7259: "2h01m", 86399.9: "1d00h", 0.04: "0.0s"} {
		if got := durationText(seconds); got != want {
			t.Errorf("durationText(%v) = %q, want %q", seconds, got, want)
		}
	}
}

// A mark is never cut: the status gives way, the "*" stays.
func TestHistoryNeverCutsAMark(t *testing.T) {
	queries := []*gpotelv1.FinishedQuery{
		{TmId: 1, SessId: 1, Username: "u1", QueryEnd: endedAgo(1 * time.Second), Status: "completed", Partial: true},
		{TmId: 1, SessId: 2, Username: "u2", QueryEnd: endedAgo(2 * time.Second), Status: "terminated", Partial: true},
		{TmId: 1, SessId: 3, Username: "u3", QueryEnd: endedAgo(3 * time.Second), Status: "a_status_no_column_is_wide_enough_for", Partial: true},
	}
	h := historyOf(t, queries, nil, 80, 24)
	if !strings.Contains(h.line(" u1 "), " completed* ") {
		t.Errorf("completed and its partial mark are not whole: %q", h.line(" u1 "))
	}
	header := h.line("END")
	at := strings.Index(header, "STATUS")
	for _, u := range []string{" u2 ", " u3 "} {
		cell := strings.Fields(string([]rune(h.line(u))[at:]))[0]
		if !strings.HasSuffix(cell, "*") {
			t.Errorf("the status of %q lost its partial mark: %q\n%s", u, cell, h.screen())
		}
	}
}

// manyFinished is n finished queries, one a second back from the
// snapshot, and a session ended every fourth second: the newest first,
// sessions ids are their rank in that order.
func manyFinished(n int) ([]*gpotelv1.FinishedQuery, []*gpotelv1.EndedSession, []int64) {
	var queries []*gpotelv1.FinishedQuery
	var sessions []*gpotelv1.EndedSession
	var order []int64
	for i := range n {
		id := int64(1000 + i)
		end := endedAgo(time.Duration(i) * time.Second)
		order = append(order, id)
		if i%4 == 3 {
			sessions = append(sessions, &gpotelv1.EndedSession{TmId: 1, SessId: id, Username: "bob", Database: "hr", SessionStart: endedAgo(time.Hour), SessionEnd: end})
			continue
		}
		user := "alice"
		if i%2 == 0 {
			user = "bob"
		}
		queries = append(queries, &gpotelv1.FinishedQuery{TmId: 1, SessId: id, Username: user, Database: "hr", QueryStart: endedAgo(time.Hour),
			QueryEnd: end, Status: "completed"})
	}
	return queries, sessions, order
}

// shownSessions are the SESS of the history's rows on the screen, in order.
func shownSessions(h *tui) []int64 {
	var out []int64
	header := h.line(" SESS ")
	for _, l := range rowsBelow(h, " SESS ") {
		if id, err := strconv.ParseInt(cellUnder(header, l, "SESS"), 10, 64); err == nil {
			out = append(out, id)
		}
	}
	return out
}

// ] shows the next 50 older rows, asked with the collector's page tokens;
// [ goes back to the newer ones.
func TestHistoryPagesPastTheNewest50(t *testing.T) {
	queries, sessions, order := manyFinished(130)
	f := twoHostsOfTwoCPUs()
	f.finished, f.endedSessions = queries, sessions
	h := newTUI(t, f, 120, 70)
	h.press("tab", "tab", "tab")
	pages := [][]int64{order[:50], order[50:100], order[100:]}
	check := func(page int) {
		t.Helper()
		if got := shownSessions(h); !slices.Equal(got, pages[page]) {
			t.Errorf("page %d shows %v, want %v\n%s", page+1, got, pages[page], h.screen())
		}
	}
	check(0)
	h.press("]")
	check(1)
	if !strings.Contains(h.lines()[0], "page 2") {
		t.Errorf("the title does not say page 2: %q", h.lines()[0])
	}
	if l := h.line(" " + strconv.FormatInt(pages[1][0], 10) + " "); !strings.HasPrefix(l, selectionMark) {
		t.Errorf("the new page's first row is not selected: %q", l)
	}
	h.press("]")
	check(2)
	h.press("]") // past the oldest: stays
	check(2)
	h.press("[", "[")
	check(0)
	f.mu.Lock()
	defer f.mu.Unlock()
	tokens := 0
	for _, r := range f.historyReqs {
		if r.GetPageToken() != "" {
			tokens++
		}
	}
	if tokens == 0 {
		t.Errorf("the older pages were not asked with a page token: %v", f.historyReqs)
	}
}

// S shows one status only, found past the newest 50 too.
func TestHistoryFiltersByStatus(t *testing.T) {
	queries, sessions, _ := manyFinished(130)
	queries[5].Status, queries[90].Status = "error", "error"
	h := historyOf(t, queries, sessions, 120, 70)
	h.press("S")
	h.typeText("error")
	h.press("enter")
	want := []int64{queries[5].SessId, queries[90].SessId}
	if got := shownSessions(h); !slices.Equal(got, want) {
		t.Errorf("status error shows %v, want %v\n%s", got, want, h.screen())
	}
	if !strings.Contains(h.lines()[0], "status error") {
		t.Errorf("the title does not name the filter: %q", h.lines()[0])
	}
}

// u shows one user's rows, asked of the collector so that every page is
// theirs.
func TestHistoryFiltersByUser(t *testing.T) {
	queries, sessions, _ := manyFinished(300)
	f := twoHostsOfTwoCPUs()
	f.finished, f.endedSessions = queries, sessions
	h := newTUI(t, f, 120, 70)
	h.press("tab", "tab", "tab")
	h.press("u")
	h.press("ctrl+u")
	h.typeText("alice")
	h.press("enter")
	rows := rowsBelow(h, "END")
	if len(rows) != 50 {
		t.Errorf("%d rows of alice's, want a page of 50\n%s", len(rows), h.screen())
	}
	for _, l := range rows {
		if !strings.Contains(l, " alice ") {
			t.Errorf("a row not alice's: %q", l)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if last := f.historyReqs[len(f.historyReqs)-1]; !slices.Equal(last.GetUsers(), []string{"alice"}) {
		t.Errorf("the history was asked for users %v, want [alice]", last.GetUsers())
	}
}

// ? explains every status a finished query or ended session can have,
// and every mark the history shows.
func TestHelpExplainsEveryStatusAndMark(t *testing.T) {
	h := historyOf(t, nil, nil, 120, 400)
	h.press("?")
	for _, s := range []string{events.QueryCompleted, events.QueryAborted, events.QueryUnknown, "disconnect", "conn.lost", "shutdown",
		"error", "cancelled", "terminated", "client_lost", "ended", "*", "-"} {
		found := false
		for _, l := range h.lines() {
			if f := strings.Fields(l); len(f) > 1 && f[0] == s {
				found = true
			}
		}
		if !found {
			t.Errorf("the help does not explain %q:\n%s", s, h.screen())
		}
	}
}

// A details page says how the work ended as the server told it: a
// failed query's SQLSTATE and message, a cancelled one's reason, and a
// session's end reason.
func TestHistoryDetailsSayHowItEnded(t *testing.T) {
	queries := []*gpotelv1.FinishedQuery{
		{TmId: 1, SessId: 41, Username: "dave", Database: "sales", QueryStart: endedAgo(time.Minute), QueryEnd: endedAgo(30 * time.Second),
			Duration: 30, Status: "error", Sqlstate: proto.String("22012"), ErrorMessage: proto.String("division\nby zero"), QueryText: proto.String("select 1/0")},
	}
	h := historyOf(t, queries, nil, 200, 60)
	h.press("enter")
	if l := h.line("how it ended  "); !containsAll(l, []string{"error", "SQLSTATE 22012", "division by zero"}) {
		t.Errorf("the failed query's page does not say how it failed:\n%s", h.screen())
	}

	queries[0].Status, queries[0].Sqlstate, queries[0].ErrorMessage = "cancelled", proto.String("57014"), proto.String("canceling statement due to "+
		"statement timeout")
	queries[0].CancelReason = proto.String("statement_timeout")
	h = historyOf(t, queries, nil, 200, 60)
	h.press("enter")
	if l := h.line("how it ended  "); !containsAll(l, []string{"cancelled", "57014", "statement timeout"}) {
		t.Errorf("the cancelled query's page does not say why:\n%s", h.screen())
	}

	s := &gpotelv1.EndedSession{TmId: 1, SessId: 42, Username: "erin", Database: "sales", SessionStart: endedAgo(time.Hour),
		SessionEnd: endedAgo(10 * time.Second), Duration: 3590, Queries: 2, EndReason: "connection_lost", Sqlstate: proto.String("08006"),
		Partial: true, PartialReason: proto.String("host_silent"), PartialHosts: proto.String("sdw2"), PartialSince: endedAgo(time.Minute)}
	h = historyOf(t, nil, []*gpotelv1.EndedSession{s}, 200, 60)
	if !strings.Contains(h.line(" erin "), "conn.lost") {
		t.Errorf("the session's row does not show how it ended: %q", h.line(" erin "))
	}
	h.press("enter")
	if l := h.line("how it ended  "); !containsAll(l, []string{"conn.lost", "class 08", "08006", "partial: host silent: sdw2 since "}) {
		t.Errorf("the session's page does not say how it ended:\n%s", h.screen())
	}
}
