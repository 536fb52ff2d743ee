// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

var (
	headerStyle   = lipgloss.NewStyle().Bold(true)
	titleStyle    = lipgloss.NewStyle().Reverse(true)
	selectedStyle = lipgloss.NewStyle().Reverse(true)
	errorStyle    = lipgloss.NewStyle().Foreground(lipgloss.Color("9"))
	faintStyle    = lipgloss.NewStyle().Faint(true)
)

// noticeLife is how long an action's answer stays on the status line
// when no key is pressed.
const noticeLife = 10 * time.Second

// fetchedMsg carries one refresh's answers into the model.
type fetchedMsg struct {
	at   time.Time
	rows []SessionRow
	err  error
	// top is the cluster, hosts and top queries; topErr why it is missing.
	top    *gpotelv1.GetClusterTopResponse
	topErr error
	// pressure is the hosts view's pane; pressureErr why it is missing.
	pressure    []*gpotelv1.HostPressure
	pressureErr error
	// hist is the history's newest page when histAsked, for the history
	// as it was at histGen; histErr why it is missing.
	hist      *historyList
	histErr   error
	histGen   int
	histAsked bool
	// firings are the workload rules' latest firings, newest first;
	// firingsErr why they are missing.
	firings    []*gpotelv1.RuleAction
	firingsErr error
}

type tickMsg struct{}

// topModel is the full-screen client: it refetches every interval and on
// a sort change, and shows one list view (or one page over them).
type topModel struct {
	ctx      context.Context
	client   *sessionClient
	interval time.Duration
	sort     SortKey
	width    int
	height   int

	// The newest answers, but rows and at are the last successful
	// session list's: err is its failure until the next success.
	fetchedMsg

	// known is who each session seen lately was, for its queries once
	// it has left the list.
	known map[sessionKey]knownSession

	// history is what is held of the history view's list, historyErr
	// why it is missing; historyPage the page shown (0: the newest, asked
	// again each refresh; older ones stay as they were at historyAt).
	// historyGen tells answers asked before the page or filter changed.
	history     historyList
	historyErr  error
	historyPage int
	historyGen  int
	historyAt   time.Time

	view     int      // index in views
	selected []rowKey // per view
	filter   filter

	// page is shown over the lists (details, memory, help); nil: none.
	page   page
	scroll int
	// fetching: a tick's fetch has not answered yet.
	fetching bool
	// pending is a k or K awaiting y/N; input a filter being typed.
	pending  *pendingAction
	input    *textInput
	notice   string
	noticeAt time.Time
}

// newTopModel is the screen before its first answer.
func newTopModel(ctx context.Context, c *sessionClient, interval time.Duration, k SortKey) topModel {
	return topModel{ctx: ctx, client: c, interval: interval, sort: k, selected: make([]rowKey, len(views))}
}

// fetch asks for the newest answers, and for what the page shows.
func (m topModel) fetch() tea.Cmd {
	k := m.sort
	cmds := []tea.Cmd{func() tea.Msg { return m.answers(k) }}
	if m.page != nil {
		cmds = append(cmds, m.page.refresh(&m))
	}
	return tea.Batch(cmds...)
}

// answers asks for the cluster first, then the sessions: a session seen
// before the cluster's snapshot has ended, and the sessions are never
// older than that snapshot.
func (m topModel) answers(k SortKey) fetchedMsg {
	msg := fetchedMsg{}
	msg.top, msg.topErr = m.client.clusterTop(m.ctx, k)
	var newest time.Time
	if t := msg.top.GetSnapshotTimeUnixNano(); t > 0 {
		newest = time.Unix(0, t)
	}
	msg.rows, msg.err = m.client.sessions(m.ctx, k, newest)
	msg.at = time.Now()
	msg.pressure, msg.pressureErr = m.client.hostPressure(m.ctx)
	msg.firings, msg.firingsErr = m.client.ruleActions(m.ctx)
	if m.historyPage == 0 {
		msg.hist, msg.histErr = m.client.loadHistory(m.ctx, historyAsk{filter: m.filter})
		msg.histGen, msg.histAsked = m.historyGen, true
	}
	return msg
}

