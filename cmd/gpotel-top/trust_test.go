// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// The tests a DBA's trust rests on (issue 33): what the screen says about a
// session is true of that session, now.

// snapshotTime is the newest snapshot's time in these tests.
var snapshotTime = time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC)

// seenAt stamps the time of the newest snapshot that held the session.
func seenAt(s *yagpcc.SessionState, t time.Time) *yagpcc.SessionState {
	s.Time = timestamppb.New(t)
	return s
}

// busy is a live active session using percent of a core over a 10 s window.
func busy(id int64, user string, percent float64) *yagpcc.SessionState {
	s := state(sessionFigures{sessID: id, user: user, db: "sales", state: "active",
		query: fmt.Sprintf("select work_of_%s()", user), userCPU: percent / 10, window: 10})
	s.RunningQuery = &yagpcc.QueryKey{Tmid: 1700000000, Ssid: int32(id), Ccnt: 3}
	return seenAt(s, snapshotTime)
}

// The highlighted row is a session, not a position: when the rows re-sort,
// k, K and Enter still act on the session the DBA chose; when it is gone,
// they act on no other.
func TestSelectionFollowsTheSessionAcrossRefreshes(t *testing.T) {
	api := &fakeAPI{sessions: []*yagpcc.SessionState{busy(11, "alice", 50), busy(12, "bob", 30), busy(13, "carol", 10)}}
	h := newTUI(t, api, 120, 30)
	h.press("down") // bob's session, second by CPU

	api.set(func(f *fakeAPI) {
		f.sessions = []*yagpcc.SessionState{busy(11, "alice", 10), busy(12, "bob", 80), busy(13, "carol", 50)}
	})
	h.refresh() // bob first now, carol second
	h.press("K")
	if l := h.line("y/N"); !strings.Contains(l, "session 12 ") {
		t.Fatalf("K after the rows re-sorted asks %q; session 12 (bob) was selected\n%s", l, h.screen())
	}
	h.press("n")
	h.press("enter")
	if !strings.Contains(h.screen(), "session 12 ") || strings.Contains(h.screen(), "session 13 ") {
		t.Fatalf("Enter after the re-sort does not show session 12:\n%s", h.screen())
	}
	h.press("esc")

	api.set(func(f *fakeAPI) { f.sessions = []*yagpcc.SessionState{busy(11, "alice", 10), busy(13, "carol", 50)} })
	h.refresh() // bob's session is gone
	h.press("K")
	if l := h.line("y/N"); l != "" {
		t.Fatalf("the selected session is gone, yet K asks %q", l)
	}
	if len(api.ended) != 0 {
		t.Fatalf("ended %v", api.ended)
	}
}

// twoHostsOfTwoCPUs: the cluster can do 400 % of a core; sdw1 reports 3
// cores of use on its 2 CPUs, session 11 and the query of session 16
// 1334 %: figures no host could deliver. Session 12 and sdw2 are possible.
func twoHostsOfTwoCPUs() *fakeAPI {
	sess11 := busy(11, "alice", 1334)
	sess12 := busy(12, "bob", 150)
	return &fakeAPI{
		sessions: []*yagpcc.SessionState{sess11, sess12, busy(16, "dave", 20)},
		top: &gpotelv1.GetClusterTopResponse{
			SnapshotTimeUnixNano: snapshotTime.UnixNano(), WindowSeconds: 10, TimeConstantSeconds: 60,
			Cluster: &gpotelv1.ClusterTotals{Hosts: 2, HostsUp: 2, Cpus: proto.Uint32(4), Usage: &gpotelv1.Usage{CpuCores: 4}},
			Hosts: []*gpotelv1.HostTop{
				{Hostname: "sdw1", Up: true, Cpus: proto.Uint32(2), Usage: &gpotelv1.Usage{CpuCores: 3, RssBytes: 1 << 30, Processes: 4}},
				{Hostname: "sdw2", Up: true, Cpus: proto.Uint32(2), Usage: &gpotelv1.Usage{CpuCores: 1, RssBytes: 1 << 30, Processes: 4}},
			},
			Queries: []*gpotelv1.QueryTop{
				{TmId: 1700000000, SessId: 16, CommandCount: proto.Int64(3), DurationSeconds: 0.1, CpuSeconds: 1.334,
					Usage: &gpotelv1.Usage{CpuCores: 13.34}, Query: "select work_of_dave()"},
				{TmId: 1700000000, SessId: 12, CommandCount: proto.Int64(3), DurationSeconds: 20, CpuSeconds: 30,
					Usage: &gpotelv1.Usage{CpuCores: 1.5}, Query: "select work_of_bob()"},
			},
		},
	}
}

