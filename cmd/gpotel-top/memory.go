// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// memoryWait is added to the call timeout: the agents may wait 5 s for a backend.
const memoryWait = 10 * time.Second

// memoryContexts asks the exporter's GetSessionMemoryContexts for one session.
func (c *sessionClient) memoryContexts(ctx context.Context, tmID, sessID int64, summary bool) (*gpotelv1.GetSessionMemoryContextsResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout+memoryWait)
	defer cancel()
	resp, err := gpotelv1.NewSessionMemoryContextsClient(c.conn).GetSessionMemoryContexts(ctx, &gpotelv1.GetSessionMemoryContextsRequest{
		SessionKey: &gpotelv1.SessionKey{TmId: tmID, SessId: sessID}, Summary: summary})
	if err != nil {
		return nil, fmt.Errorf("GetSessionMemoryContexts %s sess %d: %w", c.opts.Addr, sessID, err)
	}
	return resp, nil
}

// barWidth is the width of the bars in the memory views.
const barWidth = 24

// bar draws v of most as a run of blocks.
func bar(v, most int64) string {
	if most <= 0 || v <= 0 {
		return strings.Repeat(" ", barWidth)
	}
	n := int((v*barWidth + most - 1) / most)
	return strings.Repeat("█", min(n, barWidth)) + strings.Repeat(" ", barWidth-min(n, barWidth))
}

func cut(s string, width int) string {
	s = strings.TrimRight(s, " ")
	if width > 0 {
		s = ansi.Truncate(s, width, "")
	}
	return s + "\n"
}

// formatRollup is the session's memory by context name, largest first,
// then the backends (numbered for drilling into one).
func formatRollup(resp *gpotelv1.GetSessionMemoryContextsResponse, width, rowsMax int) string {
	var b strings.Builder
	b.WriteString(cut(fmt.Sprintf("%-32s %8s %s %8s  %s", "CONTEXT", "TOTAL", pad("", barWidth, false), "BACKENDS", "LARGEST IN"), width))
	var most int64
	if len(resp.GetRollup()) > 0 {
		most = resp.GetRollup()[0].GetTotalBytes()
	}
	rows := resp.GetRollup()
	if rowsMax > 0 && len(rows) > rowsMax {
		rows = rows[:rowsMax]
	}
	for _, r := range rows {
		largest := ""
		if tb := r.GetTopBackends(); len(tb) > 0 {
			largest = fmt.Sprintf("%s seg%d pid %d (%s)", tb[0].GetHostname(), tb[0].GetSegmentId(), tb[0].GetPid(), formatBytes(float64(tb[0].GetTotalBytes())))
		}
		b.WriteString(cut(fmt.Sprintf("%-32s %8s %s %8d  %s", pad(r.GetName(), 32, false), formatBytes(float64(r.GetTotalBytes())),
			bar(r.GetTotalBytes(), most), r.GetBackends(), largest), width))
	}
	b.WriteString(cut("", width))
	for i, be := range resp.GetBackends() {
		state := formatBytes(float64(be.GetGrandTotal().GetTotalBytes()))
		if be.GetError() != "" {
			state = "no answer: " + be.GetError()
		}
		b.WriteString(cut(fmt.Sprintf("[%d] %s seg%d pid %d  %s", i+1, be.GetHostname(), be.GetSegmentId(), be.GetPid(), state), width))
	}
	return b.String()
}

// formatBackendTree is one backend's contexts as an indented tree.
func formatBackendTree(be *gpotelv1.BackendMemoryContexts, width, rowsMax int) string {
	var b strings.Builder
	if be.GetError() != "" {
		return cut(fmt.Sprintf("%s seg%d pid %d: no answer: %s", be.GetHostname(), be.GetSegmentId(), be.GetPid(), be.GetError()), width)
	}
	b.WriteString(cut(fmt.Sprintf("%s seg%d pid %d  grand total %s  from %s", be.GetHostname(), be.GetSegmentId(), be.GetPid(),
		formatBytes(float64(be.GetGrandTotal().GetTotalBytes())), be.GetSource()), width))
	b.WriteString(cut(fmt.Sprintf("%-44s %8s %8s %s", "CONTEXT", "TOTAL", "USED", ""), width))
	var most int64
	for _, c := range be.GetContexts() {
		most = max(most, c.GetTotalBytes())
	}
	for i, c := range be.GetContexts() {
		if rowsMax > 0 && i >= rowsMax {
			b.WriteString(cut(fmt.Sprintf("… %d more", len(be.GetContexts())-i), width))
			break
		}
		name := strings.Repeat("  ", max(int(c.GetLevel())-1, 0)) + c.GetName()
		if c.GetAggregatedContexts() > 0 && c.GetName() == "more child contexts" {
			name = fmt.Sprintf("%s(%d more child contexts)", strings.Repeat("  ", max(int(c.GetLevel())-1, 0)), c.GetAggregatedContexts())
		}
		if c.GetIdent() != "" {
			name += ": " + c.GetIdent()
		}
		b.WriteString(cut(fmt.Sprintf("%s %8s %8s %s", pad(name, 44, false), formatBytes(float64(c.GetTotalBytes())),
			formatBytes(float64(c.GetUsedBytes())), bar(c.GetTotalBytes(), most)), width))
	}
	return b.String()
}

