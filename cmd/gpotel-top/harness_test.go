// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"cmp"
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gpotel/gpotel/internal/clientname"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// fakeAPI is every service gpotel-top calls, on one in-process server, as
// the sessionstate exporter serves them; a test changes its answers
// between refreshes.
type fakeAPI struct {
	yagpcc.UnimplementedGetGPInfoServer
	yagpcc.UnimplementedActionServiceServer
	gpotelv1.UnimplementedClusterTopServer
	gpotelv1.UnimplementedPressureServiceServer
	gpotelv1.UnimplementedSessionMemoryContextsServer
	gpotelv1.UnimplementedFinishedWorkServer
	gpotelv1.UnimplementedRuleActionsServer

	mu       sync.Mutex
	sessions []*yagpcc.SessionState
	top      *gpotelv1.GetClusterTopResponse
	pressure []*gpotelv1.HostPressure
	memory   *gpotelv1.GetSessionMemoryContextsResponse
	// finished and ended are the FinishedWork service's items, in any order.
	finished      []*gpotelv1.FinishedQuery
	endedSessions []*gpotelv1.EndedSession
	// firings are ListRuleActions' answer, newest first.
	firings []*gpotelv1.RuleAction
	// queries answers GetGPQuery by session id.
	queries map[int32]*yagpcc.TotalQueryData
	// Errors to answer with instead; nil: answer.
	sessionsErr, memoryErr, actionErr error
	// actionText is the text of a successful action's answer.
	actionText string
	// token, when set, is the bearer token GetGPSessions wants.
	token string
	// onlySessions serves GetGPInfo alone, as a collector before gpotel.v1 did.
	onlySessions bool

	cancelled    []*yagpcc.QueryKey
	ended        []*yagpcc.SessionKey
	actionTokens []string
	sessionReqs  []*yagpcc.GetGPSessionsReq
	topReqs      []*gpotelv1.GetClusterTopRequest
	memoryAsked  []*gpotelv1.SessionKey
	historyReqs  []*gpotelv1.ListFinishedWorkRequest
}

func (f *fakeAPI) GetGPSessions(ctx context.Context, req *yagpcc.GetGPSessionsReq) (*yagpcc.GetGPSessionsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sessionReqs = append(f.sessionReqs, req)
	if f.token != "" {
		md, _ := metadata.FromIncomingContext(ctx)
		if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer "+f.token {
			return nil, status.Error(codes.Unauthenticated, "bad token")
		}
	}
	if f.sessionsErr != nil {
		return nil, f.sessionsErr
	}
	return &yagpcc.GetGPSessionsResponse{SessionsState: cloneAll(f.sessions)}, nil
}