func (m topModel) tick() tea.Cmd {
	return tea.Tick(m.interval, func(time.Time) tea.Msg { return tickMsg{} })
}

func (m topModel) Init() tea.Cmd { return tea.Batch(m.fetch(), m.tick()) }

func (m topModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyMsg:
		if m.pending == nil && m.input != nil && msg.Type == tea.KeyRunes && !msg.Alt {
			return m.typeRunes(string(msg.Runes))
		}
		return m.key(msg.String())
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tickMsg:
		if m.notice != "" && time.Since(m.noticeAt) > noticeLife {
			m.notice = ""
		}
		if m.fetching { // a slow collector: do not pile calls up
			return m, m.tick()
		}
		m.fetching = true
		return m, tea.Batch(m.fetch(), m.tick())
	case actionDoneMsg:
		m.say(msg.text)
		return m, m.fetch()
	case fetchedMsg:
		m.fetching = false
		rows, at := m.rows, m.at
		m.fetchedMsg = msg
		if msg.err == nil {
			addClusterTop(m.rows, m.top)
			addRuleActions(m.rows, m.firings)
			m.known = remember(m.known, m.rows, msg.at)
		} else {
			m.rows, m.at = rows, at
		}
		if msg.histAsked && msg.histGen == m.historyGen {
			m.history, m.historyErr, m.historyAt = historyList{}, msg.histErr, msg.at
			if msg.hist != nil {
				m.history = *msg.hist
			}
		}
		m.selectFirstRows()
	case historyMsg:
		if msg.gen == m.historyGen {
			m.history, m.historyErr = *msg.list, msg.err
			m.selectFirstRows()
		}
	default:
		if m.page != nil {
			next, cmd := m.page.receive(msg)
			if next != nil {
				m.page = next
			}
			return m, cmd
		}
	}
	return m, nil
}

// selectFirstRows selects the first row of each view nothing was ever
// selected in, as top does. A selection that was made stays, even when its
// row is gone: the highlight never moves to another row by itself.
func (m *topModel) selectFirstRows() {
	for i, v := range views {
		if m.selected[i] != (rowKey{}) {
			continue
		}
		if l := v.listing(m, 0); len(l.keys) > 0 {
			m.selected[i] = l.keys[0]
		}
	}
}

// knownSession is who a session was: the processor keeps a query for its
// longest window, longer than the exporter keeps an ended session.
type knownSession struct {
	user, database string
	own            bool
	seen           time.Time
}

// Sessions are remembered for knownFor, at most maxKnown of them (a churn
// of short sessions must not grow the client without bound).
const (
	knownFor = 10 * time.Minute
	maxKnown = 10000
)

// remember adds the rows to what is known and forgets the oldest.
func remember(known map[sessionKey]knownSession, rows []SessionRow, now time.Time) map[sessionKey]knownSession {
	if known == nil {
		known = map[sessionKey]knownSession{}
	}
	for _, r := range rows {
		known[r.Key] = knownSession{user: r.User, database: r.Database, own: r.Own, seen: now}
	}
	for k, v := range known {
		if now.Sub(v.seen) > knownFor {
			delete(known, k)
		}
	}
	if over := len(known) - maxKnown; over > 0 {
		keys := make([]sessionKey, 0, len(known))
		for k := range known {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b sessionKey) int { return known[a].seen.Compare(known[b].seen) })
		for _, k := range keys[:over] {
			delete(known, k)
		}
	}
	return known
}

// say puts an answer on the status line until the next key or noticeLife.
func (m *topModel) say(text string) {
	m.notice, m.noticeAt = text, time.Now()
}

