// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"google.golang.org/grpc/codes"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// memoryWait is added to the call timeout: the agents may wait 5 s for a backend.
const memoryWait = 10 * time.Second

// memoryContexts asks the exporter's GetSessionMemoryContexts for one session.
func (c *sessionClient) memoryContexts(ctx context.Context, key sessionKey) (*gpotelv1.GetSessionMemoryContextsResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout+memoryWait)
	defer cancel()
	resp, err := gpotelv1.NewSessionMemoryContextsClient(c.conn).GetSessionMemoryContexts(ctx, &gpotelv1.GetSessionMemoryContextsRequest{
		SessionKey: &gpotelv1.SessionKey{TmId: key.tmID, SessId: key.sessID}})
	if err != nil {
		return nil, c.callError(fmt.Sprintf("the memory contexts of session %d", key.sessID), err)
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

// backendReason is why a backend did not answer, as a sentence: the
// exporter writes "<gRPC code>: <message>"; the code is for programs.
func backendReason(errText string) string {
	code, msg, ok := strings.Cut(errText, ": ")
	if !ok {
		return errText
	}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if c.String() == code {
			return msg
		}
	}
	return errText
}

// answered counts the backends that answered.
func answered(resp *gpotelv1.GetSessionMemoryContextsResponse) int {
	n := 0
	for _, be := range resp.GetBackends() {
		if be.GetError() == "" {
			n++
		}
	}
	return n
}

// memorySummary is the answer's first line: how many backends answered
// and what they hold, or why none did.
func memorySummary(resp *gpotelv1.GetSessionMemoryContextsResponse) string {
	n := answered(resp)
	switch {
	case len(resp.GetBackends()) == 0:
		return "the collector lists no backend of this session"
	case n == 0:
		return fmt.Sprintf("none of its %d backends answered", len(resp.GetBackends()))
	case n < len(resp.GetBackends()):
		return fmt.Sprintf("%d of %d backends answered: %s in all (partial)", n, len(resp.GetBackends()), bytesText(float64(resp.GetGrandTotalBytes())))
	}
	return fmt.Sprintf("%d backends: %s in all", n, bytesText(float64(resp.GetGrandTotalBytes())))
}

// reasons are the distinct reasons backends gave for not answering, each
// with how many gave it, wrapped to width.
func reasons(resp *gpotelv1.GetSessionMemoryContextsResponse, width int) []string {
	count := map[string]int{}
	var order []string
	for _, be := range resp.GetBackends() {
		if be.GetError() == "" {
			continue
		}
		r := backendReason(be.GetError())
		if count[r] == 0 {
			order = append(order, r)
		}
		count[r]++
	}
	var out []string
	for _, r := range order {
		out = append(out, paragraph(fmt.Sprintf("%s: %s", plural(count[r], "backend"), r), width)...)
	}
	switch {
	case len(out) == 0:
	case answered(resp) == 0:
		out = append([]string{"why:"}, out...)
	default:
		out = append([]string{"why the others did not answer:"}, out...)
	}
	return out
}

// plural is "1 backend", "2 backends".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// formatRollup is the session's memory by context name, largest first,
// then the backends (numbered for drilling into one).
func formatRollup(resp *gpotelv1.GetSessionMemoryContextsResponse, width, rowsMax int) []string {
	out := []string{memorySummary(resp)}
	out = append(out, reasons(resp, width)...)
	if answered(resp) == 0 {
		return out
	}
	header := fmt.Sprintf("%-32s %6s %s %8s  %s", "CONTEXT", "TOTAL", pad("", barWidth, false), "BACKENDS", "LARGEST IN")
	out = append(out, "", headerStyle.Render(cutLine(header, width)))
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
			largest = fmt.Sprintf("%s seg%d pid %d (%s)", tb[0].GetHostname(), tb[0].GetSegmentId(), tb[0].GetPid(), bytesText(float64(tb[0].GetTotalBytes())))
		}
		out = append(out, cutLine(fmt.Sprintf("%s %6s %s %8d  %s", pad(r.GetName(), 32, false), bytesText(float64(r.GetTotalBytes())),
			bar(r.GetTotalBytes(), most), r.GetBackends(), largest), width))
	}
	out = append(out, "")
	for i, be := range resp.GetBackends() {
		state := bytesText(float64(be.GetGrandTotal().GetTotalBytes()))
		if be.GetError() != "" {
			state = "no answer: " + backendReason(be.GetError())
		}
		out = append(out, cutLine(fmt.Sprintf("[%d] %s seg%d pid %d  %s", i+1, be.GetHostname(), be.GetSegmentId(), be.GetPid(), state), width))
	}
	return out
}