// printMemoryOnce prints one session's roll-up (or one backend's tree), for scripts.
func printMemoryOnce(ctx context.Context, c *sessionClient, sessID int64, backend int, width int, out interface{ Write([]byte) (int, error) }) error {
	rows, err := c.sessions(ctx, SortCPU)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if r.SessID != sessID {
			continue
		}
		resp, err := c.memoryContexts(ctx, r.TmID, r.SessID, false)
		if err != nil {
			return err
		}
		text := formatRollup(resp, width, 0)
		if backend > 0 {
			if backend > len(resp.GetBackends()) {
				return fmt.Errorf("session %d has %d backends, no [%d]", sessID, len(resp.GetBackends()), backend)
			}
			text = formatBackendTree(resp.GetBackends()[backend-1], width, 0)
		}
		_, err = fmt.Fprintf(out, "memory contexts of session %d (tm_id %d)%s\n%s", sessID, r.TmID, partialNote(resp), text)
		return err
	}
	return fmt.Errorf("no session %d at %s", sessID, c.opts.Addr)
}

func partialNote(resp *gpotelv1.GetSessionMemoryContextsResponse) string {
	if resp.GetPartial() {
		return "  partial: some backends did not answer"
	}
	return ""
}

// memoryView is the TUI's memory-context screen of one session.
type memoryView struct {
	tmID, sessID int64
	resp         *gpotelv1.GetSessionMemoryContextsResponse
	err          error
	loading      bool
	// backend is 0 for the roll-up, else the 1-based backend shown as a tree.
	backend int
}

// memoryMsg carries one GetSessionMemoryContexts answer into the model.
type memoryMsg struct {
	sessID int64
	resp   *gpotelv1.GetSessionMemoryContextsResponse
	err    error
}

func (m topModel) fetchMemory(tmID, sessID int64) tea.Cmd {
	return func() tea.Msg {
		resp, err := m.client.memoryContexts(m.ctx, tmID, sessID, false)
		return memoryMsg{sessID: sessID, resp: resp, err: err}
	}
}

// openMemory shows the selected session's memory contexts.
func (m topModel) openMemory() (tea.Model, tea.Cmd) {
	if m.selected >= len(m.rows) {
		return m, nil
	}
	r := m.rows[m.selected]
	m.mem = &memoryView{tmID: r.TmID, sessID: r.SessID, loading: true}
	return m, m.fetchMemory(r.TmID, r.SessID)
}

// updateMemory handles keys on the memory screen: tab and shift+tab walk
// the backends' trees, r asks again, esc goes back to the sessions.
func (m topModel) updateMemory(key string) (tea.Model, tea.Cmd) {
	v := *m.mem
	n := len(v.resp.GetBackends())
	switch key {
	case "q", "ctrl+c":
		return m, tea.Quit
	case "esc", "backspace", "left":
		if v.backend > 0 {
			v.backend = 0
		} else {
			m.mem = nil
			return m, nil
		}
	case "tab", "right":
		v.backend = (v.backend + 1) % (n + 1)
	case "shift+tab":
		v.backend = (v.backend + n) % (n + 1)
	case "r":
		v.loading = true
		m.mem = &v
		return m, m.fetchMemory(v.tmID, v.sessID)
	default:
		if d := int(key[0] - '0'); len(key) == 1 && d >= 1 && d <= 9 && d <= n {
			v.backend = d
		}
	}
	m.mem = &v
	return m, nil
}

func (m topModel) memoryScreen() string {
	v := m.mem
	var b strings.Builder
	title := fmt.Sprintf("gpotel-top %s  memory contexts of session %d", m.client.opts.Addr, v.sessID)
	switch {
	case v.loading:
		title += "  asking the agents…"
	case v.resp != nil:
		title += fmt.Sprintf("  %d backends  grand total %s%s", len(v.resp.GetBackends()), formatBytes(float64(v.resp.GetGrandTotalBytes())), partialNote(v.resp))
	}
	b.WriteString(titleStyle.Render(pad(title, max(m.width, len(title)), false)))
	b.WriteByte('\n')
	if v.err != nil {
		b.WriteString(errorStyle.Render(v.err.Error()))
	}
	b.WriteByte('\n')
	rows := max(m.height-6, 0)
	if v.resp != nil {
		if v.backend == 0 {
			b.WriteString(formatRollup(v.resp, m.width, max(rows-len(v.resp.GetBackends())-1, 3)))
		} else {
			b.WriteString(formatBackendTree(v.resp.GetBackends()[v.backend-1], m.width, rows))
		}
	}
	b.WriteString(helpStyle.Render("tab/1-9 one backend's tree  esc back  r ask again  q quit"))
	return b.String()
}
