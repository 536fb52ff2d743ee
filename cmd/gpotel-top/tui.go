package main

import (
	"context"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

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
}

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
	err      error
	at       time.Time
	width    int
	height   int
}

func (m topModel) fetch() tea.Cmd {
	k := m.sort
	return func() tea.Msg {
		rows, err := m.client.sessions(m.ctx, k)
		hosts, perr := m.client.hostPressure(m.ctx)
		return fetchedMsg{rows: rows, err: err, at: time.Now(), hosts: hosts, pressureErr: perr}
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
		if key == "q" || key == "ctrl+c" || key == "esc" {
			return m, tea.Quit
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
	case fetchedMsg:
		m.err = msg.err
		if msg.err == nil {
			m.rows = msg.rows
			sortRows(m.rows, m.sort)
			m.at = msg.at
		}
		m.hosts, m.pressErr = msg.hosts, msg.pressureErr
	}
	return m, nil
}

func (m topModel) View() string {
	var b strings.Builder
	status := summary(m.client.opts.Addr, m.rows, m.sort)
	if !m.at.IsZero() {
		status += "  " + m.at.Format("15:04:05")
	}
	b.WriteString(titleStyle.Render(pad(status, max(m.width, len(status)), false)))
	b.WriteByte('\n')
	if m.err != nil {
		b.WriteString(errorStyle.Render(m.err.Error()))
	}
	b.WriteByte('\n')
	rows := m.rows
	pane := pressurePane(m.hosts, m.width)
	if m.pressErr != nil {
		pane = m.pressErr.Error() + "\n"
	}
	// Title, error line, table header and help line take four lines; the pane below the table the rest.
	if room := m.height - 4 - strings.Count(pane, "\n"); m.height > 4 && len(rows) > max(room, 0) {
		rows = rows[:max(room, 0)]
	}
	table := formatTable(rows, m.width)
	header, body, _ := strings.Cut(table, "\n")
	b.WriteString(headerStyle.Render(header))
	b.WriteByte('\n')
	b.WriteString(body)
	b.WriteString(pane)
	b.WriteString(helpStyle.Render("sort: c cpu  m memory  r read  w write  d run-queue delay   q quit"))
	return b.String()
}

func runTUI(ctx context.Context, c *sessionClient, interval time.Duration, k SortKey) error {
	m := topModel{ctx: ctx, client: c, interval: interval, sort: k}
	_, err := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx)).Run()
	if ctx.Err() != nil {
		return nil //nolint:nilerr // a cancelled context is the normal way out (Ctrl-C), not a failure
	}
	return err
}