// A CPU figure above what the hosts have (the CPUs the snapshot reports)
// is shown as the API gave it, never clamped, and marked "!" with the
// reason on the screen: the DBA is not led to act on it as if it were
// true, and the collector's error stays visible. A possible figure has
// no mark.
func TestNoFigureExceedsWhatTheHostCanDo(t *testing.T) {
	api := twoHostsOfTwoCPUs()
	h := newTUI(t, api, 160, 40)
	marked := func(view, header, rowOf, title, want string) {
		t.Helper()
		if got := cellUnder(h.line(header), h.line(rowOf), title); got != want {
			t.Errorf("%s view: %s of %q is %q, want %q\n%s", view, title, rowOf, got, want, h.screen())
		}
	}
	marked("sessions", " SESS ", "alice", "CPU%", "1334!")
	marked("sessions", " SESS ", "bob", "CPU%", "150")
	if !strings.Contains(h.screen(), "! more CPU than the hosts have") {
		t.Errorf("the screen does not say what ! means:\n%s", h.screen())
	}
	h.press("tab")
	marked("queries", " SESS ", "work_of_dave", "CPU%", "1334!")
	marked("queries", " SESS ", "work_of_bob", "CPU%", "150")
	h.press("tab")
	marked("hosts", "HOST ", "sdw1 ", "CPU%", "300!")
	marked("hosts", "HOST ", "sdw2 ", "CPU%", "100")
	marked("hosts", "HOST ", "sdw1 ", "CPUS", "2")
	h.press("tab", "tab") // the history, and back to the sessions; alice's is the first row
	h.press("enter")
	if !strings.Contains(h.screen(), "1334%!") {
		t.Errorf("session 11's details do not mark its CPU:\n%s", h.screen())
	}

	out := runOnce(t, "--addr", serveAPI(t, api), "--width", "160")
	if l := lineWith(out, "alice"); cellUnder(lineWith(out, " SESS "), l, "CPU%") != "1334!" {
		t.Errorf("--once does not mark session 11's CPU:\n%s", out)
	}
}