// key handles one key press: a prompt or a text being typed takes it
// first, then the page shown, then the list. Esc never quits.
func (m topModel) key(key string) (tea.Model, tea.Cmd) {
	if key == "ctrl+c" {
		return m, tea.Quit
	}
	switch {
	case m.pending != nil:
		return m.confirm(key)
	case m.input != nil:
		return m.typeInto(key)
	}
	m.notice = ""
	if m.page != nil {
		return m.pageKey(key)
	}
	if key == "q" {
		return m, tea.Quit
	}
	v := views[m.view]
	if v.name == "history" {
		if next, cmd, ok := m.historyKey(key); ok {
			return next, cmd
		}
	}
	list := v.listing(&m, m.width)
	switch key {
	case "esc":
		return m, nil
	case "tab", "shift+tab":
		step := 1
		if key == "shift+tab" {
			step = len(views) - 1
		}
		m.view = (m.view + step) % len(views)
		return m, nil
	case "up", "down", "j", "pgup", "pgdown", "home", "end":
		m.selected[m.view] = moveSelection(list.keys, m.selected[m.view], key, m.listRoom())
		return m, nil
	case "enter":
		switch i := list.index(m.selected[m.view]); {
		case v.open == nil:
			m.say("the " + v.name + " view has no details page")
		case i < 0:
			m.say("select a row first (↑/↓)")
		default:
			return m.openPage(v.open(&m, list.keys[i]))
		}
		return m, nil
	case "k", "K", "x":
		t, ok := m.target()
		if !ok {
			m.say("select a session first (↑/↓)")
			return m, nil
		}
		return m.act(t, key)
	case "u":
		return m.askFilter(userFilterLabel, m.filter.user, func(f *filter, s string) { f.user = s }), nil
	case "D":
		return m.askFilter(databaseFilterLabel, m.filter.database, func(f *filter, s string) { f.database = s }), nil
	case "g":
		m.filter.showOwn = !m.filter.showOwn
		return m, nil
	case "?":
		return m.openPage(helpPage{}, nil)
	}
	if k, ok := sortKeyForKey(key); ok {
		m.sort = k
		sortRows(m.rows, k)
		return m, m.fetch()
	}
	return m, nil
}

// target is what k, K and x act on: the selected row's session, or the
// page's.
func (m *topModel) target() (actionTarget, bool) {
	if m.page != nil {
		return m.page.target(m)
	}
	v := views[m.view]
	if v.target == nil {
		return actionTarget{}, false
	}
	if i := v.listing(m, m.width).index(m.selected[m.view]); i >= 0 {
		return v.target(m, m.selected[m.view])
	}
	return actionTarget{}, false
}

func (m topModel) openPage(p page, cmd tea.Cmd) (tea.Model, tea.Cmd) {
	m.page, m.scroll = p, 0
	return m, cmd
}

// pageKey: esc (or backspace, left) goes back; the arrows scroll; k, K and
// x act on the page's session; the page handles the rest.
func (m topModel) pageKey(key string) (tea.Model, tea.Cmd) {
	switch key {
	case "q":
		return m, tea.Quit
	case "esc", "backspace", "left":
		if back, ok := m.page.back(); ok {
			m.page, m.scroll = back, 0
			return m, nil
		}
		m.page = nil
		return m, nil
	case "up", "j", "down", "pgup", "pgdown", "home", "end":
		m.scroll = scrollBy(m.scroll, key, m.pageRoom())
		return m, nil
	case "k", "K", "x":
		t, ok := m.page.target(&m)
		if !ok {
			return m, nil
		}
		return m.act(t, key)
	}
	next, cmd := m.page.key(&m, key)
	if next != nil {
		m.page = next
	}
	return m, cmd
}

// act is k, K or x on a session: x opens its memory contexts (not of an
// ended one), k and K ask first.
func (m topModel) act(t actionTarget, key string) (tea.Model, tea.Cmd) {
	if key != "x" {
		return m.askToAct(t, key == "K"), nil
	}
	if t.session.Ended {
		m.say(fmt.Sprintf("session %d has ended: it has no memory contexts to show", t.session.Key.sessID))
		return m, nil
	}
	return m.openPage(newMemoryPage(&m, t.session))
}

// moveSelection moves the selection along keys; with nothing selected, a
// move selects the first row.
func moveSelection(keys []rowKey, sel rowKey, key string, page int) rowKey {
	if len(keys) == 0 {
		return sel
	}
	i := -1
	for j, k := range keys {
		if k == sel {
			i = j
		}
	}
	if i < 0 {
		return keys[0]
	}
	switch key {
	case "up":
		i--
	case "down", "j":
		i++
	case "pgup":
		i -= max(page, 1)
	case "pgdown":
		i += max(page, 1)
	case "home":
		i = 0
	case "end":
		i = len(keys) - 1
	}
	return keys[min(max(i, 0), len(keys)-1)]
}