func (f *fakeAPI) GetGPSession(_ context.Context, req *yagpcc.GetGPSessionReq) (*yagpcc.GetGPSessionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.sessions {
		if proto.Equal(s.GetSessionKey(), req.GetSessionKey()) {
			return &yagpcc.GetGPSessionResponse{SessionsState: proto.Clone(s).(*yagpcc.SessionState)}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "no session %v", req.GetSessionKey())
}

func (f *fakeAPI) GetGPQuery(_ context.Context, req *yagpcc.GetGPQueryReq) (*yagpcc.GetGPQueryResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if q, ok := f.queries[req.GetQueryKey().GetSsid()]; ok {
		return &yagpcc.GetGPQueryResponse{QueriesData: proto.Clone(q).(*yagpcc.TotalQueryData)}, nil
	}
	return nil, status.Errorf(codes.NotFound, "no query %v", req.GetQueryKey())
}

func (f *fakeAPI) GetClusterTop(_ context.Context, req *gpotelv1.GetClusterTopRequest) (*gpotelv1.GetClusterTopResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.topReqs = append(f.topReqs, req)
	if f.top == nil {
		return &gpotelv1.GetClusterTopResponse{}, nil
	}
	return proto.Clone(f.top).(*gpotelv1.GetClusterTopResponse), nil
}

func (f *fakeAPI) GetHostPressure(context.Context, *gpotelv1.GetHostPressureRequest) (*gpotelv1.GetHostPressureResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &gpotelv1.GetHostPressureResponse{SnapshotTimeUnixNano: 1, Hosts: cloneAll(f.pressure)}, nil
}

func (f *fakeAPI) GetSessionMemoryContexts(
	_ context.Context, req *gpotelv1.GetSessionMemoryContextsRequest,
) (*gpotelv1.GetSessionMemoryContextsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.memoryAsked = append(f.memoryAsked, req.GetSessionKey())
	if f.memoryErr != nil {
		return nil, f.memoryErr
	}
	if f.memory == nil {
		return &gpotelv1.GetSessionMemoryContextsResponse{}, nil
	}
	return proto.Clone(f.memory).(*gpotelv1.GetSessionMemoryContextsResponse), nil
}

func (f *fakeAPI) TerminateQuery(ctx context.Context, req *yagpcc.TerminateQueryRequest) (*yagpcc.TerminateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled = append(f.cancelled, req.GetQueryKey())
	return f.actionAnswer(ctx)
}

func (f *fakeAPI) TerminateSession(ctx context.Context, req *yagpcc.TerminateSessionRequest) (*yagpcc.TerminateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = append(f.ended, req.GetSessionKey())
	return f.actionAnswer(ctx)
}

func (f *fakeAPI) actionAnswer(ctx context.Context) (*yagpcc.TerminateResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.actionTokens = append(f.actionTokens, strings.Join(md.Get(clientname.ActionTokenHeader), ","))
	if f.actionErr != nil {
		return nil, f.actionErr
	}
	text := f.actionText
	if text == "" {
		text = "done"
	}
	return &yagpcc.TerminateResponse{StatusCode: yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_SUCCESS, StatusText: text}, nil
}

// set changes the answers under the lock.
func (f *fakeAPI) set(change func(f *fakeAPI)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

func cloneAll[M proto.Message](in []M) []M {
	out := make([]M, len(in))
	for i, m := range in {
		out[i] = proto.Clone(m).(M)
	}
	return out
}

// serveAPI starts the fake on a loopback port.
func serveAPI(t *testing.T, f *fakeAPI) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	yagpcc.RegisterGetGPInfoServer(srv, f)
	if !f.onlySessions {
		yagpcc.RegisterActionServiceServer(srv, f)
		gpotelv1.RegisterClusterTopServer(srv, f)
		gpotelv1.RegisterPressureServiceServer(srv, f)
		gpotelv1.RegisterSessionMemoryContextsServer(srv, f)
		gpotelv1.RegisterFinishedWorkServer(srv, f)
		gpotelv1.RegisterRuleActionsServer(srv, f)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// tui drives the screen as a terminal would, at a fixed size: key presses
// in, the rendered screen out; every command a key starts runs to its end
// before the next key (the periodic tick never runs: refresh stands for it).
type tui struct {
	t      *testing.T
	m      tea.Model
	quit   bool
	width  int
	height int
}

func newTUI(t *testing.T, f *fakeAPI, width, height int) *tui {
	t.Helper()
	return newTUIWith(t, clientOptions{Addr: serveAPI(t, f), CallTimeout: 5 * time.Second}, width, height)
}

// newTUIWith is newTUI for a client with its own options.
func newTUIWith(t *testing.T, o clientOptions, width, height int) *tui {
	t.Helper()
	c, err := dial(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	h := &tui{t: t, m: newTopModel(context.Background(), c, time.Second, SortCPU), width: width, height: height}
	h.send(tea.WindowSizeMsg{Width: width, Height: height})
	h.refresh()
	return h
}

// refresh is one tick's fetch.
func (h *tui) refresh() { h.run(h.m.(topModel).fetch()) }

// keyMsg is the key a terminal sends for a name.
func keyMsg(key string) tea.KeyMsg {
	for t, name := range map[tea.KeyType]string{
		tea.KeyUp: "up", tea.KeyDown: "down", tea.KeyEnter: "enter", tea.KeyEsc: "esc", tea.KeyTab: "tab",
		tea.KeyShiftTab: "shift+tab", tea.KeyBackspace: "backspace", tea.KeyCtrlC: "ctrl+c", tea.KeyPgDown: "pgdown",
		tea.KeyPgUp: "pgup", tea.KeyHome: "home", tea.KeyEnd: "end", tea.KeyLeft: "left", tea.KeyRight: "right", tea.KeyCtrlU: "ctrl+u",
	} {
		if name == key {
			return tea.KeyMsg{Type: t}
		}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(key)}
}

// press sends keys one by one ("abc" is one key of three runes; use
// several arguments for several keys).
func (h *tui) press(keys ...string) {
	for _, k := range keys {
		h.send(keyMsg(k))
	}
}

// typeText sends each rune as its own key, as typing does.
func (h *tui) typeText(s string) {
	for _, r := range s {
		h.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
}

func (h *tui) send(msg tea.Msg) {
	m, cmd := h.m.Update(msg)
	h.m = m
	h.run(cmd)
}

// run runs a command and what its messages start, to the end.
func (h *tui) run(cmd tea.Cmd) {
	for queue := []tea.Cmd{cmd}; len(queue) > 0; queue = queue[1:] {
		if queue[0] == nil {
			continue
		}
		switch msg := queue[0]().(type) {
		case nil:
		case tea.QuitMsg:
			h.quit = true
		case tea.BatchMsg:
			queue = append(queue, msg...)
		default:
			m, next := h.m.Update(msg)
			h.m = m
			queue = append(queue, next)
		}
	}
}

// raw is the screen as the terminal gets it.
func (h *tui) raw() string { return h.m.View() }

// screen is what the terminal shows, without styles.
func (h *tui) screen() string { return ansi.Strip(h.m.View()) }

func (h *tui) lines() []string { return strings.Split(h.screen(), "\n") }

// line is the first screen line containing s; "" when none does.
func (h *tui) line(s string) string {
	for _, l := range h.lines() {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// fits fails the test when the screen is taller or wider than the terminal.
func (h *tui) fits(what string) {
	h.t.Helper()
	lines := h.lines()
	if len(lines) > h.height {
		h.t.Errorf("%s: %d lines on a %d-line terminal:\n%s", what, len(lines), h.height, h.screen())
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w > h.width {
			h.t.Errorf("%s: line %d is %d cells wide on %d: %q", what, i, w, h.width, l)
		}
	}
}

// cellUnder is the figure of a right-aligned column on a row: the run of
// non-blanks that ends where the column's title ends in the header
// (counted in runes: every character on these screens is one cell wide).
func cellUnder(header, row, title string) string {
	h, r := []rune(header), []rune(row)
	i := strings.Index(string(h), " "+title+" ")
	if i < 0 && strings.HasSuffix(header, " "+title) {
		i = len(header) - len(title) - 1
	}
	if i < 0 {
		return "no column " + title
	}
	end := len([]rune(header[:i])) + 1 + len([]rune(title))
	if end > len(r) {
		return ""
	}
	start := end
	for start > 0 && r[start-1] != ' ' {
		start--
	}
	return string(r[start:end])
}

// byEnd orders items by their end time as the exporter does when sort_by
// is empty (ties in session order): newest first when descending.
func byEnd[M proto.Message](items []M, end func(M) time.Time, sess func(M) int64, descending bool) []M {
	out := cloneAll(items)
	slices.SortStableFunc(out, func(a, b M) int {
		c := end(a).Compare(end(b))
		if descending {
			c = -c
		}
		return cmp.Or(c, cmp.Compare(sess(a), sess(b)))
	})
	return out
}

// pageOfFinished is one page of items as the exporter answers it: the
// request's users and databases only, page_size of them after the page
// token's place, and the token of the next when more match.
func pageOfFinished[M proto.Message](f *fakeAPI, req *gpotelv1.ListFinishedWorkRequest, items []M, who func(M) (string, string)) ([]M, string) {
	f.historyReqs = append(f.historyReqs, proto.Clone(req).(*gpotelv1.ListFinishedWorkRequest))
	var matching []M
	for _, it := range items {
		user, db := who(it)
		if (len(req.GetUsers()) == 0 || slices.Contains(req.GetUsers(), user)) && (len(req.GetDatabases()) == 0 || slices.Contains(req.GetDatabases(), db)) {
			matching = append(matching, it)
		}
	}
	from := 0
	if tok := req.GetPageToken(); tok != "" {
		from, _ = strconv.Atoi(strings.TrimPrefix(tok, "after:"))
	}
	from = min(from, len(matching))
	to := min(from+int(req.GetPageSize()), len(matching))
	next := ""
	if to < len(matching) {
		next = "after:" + strconv.Itoa(to)
	}
	return matching[from:to], next
}

// ListFinishedQueries answers one page of the finished queries, by end time.
func (f *fakeAPI) ListFinishedQueries(_ context.Context, req *gpotelv1.ListFinishedWorkRequest) (*gpotelv1.ListFinishedQueriesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	qs := byEnd(f.finished, func(q *gpotelv1.FinishedQuery) time.Time { return q.GetQueryEnd().AsTime() },
		(*gpotelv1.FinishedQuery).GetSessId, req.GetDescending())
	page, next := pageOfFinished(f, req, qs, func(q *gpotelv1.FinishedQuery) (string, string) { return q.GetUsername(), q.GetDatabase() })
	return &gpotelv1.ListFinishedQueriesResponse{Queries: page, NextPageToken: next}, nil
}

// ListEndedSessions answers one page of the ended sessions, by end time.
func (f *fakeAPI) ListEndedSessions(_ context.Context, req *gpotelv1.ListFinishedWorkRequest) (*gpotelv1.ListEndedSessionsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ss := byEnd(f.endedSessions, func(s *gpotelv1.EndedSession) time.Time { return s.GetSessionEnd().AsTime() },
		(*gpotelv1.EndedSession).GetSessId, req.GetDescending())
	page, next := pageOfFinished(f, req, ss, func(s *gpotelv1.EndedSession) (string, string) { return s.GetUsername(), s.GetDatabase() })
	return &gpotelv1.ListEndedSessionsResponse{Sessions: page, NextPageToken: next}, nil
}

func (f *fakeAPI) ListRuleActions(context.Context, *gpotelv1.ListRuleActionsRequest) (*gpotelv1.ListRuleActionsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &gpotelv1.ListRuleActionsResponse{RuleActions: f.firings}, nil
}