func lineWith(text, s string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// What the API leaves absent is shown as "-", never as 0: a live session
// the snapshot has no window figures for (which must not crash the
// screen either), spill the server does not report, a host without
// averages or pressure yet, a query without a command count.
func TestAbsentFiguresShowADash(t *testing.T) {
	noWindow := seenAt(&yagpcc.SessionState{
		SessionKey:       &yagpcc.SessionKey{SessId: 21, TmId: 1700000000},
		SessionInfo:      &yagpcc.SessionInfo{User: "erin", Database: "sales", State: "active"},
		RunningQueryInfo: &yagpcc.QueryInfo{QueryText: "select 1"},
	}, snapshotTime)
	noSpill := busy(22, "frank", 40)
	noSpill.LastMetrics.Spill = nil
	noWaits := state(sessionFigures{sessID: 23, user: "gina", db: "sales", state: "active", userCPU: 2, window: 10, unmeasuredWaits: true})
	api := &fakeAPI{
		sessions: []*yagpcc.SessionState{noWindow, noSpill, noWaits},
		top: &gpotelv1.GetClusterTopResponse{
			SnapshotTimeUnixNano: snapshotTime.UnixNano(), WindowSeconds: 10,
			Cluster: &gpotelv1.ClusterTotals{Hosts: 1},
			Hosts:   []*gpotelv1.HostTop{{Hostname: "sdw1", Up: true}},
			Queries: []*gpotelv1.QueryTop{{TmId: 1700000000, SessId: 22, DurationSeconds: 4, Query: "select work_of_frank()"}},
		},
	}
	h := newTUI(t, api, 200, 40)
	header := h.line(" SESS ")
	for _, c := range []struct{ row, title string }{
		{"erin", "CPU%"}, {"erin", "RD/s"}, {"erin", "WR/s"}, {"erin", "PRIV"}, {"erin", "SPILL"}, {"erin", "AVG%"}, {"erin", "RUNQ%"},
		{"frank", "SPILL"}, {"frank", "AVG%"}, {"frank", "VMEM"},
		{"gina", "RUNQ%"}, {"gina", "IOW%"}, {"gina", "MEMW%"},
	} {
		if got := cellUnder(header, h.line(c.row), c.title); got != "-" {
			t.Errorf("%s of %s's session: %q, want -\n%s", c.title, c.row, got, h.screen())
		}
	}
	h.press("down", "enter") // gina's: the waits neither over the window nor over its life
	for _, wait := range []string{"run-queue wait", "block I/O wait", "memory wait"} {
		if f := strings.Fields(strings.TrimPrefix(h.line(wait), wait)); len(f) != 2 || f[0] != "-" || f[1] != "-" {
			t.Errorf("gina's %s reads %q, want - over the window and - over its life\n%s", wait, h.line(wait), h.screen())
		}
	}
	h.press("esc", "tab")
	if got := cellUnder(h.line(" SESS "), h.line("work_of_frank"), "CCNT"); got != "-" {
		t.Errorf("a query without a command count shows CCNT %q\n%s", got, h.screen())
	}
	h.press("tab")
	for _, title := range []string{"CPU%", "RD/s", "MEM"} {
		if got := cellUnder(h.line("HOST "), h.line("sdw1 "), title); got != "-" {
			t.Errorf("a host without averages shows %s %q\n%s", title, got, h.screen())
		}
	}
	if out := runOnce(t, "--addr", serveAPI(t, api), "--width", "200"); cellUnder(lineWith(out, " SESS "), lineWith(out, "erin"), "CPU%") != "-" {
		t.Errorf("--once:\n%s", out)
	}
}

// A session the newest snapshot no longer holds (served for the grace
// period) has ended: it never reads "active", never sorts among the live
// ones, and k and K refuse it without asking.
func TestEndedSessionsAreNotShownActive(t *testing.T) {
	gone := seenAt(busy(12, "bob", 900), snapshotTime.Add(-10*time.Second))
	api := &fakeAPI{sessions: []*yagpcc.SessionState{gone, busy(11, "alice", 50)}}
	h := newTUI(t, api, 160, 30)
	bob, alice := h.line("bob"), h.line("alice")
	if bob == "" || strings.Contains(bob, "active") || !strings.Contains(bob, "ended") {
		t.Fatalf("the ended session reads %q\n%s", bob, h.screen())
	}
	if strings.Index(h.screen(), bob) < strings.Index(h.screen(), alice) {
		t.Errorf("the ended session sorts above a live one:\n%s", h.screen())
	}
	h.press("down")
	for _, key := range []string{"k", "K"} {
		h.press(key)
		if h.line("y/N") != "" || !strings.Contains(h.screen(), "session 12 has ended") {
			t.Errorf("%s on the ended session:\n%s", key, h.screen())
		}
	}
	if len(api.cancelled)+len(api.ended) != 0 {
		t.Errorf("acted on an ended session: %v %v", api.cancelled, api.ended)
	}
}

// clock is the title's wall clock, whole.
var clock = regexp.MustCompile(`\b\d\d:\d\d:\d\d\b`)

// At 80×24 every view keeps what a DBA decides with: the clock, the help
// line with k and K, and in the session list the query, who blocks whom,
// the I/O and the spill; the action prompt names the session whole.
func TestEveryViewFitsEightyByTwentyFour(t *testing.T) {
	api := twoHostsOfTwoCPUs()
	for i := range 30 {
		s := busy(int64(100+i), "a_rather_long_role_name", float64(i))
		s.RunningQueryInfo.QueryText = "select a_rather_long_column_name, another_one from a_table_with_a_long_name where x > 1"
		api.sessions = append(api.sessions, s)
	}
	api.memory = memoryAnswer()
	h := newTUI(t, api, 80, 24)
	check := func(what string, want ...string) {
		t.Helper()
		h.fits(what)
		lines := h.lines()
		if !clock.MatchString(lines[0]) {
			t.Errorf("%s: the title %q has no whole clock", what, lines[0])
		}
		for _, w := range want {
			if !strings.Contains(h.screen(), w) {
				t.Errorf("%s: %q is not on the screen:\n%s", what, w, h.screen())
			}
		}
	}
	keys := []string{"k cancel", "K terminate"}
	check("sessions", append(keys, "QUERY", "BLOCKED", "RD/s", "WR/s", "SPILL", "CPU%")...)
	h.press("tab")
	check("queries", append(keys, "QUERY", "CPU%", "DUR")...)
	h.press("tab")
	check("hosts", "sdw1", "sdw2", "CPU%")
	h.press("tab")
	check("history", "END", "STATUS", "CPU", "READ", "WRITE")
	h.press("tab")
	h.press("enter")
	check("details", "session 11 ", "alice")
	h.press("esc")
	h.press("x")
	check("memory", "Caller tuples")
	h.press("esc")
	h.press("?")
	check("help", "k ", "K ", "q ")
	h.press("esc")
	h.press("K")
	check("prompt")
	if l := h.line("y/N"); !strings.Contains(l, "session 11 ") || !strings.HasSuffix(strings.TrimRight(l, " "), "y/N") {
		t.Errorf("the prompt %q must name session 11 whole and end in y/N", l)
	}
	h.press("n")
	h.press("u")
	check("user filter")
}

// hostile is what a database user can put in a role, database or
// application name, a query or a log line: an OSC 52 write to the DBA's
// clipboard, a hidden-text SGR, a CSI as one C1 character, DEL, NUL and a
// right-to-left override. (Bytes that are not UTF-8 cannot travel in a
// protobuf string: the client's decoder refuses the whole answer.)
const hostile = "x\x1b]52;c;aGk=\x07\x1b[8m\u009b2J\x7f\x00\u202ey"

// poison sets every string of m, and of every message in it, to hostile,
// and adds a hostile key to every string-keyed map.
func poison(m protoreflect.Message) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsMap():
			if fd.MapKey().Kind() == protoreflect.StringKind && fd.MapValue().Kind() != protoreflect.MessageKind {
				m.Mutable(fd).Map().Set(protoreflect.ValueOfString(hostile).MapKey(), fd.MapValue().Default())
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			switch {
			case fd.Kind() == protoreflect.StringKind:
				l.Append(protoreflect.ValueOfString(hostile))
			case fd.Kind() == protoreflect.MessageKind:
				for j := range l.Len() {
					poison(l.Get(j).Message())
				}
			}
		case fd.Kind() == protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString(hostile))
		case fd.Kind() == protoreflect.MessageKind && m.Has(fd):
			poison(m.Mutable(fd).Message())
		}
	}
}