func scrollBy(scroll int, key string, page int) int {
	switch key {
	case "up":
		scroll--
	case "down", "j":
		scroll++
	case "pgup":
		scroll -= max(page, 1)
	case "pgdown":
		scroll += max(page, 1)
	case "home":
		scroll = 0
	case "end":
		scroll = 1 << 30
	}
	return max(scroll, 0)
}

// View draws the screen. bubbletea's renderer rewrites only the lines that
// changed, in place (no clear per frame), so a refresh does not flicker;
// every line is cut to the width and the lines fit the height, so nothing
// scrolls.
func (m topModel) View() string {
	var body []string
	var helpItems []item
	title := views[m.view].name
	if m.page != nil {
		title = m.page.title()
		lines := m.page.lines(&m, m.width)
		room := m.pageRoom()
		if m.height <= 0 {
			room = len(lines)
		}
		scroll := min(m.scroll, max(len(lines)-room, 0))
		for _, l := range lines[scroll:min(scroll+room, len(lines))] {
			body = append(body, cutLine(l, m.width))
		}
		helpItems = m.page.help(&m)
		if len(lines) > room {
			helpItems = append(helpItems, item{3, fmt.Sprintf("↑↓ scroll (%d-%d of %d)", scroll+1, scroll+len(body), len(lines))})
		}
	} else {
		body = m.listScreen()
		helpItems = listHelp(views[m.view])
	}
	out := []string{titleStyle.Render(m.titleBar(title))}
	if m.page == nil {
		out = append(out, m.headerLines()...)
	}
	out = append(out, m.statusLine())
	out = append(out, body...)
	if m.height > 0 {
		for len(out) < m.height-1 {
			out = append(out, "")
		}
	}
	if m.pending != nil {
		helpItems = []item{{0, "y: do it"}, {0, "any other key: do nothing"}}
	} else if m.input != nil {
		helpItems = []item{{0, "enter: apply (empty: everyone)"}, {0, "esc: leave as it was"}}
	}
	out = append(out, faintStyle.Render(fitItems(helpItems, "  ", m.width)))
	return strings.Join(out, "\n")
}

// titleBar: the view or page, the sort, the counts and the filter on the
// left, as many as fit; the clock of the newest answer always on the right.
func (m topModel) titleBar(title string) string {
	clock := "--:--:--"
	if !m.at.IsZero() {
		clock = clockText(m.at)
	}
	live, active, ended, own, all := 0, 0, 0, 0, 0
	for i := range m.rows {
		r := &m.rows[i]
		switch {
		case r.Own && !m.filter.showOwn:
			own++
		case r.Ended:
			all++
			if m.filter.shows(r) {
				ended++
			}
		default:
			all++
			if !m.filter.shows(r) {
				continue
			}
			live++
			if r.State == "active" {
				active++
			}
		}
	}
	window := 0.0
	for _, r := range m.rows {
		window = max(window, r.Window)
	}
	parts := []item{
		{0, "gpotel-top"},
		{0, title},
		{1, m.sortText()},
		{1, fmt.Sprintf("sessions %d (%d active)", live, active)},
		{2, fmt.Sprintf("ended %d", ended)},
		{3, "window " + constantText(window)},
	}
	inHistory := m.page == nil && views[m.view].name == "history"
	switch f := m.filter.String(); {
	case inHistory && f != "":
		parts = append(parts, item{0, f}) // the history's rows are not counted
	case f != "":
		parts = append(parts, item{0, f + fmt.Sprintf(" (of %d)", all)})
	}
	if inHistory && m.filter.status != "" {
		parts = append(parts, item{0, "status " + m.filter.status})
	}
	if own > 0 {
		parts = append(parts, item{4, fmt.Sprintf("gpotel's own %d hidden (g)", own)})
	}
	parts = append(parts, item{5, m.client.opts.Addr})
	if m.width <= 0 {
		return fitItems(parts, "  ", 0) + "  " + clock
	}
	left := fitItems(parts, "  ", m.width-len(clock)-1)
	return left + strings.Repeat(" ", max(m.width-ansi.StringWidth(left)-len(clock), 1)) + clock
}

