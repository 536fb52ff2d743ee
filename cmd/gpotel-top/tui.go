// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

var (
	headerStyle = lipgloss.NewStyle().Bold(true)
	titleStyle  = lipgloss.NewStyle().Reverse(true)
	errorStyle  = lipgloss.NewStyle().Foreground(lipgloss.Color("9"))
	helpStyle   = lipgloss.NewStyle().Faint(true)
)

// fetchedMsg carries one refresh's answer into the model.
type fetchedMsg struct {
	rows []SessionRow
	err  error
	at   time.Time
	// hosts is the per-host pressure pane's data; pressureErr why it is missing.
	hosts       []*gpotelv1.HostPressure
	pressureErr error
	// top is the cluster, hosts and top queries; topErr why it is missing.
	top    *gpotelv1.GetClusterTopResponse
	topErr error
}

// viewMode is which list the screen shows under the header.
type viewMode int

const (
	viewSessions viewMode = iota
	viewQueries
	viewHosts
	numViews
)

var viewNames = [numViews]string{"sessions", "queries", "hosts"}

type tickMsg struct{}

// topModel is the full-screen view: it refetches every interval and on a sort change.
type topModel struct {
	ctx      context.Context
	client   *sessionClient
	interval time.Duration
	sort     SortKey
	rows     []SessionRow
	hosts    []*gpotelv1.HostPressure
	pressErr error
	top      *gpotelv1.GetClusterTopResponse
	topErr   error
	view     viewMode
	err      error
	at       time.Time
	width    int
	height   int
	// selected is the session row the memory key opens.
	selected int
	// mem is the memory-context view; nil shows the session list.
	mem *memoryView
	// pending is a k or K awaiting y/N; notice the last action's answer.
	pending *pendingAction
	notice  string
}

func (m topModel) fetch() tea.Cmd {
	k := m.sort
	return func() tea.Msg {
		rows, err := m.client.sessions(m.ctx, k)
		hosts, perr := m.client.hostPressure(m.ctx)
		top, terr := m.client.clusterTop(m.ctx, k)
		return fetchedMsg{rows: rows, err: err, at: time.Now(), hosts: hosts, pressureErr: perr, top: top, topErr: terr}
	}
}

func (m topModel) tick() tea.Cmd {
	return tea.Tick(m.interval, func(time.Time) tea.Msg { return tickMsg{} })
}

func (m topModel) Init() tea.Cmd { return tea.Batch(m.fetch(), m.tick()) }

func (m topModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyMsg:
		key := msg.String()
		if m.mem != nil {
			return m.updateMemory(key)
		}
		if m.pending != nil {
			return m.confirm(key)
		}
		if key == "q" || key == "ctrl+c" || key == "esc" {
			return m, tea.Quit
		}
		switch key {
		case "k", "K":
			return m.askToAct(key == "K"), nil
		case "up":
			m.selected = max(m.selected-1, 0)
			return m, nil
		case "down", "j":
			m.selected = min(m.selected+1, max(len(m.rows)-1, 0))
			return m, nil
		case "x":
			if m.view == viewSessions {
				return m.openMemory()
			}
			return m, nil
		case "tab":
			m.view = (m.view + 1) % numViews
			return m, nil
		}
		if k, ok := sortKeyForKey(key); ok {
			m.sort = k
			sortRows(m.rows, k)
			return m, m.fetch()
		}
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tickMsg:
		return m, tea.Batch(m.fetch(), m.tick())
	case actionDoneMsg:
		m.notice = msg.text
		return m, m.fetch()
	case memoryMsg:
		if m.mem != nil && m.mem.sessID == msg.sessID {
			m.mem.resp, m.mem.err, m.mem.loading = msg.resp, msg.err, false
		}
	case fetchedMsg:
		m.err = msg.err
		if msg.err == nil {
			m.rows = msg.rows
			sortRows(m.rows, m.sort)
			m.at = msg.at
		}
		m.hosts, m.pressErr = msg.hosts, msg.pressureErr
		m.top, m.topErr = msg.top, msg.topErr
		addVmem(m.rows, m.top)
	}
	return m, nil
}

// askToAct prompts for the selected session's k (cancel its query) or K
// (terminate it); nothing is sent before y.
func (m topModel) askToAct(terminate bool) topModel {
	if m.view != viewSessions || m.selected >= len(m.rows) {
		return m
	}
	row := m.rows[m.selected]
	if !terminate && row.RunningQuery == nil {
		m.notice = fmt.Sprintf("session %d runs no query: nothing to cancel", row.SessID)
		return m
	}
	m.pending = &pendingAction{terminate: terminate, row: row}
	return m
}