// formatBackendTree is one backend's contexts as an indented tree.
func formatBackendTree(be *gpotelv1.BackendMemoryContexts, width, rowsMax int) []string {
	if be.GetError() != "" {
		return append([]string{cutLine(fmt.Sprintf("%s seg%d pid %d did not answer:", be.GetHostname(), be.GetSegmentId(), be.GetPid()), width)},
			paragraph(backendReason(be.GetError()), width)...)
	}
	out := []string{
		cutLine(fmt.Sprintf("%s seg%d pid %d  %s in all  from %s", be.GetHostname(), be.GetSegmentId(), be.GetPid(),
			bytesText(float64(be.GetGrandTotal().GetTotalBytes())), be.GetSource()), width),
		headerStyle.Render(cutLine(fmt.Sprintf("%-44s %6s %6s", "CONTEXT", "TOTAL", "USED"), width)),
	}
	var most int64
	for _, c := range be.GetContexts() {
		most = max(most, c.GetTotalBytes())
	}
	for i, c := range be.GetContexts() {
		if rowsMax > 0 && i >= rowsMax {
			out = append(out, cutLine(fmt.Sprintf("… %d more", len(be.GetContexts())-i), width))
			break
		}
		indent := strings.Repeat("  ", max(int(c.GetLevel())-1, 0))
		name := indent + c.GetName()
		if c.GetAggregatedContexts() > 0 && c.GetName() == "more child contexts" {
			name = fmt.Sprintf("%s(%d more child contexts)", indent, c.GetAggregatedContexts())
		}
		if c.GetIdent() != "" {
			name += ": " + c.GetIdent()
		}
		out = append(out, cutLine(fmt.Sprintf("%s %6s %6s %s", pad(name, 44, false), bytesText(float64(c.GetTotalBytes())),
			bytesText(float64(c.GetUsedBytes())), bar(c.GetTotalBytes(), most)), width))
	}
	return out
}

// printMemoryOnce prints one session's roll-up (or one backend's tree), for scripts.
func printMemoryOnce(ctx context.Context, c *sessionClient, sessID int64, backend int, width int, out io.Writer) error {
	rows, err := c.sessions(ctx, SortCPU, time.Time{})
	if err != nil {
		return err
	}
	i := slices.IndexFunc(rows, func(r SessionRow) bool { return r.Key.sessID == sessID })
	if i < 0 {
		return fmt.Errorf("no session %d at %s", sessID, c.opts.Addr)
	}
	resp, err := c.memoryContexts(ctx, rows[i].Key)
	if err != nil {
		return err
	}
	lines := formatRollup(resp, width, 0)
	if backend > 0 {
		if backend > len(resp.GetBackends()) {
			return fmt.Errorf("session %d has %d backends, no [%d]", sessID, len(resp.GetBackends()), backend)
		}
		lines = formatBackendTree(resp.GetBackends()[backend-1], width, 0)
	}
	_, err = fmt.Fprintf(out, "memory contexts of session %d (tm_id %d)\n%s\n", sessID, rows[i].Key.tmID, strings.Join(lines, "\n"))
	return err
}

// memoryPage is one session's memory contexts: the roll-up, or one
// backend's tree (backend > 0).
type memoryPage struct {
	basePage
	session SessionRow
	resp    *gpotelv1.GetSessionMemoryContextsResponse
	err     error
	loading bool
	backend int
}

// memoryMsg carries one GetSessionMemoryContexts answer into the page.
type memoryMsg struct {
	key  sessionKey
	resp *gpotelv1.GetSessionMemoryContextsResponse
	err  error
}

// newMemoryPage asks for the session's memory contexts; asking makes each
// backend log them, so it is asked once, and again only on r.
func newMemoryPage(m *topModel, s SessionRow) (page, tea.Cmd) {
	p := &memoryPage{session: s, loading: true}
	return p, p.ask(m)
}

func (p *memoryPage) ask(m *topModel) tea.Cmd {
	ctx, c, key := m.ctx, m.client, p.session.Key
	return func() tea.Msg {
		resp, err := c.memoryContexts(ctx, key)
		return memoryMsg{key: key, resp: resp, err: err}
	}
}

func (p *memoryPage) title() string {
	return fmt.Sprintf("memory contexts of session %d", p.session.Key.sessID)
}

func (p *memoryPage) receive(msg tea.Msg) (page, tea.Cmd) {
	if mm, ok := msg.(memoryMsg); ok && mm.key == p.session.Key {
		next := *p
		next.resp, next.err, next.loading = mm.resp, mm.err, false
		return &next, nil
	}
	return nil, nil
}

func (p *memoryPage) target(*topModel) (actionTarget, bool) {
	return actionTarget{session: p.session, query: p.session.Running, queryText: p.session.Query}, true
}

func (p *memoryPage) back() (page, bool) {
	if p.backend == 0 {
		return nil, false
	}
	next := *p
	next.backend = 0
	return &next, true
}

// key: tab and shift+tab walk the backends' trees, 1-9 opens one, r asks again.
func (p *memoryPage) key(m *topModel, key string) (page, tea.Cmd) {
	next := *p
	n := len(p.resp.GetBackends())
	switch key {
	case "tab", "right":
		next.backend = (p.backend + 1) % (n + 1)
	case "shift+tab":
		next.backend = (p.backend + n) % (n + 1)
	case "r":
		next.loading = true
		return &next, next.ask(m)
	default:
		if d := int(key[0] - '0'); len(key) == 1 && d >= 1 && d <= 9 && d <= n {
			next.backend = d
		}
	}
	return &next, nil
}

func (p *memoryPage) help(*topModel) []item {
	return []item{{0, "esc back"}, {1, "tab/1-9 a backend's tree"}, {0, "r ask again"}, {0, "q quit"}}
}

func (p *memoryPage) lines(_ *topModel, width int) []string {
	switch {
	case p.loading:
		return []string{"asking the agents of its hosts… (each backend writes its contexts into its server log)"}
	case p.err != nil:
		return paragraph(p.err.Error(), width)
	case p.backend > 0 && p.backend <= len(p.resp.GetBackends()):
		return formatBackendTree(p.resp.GetBackends()[p.backend-1], width, 0)
	}
	return formatRollup(p.resp, width, 0)
}