// sortText says how the shown list is ordered: the queries have no memory
// or delay figure (GetClusterTop ranks them by CPU for the delay, and
// leaves them unordered for memory); the hosts are in name order.
func (m topModel) sortText() string {
	if m.page != nil {
		return "sort " + m.sort.String()
	}
	switch views[m.view].name {
	case "queries":
		switch m.sort {
		case SortRunDelay, SortSmoothed:
			return "sort cpu (queries have no " + m.sort.String() + ")"
		case SortMemory:
			return "unsorted (queries have no memory)"
		}
	case "hosts":
		return "hosts by name"
	case "history":
		return m.historyTitle()
	}
	return "sort " + m.sort.String()
}

// headerLines are the cluster line and host bars over the lists (in the
// hosts view only the cluster line: the list is the hosts).
func (m topModel) headerLines() []string {
	switch {
	case m.topErr != nil:
		return []string{cutLine(m.topErr.Error(), m.width)}
	case m.top == nil:
		return nil
	case views[m.view].name == "hosts":
		return []string{clusterLine(m.top, capacityOf(m.top), m.width)}
	}
	hosts := len(m.top.GetHosts())
	if m.height > 0 {
		hosts = max((m.height-8)/4, 1)
	}
	return clusterHeader(m.top, hosts, m.width)
}

// statusLine is, by precedence: the y/N prompt, the text being typed, an
// action's answer, the list's failure, what a "!" means, or nothing.
func (m topModel) statusLine() string {
	switch {
	case m.pending != nil:
		return titleStyle.Render(m.pending.prompt(m.width))
	case m.input != nil:
		return titleStyle.Render(cutLine(m.input.label+": "+m.input.text+"_", m.width))
	case m.notice != "":
		return cutLine(m.notice, m.width)
	case m.err != nil:
		return errorStyle.Render(cutLine(m.err.Error(), m.width))
	}
	if m.impossibleShown() {
		return cutLine(capacityOf(m.top).note(), m.width)
	}
	return ""
}

// impossibleShown: a figure on the screen is marked impossibleMark.
func (m topModel) impossibleShown() bool {
	capa := capacityOf(m.top)
	if m.page != nil {
		return m.page.impossible(&m, capa)
	}
	return clusterImpossible(m.top, capa) || views[m.view].listing(&m, m.width).impossible
}

// chromeLines: the title, the status line and the help line.
const chromeLines = 3

// listRoom is how many rows of the list fit under the header.
func (m topModel) listRoom() int {
	if m.height <= 0 {
		return 1 << 30
	}
	return max(m.height-chromeLines-len(m.headerLines())-1, 1) // -1: the column titles
}

// pageRoom is how many lines of a page fit.
func (m topModel) pageRoom() int {
	if m.height <= 0 {
		return 1 << 30
	}
	return max(m.height-chromeLines, 1)
}

// listScreen is the list's column titles and the rows that fit, scrolled
// so the selected row shows; the selected row is marked and reversed, an
// ended one faint. Without a height (--once) every row, none selected.
func (m topModel) listScreen() []string {
	v := views[m.view]
	list := v.listing(&m, m.width)
	room := m.listRoom()
	sel := list.index(m.selected[m.view])
	if m.height <= 0 {
		sel = -1
	}
	from := 0
	if sel >= room {
		from = sel - room + 1
	}
	out := []string{headerStyle.Render(list.header)}
	for i := from; i < len(list.keys) && i < from+room; i++ {
		line := list.line(i, i == sel)
		switch {
		case i == sel:
			line = selectedStyle.Render(pad(line, m.width, false))
		case list.faint != nil && list.faint(i):
			line = faintStyle.Render(line)
		}
		out = append(out, line)
	}
	out = append(out, v.footer(&m, m.width, room-(len(out)-1))...)
	return out
}

func runTUI(ctx context.Context, c *sessionClient, interval time.Duration, k SortKey, f filter) error {
	m := newTopModel(ctx, c, interval, k)
	m.filter = f
	_, err := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx)).Run()
	if ctx.Err() != nil {
		return nil //nolint:nilerr // a cancelled context is the normal way out (Ctrl-C), not a failure
	}
	return err
}