// confirm sends the pending action on y; any other key drops it.
func (m topModel) confirm(key string) (tea.Model, tea.Cmd) {
	p := *m.pending
	m.pending = nil
	if key != "y" && key != "Y" {
		m.notice = "not sent: " + strings.TrimSuffix(p.prompt(), "? y/N")
		return m, nil
	}
	m.notice = "sending: " + strings.TrimSuffix(p.prompt(), "? y/N")
	return m, func() tea.Msg { return actionDoneMsg{text: firstLine(m.client.act(m.ctx, p))} }
}

// View draws the screen. bubbletea's renderer rewrites only the lines that
// changed, in place (no clear per frame), so a refresh does not flicker; every
// line is cut to the width and the lines fit the height, so nothing scrolls.
func (m topModel) View() string {
	if m.mem != nil {
		return m.memoryScreen()
	}
	var b strings.Builder
	lines := 0
	put := func(s string) { // s: whole lines, each ending in \n
		b.WriteString(s)
		lines += strings.Count(s, "\n")
	}
	status := summary(m.client.opts.Addr, m.rows, m.sort) + "  view " + viewNames[m.view]
	if !m.at.IsZero() {
		status += "  " + m.at.Format("15:04:05")
	}
	if m.width > 0 {
		status = pad(status, m.width, false) // fill the bar, cut to the screen
	}
	put(titleStyle.Render(status) + "\n")
	// The header: the cluster line and, but in the host view, a few host bars.
	switch {
	case m.topErr != nil:
		put(cut(m.topErr.Error(), m.width))
	case m.top != nil && m.view == viewHosts:
		put(cut(clusterLine(m.top), m.width))
	case m.top != nil:
		put(clusterHeader(m.top, max((m.height-8)/4, 1), m.width))
	}
	errLine := ansiCut(m.notice, m.width)
	switch {
	case m.pending != nil:
		errLine = titleStyle.Render(ansiCut(m.pending.prompt(), m.width))
	case m.err != nil:
		errLine = errorStyle.Render(ansiCut(m.err.Error(), m.width))
	}
	put(errLine + "\n")
	help := helpStyle.Render(ansiCut("sort c cpu m mem r rd w wr d delay s skew a avg | tab view | x memory | q quit | k cancel K end", m.width))
	room := m.height - lines - 1 // the help line
	if m.height <= 0 {
		room = 0 // size unknown yet: no cut
	}
	switch m.view {
	case viewQueries:
		if m.top == nil {
			put("\n")
		} else {
			table := queryTable(m.top.GetQueries(), max(room-1, 0), m.width)
			header, body, _ := strings.Cut(table, "\n")
			put(headerStyle.Render(header) + "\n" + body)
		}
	case viewHosts:
		pane := pressurePane(m.hosts, m.width)
		if m.pressErr != nil {
			pane = cut(m.pressErr.Error(), m.width)
		}
		if m.top != nil {
			hostRows := room
			if m.height > 0 && room-1-strings.Count(pane, "\n") >= len(m.top.GetHosts())+1 {
				hostRows = room - strings.Count(pane, "\n")
			} else {
				pane = "" // every host first; the pane only where it fits
			}
			table := hostTable(m.top, hostRows, m.width)
			header, body, _ := strings.Cut(table, "\n")
			put(headerStyle.Render(header) + "\n" + body)
		}
		put(pane)
	default:
		rows := m.rows
		if m.height > 0 && len(rows) > max(room-1, 0) {
			rows = rows[:max(room-1, 0)]
		}
		table := formatTable(rows, m.width)
		header, body, _ := strings.Cut(table, "\n")
		put(headerStyle.Render(header) + "\n")
		for i, line := range strings.SplitAfter(body, "\n") {
			if i == m.selected && line != "" {
				line = titleStyle.Render(strings.TrimSuffix(line, "\n")) + "\n"
			}
			put(line)
		}
	}
	b.WriteString(help)
	return b.String()
}

// ansiCut cuts s to width cells (no cut when width is unknown).
func ansiCut(s string, width int) string {
	if width <= 0 {
		return s
	}
	return ansi.Truncate(s, width, "")
}

func runTUI(ctx context.Context, c *sessionClient, interval time.Duration, k SortKey) error {
	m := topModel{ctx: ctx, client: c, interval: interval, sort: k}
	_, err := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx)).Run()
	if ctx.Err() != nil {
		return nil //nolint:nilerr // a cancelled context is the normal way out (Ctrl-C), not a failure
	}
	return err
}