// rawControl is the first terminal control in s: C0 but the newline, DEL,
// C1, a bidirectional override, or a byte that is not UTF-8.
func rawControl(s string) (string, bool) {
	if !utf8.ValidString(s) {
		return "invalid UTF-8", true
	}
	for _, r := range s {
		if r < 0x20 && r != '\n' || r >= 0x7f && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
			return fmt.Sprintf("%U", r), true
		}
	}
	return "", false
}

// Every string that came from a server is cleaned before it is measured
// or drawn: in every view, the prompt, the answers and errors, and --once.
func TestNoServerStringReachesTheTerminalRaw(t *testing.T) {
	lipgloss.SetColorProfile(termenv.Ascii) // only the server's bytes could be controls
	api := twoHostsOfTwoCPUs()
	api.pressure = []*gpotelv1.HostPressure{{Hostname: "sdw1", Pressure: someFull("cpu", 0.5, 0.1),
		Groups: []*gpotelv1.GroupPressure{{Name: "default_group", Tasks: map[string]int64{"running": 1}}}}}
	api.memory = memoryAnswer()
	api.queries = map[int32]*yagpcc.TotalQueryData{11: {QueryStat: &yagpcc.QueryStat{QueryInfo: &yagpcc.QueryInfo{QueryText: "q"}},
		SegmentQueryMetrics: []*yagpcc.SegmentMetrics{{Hostname: "sdw1", SegmentKey: &yagpcc.SegmentKey{Segindex: 0}}}}}
	api.sessions[0].SessionInfo.BlockedBySessId = 12
	for _, m := range api.sessions {
		poison(m.ProtoReflect())
	}
	for _, m := range []proto.Message{api.top, api.memory, api.queries[11]} {
		poison(m.ProtoReflect())
	}
	for _, p := range api.pressure {
		poison(p.ProtoReflect())
	}
	// Every string poisoned, and a known text after it to find the row by.
	api.finished = []*gpotelv1.FinishedQuery{{TmId: 1, SessId: 21, QueryText: proto.String(""), CpuTime: proto.Float64(1)}}
	api.endedSessions = []*gpotelv1.EndedSession{{TmId: 1, SessId: 23, Application: proto.String("")}}
	poison(api.finished[0].ProtoReflect())
	poison(api.endedSessions[0].ProtoReflect())
	// A rule's firing on a live session and one on the finished query:
	// names a collector's configuration and the database users chose.
	api.firings = []*gpotelv1.RuleAction{{TmId: 1700000000, SessId: 11, FiredAt: timestamppb.New(snapshotTime)},
		{TmId: 1, SessId: 21, QueryStart: api.finished[0].QueryStart, FiredAt: timestamppb.New(snapshotTime)}}
	for _, f := range api.firings {
		poison(f.ProtoReflect())
		f.Outcome = "done"
	}
	*api.finished[0].QueryText += "select_poisoned"
	api.actionText = hostile

	clean := func(what, screen string) {
		t.Helper()
		if c, bad := rawControl(screen); bad {
			t.Errorf("%s: %s reaches the terminal:\n%q", what, c, screen)
		}
	}
	h := newTUI(t, api, 200, 50)
	clean("sessions", h.raw())
	h.press("enter")
	clean("details", h.raw())
	h.press("esc")
	h.press("tab")
	clean("queries", h.raw())
	h.press("tab")
	clean("hosts", h.raw())
	h.press("tab")
	if !strings.Contains(h.screen(), "select_poisoned") {
		t.Errorf("the history does not show its poisoned items:\n%s", h.screen())
	}
	clean("history", h.raw())
	for range 2 { // the query's page, then the session's
		h.press("enter")
		if !strings.Contains(h.lines()[0], "finished query") && !strings.Contains(h.lines()[0], "ended session") {
			t.Errorf("enter in the history opens no page:\n%s", h.screen())
		}
		clean("history details", h.raw())
		h.press("esc", "down")
	}
	h.press("tab")
	h.press("x")
	clean("memory roll-up", h.raw())
	h.press("tab")
	clean("memory tree", h.raw())
	h.press("esc", "esc")
	h.press("K")
	clean("prompt", h.raw())
	h.press("y")
	clean("answer", h.raw())
	api.set(func(f *fakeAPI) { f.actionErr = status.Error(codes.FailedPrecondition, hostile) })
	h.press("k", "y")
	clean("refusal", h.raw())
	api.set(func(f *fakeAPI) { f.memoryErr = status.Error(codes.Internal, hostile) })
	h.press("x")
	clean("memory error", h.raw())
	h.press("esc")
	api.set(func(f *fakeAPI) { f.sessionsErr = status.Error(codes.Internal, hostile) })
	h.refresh()
	clean("list error", h.raw())

	api.set(func(f *fakeAPI) { f.sessionsErr, f.memoryErr = nil, nil })
	addr := serveAPI(t, api)
	for _, args := range [][]string{{}, {"--view", "queries"}, {"--view", "hosts"}, {"--view", "history"}, {"--memory", "11"},
		{"--memory", "11", "--backend", "1"}} {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"--once", "--addr", addr}, args...), &out)
		clean(fmt.Sprint("--once ", args), out.String())
		if err != nil {
			clean(fmt.Sprint("--once ", args, " error"), err.Error())
		}
	}
}

// A figure wider than its column is shown whole, never cut: a cut one
// would hide the collector's error it shows.
func TestAFigureIsNeverCut(t *testing.T) {
	h := newTUI(t, &fakeAPI{sessions: []*yagpcc.SessionState{busy(11, "alice", 1234567)}}, 120, 20)
	if !strings.Contains(h.line("alice"), " 1234567 ") {
		t.Errorf("the figure is cut: %q", h.line("alice"))
	}
}

// Smaller and larger than 80×24 alike, no view wraps or scrolls the
// terminal: every line of every view and page is cut to the width, and
// the lines fit the height.
func TestEveryViewFitsAnySize(t *testing.T) {
	for _, size := range [][2]int{{200, 50}, {120, 12}, {60, 15}, {40, 10}, {30, 8}} {
		api := twoHostsOfTwoCPUs()
		api.memory = memoryAnswer()
		h := newTUI(t, api, size[0], size[1])
		for _, keys := range [][]string{{}, {"tab"}, {"tab"}, {"tab"}, {"tab", "enter"}, {"esc", "x"}, {"tab"}, {"esc", "esc", "?"}, {"esc", "K"}, {"n", "u"}} {
			h.press(keys...)
			h.fits(fmt.Sprint(size, keys))
		}
	}
}
