// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

const (
	// historyPageRows is how many rows one page of the history shows.
	historyPageRows = 50
	// statusPageSize is the page size asked when a status filter, which
	// the API cannot apply, makes the client look through more items.
	statusPageSize = 1000
	// maxHistoryItems bounds the items of each list the client holds:
	// past it, older pages are not asked for.
	maxHistoryItems = 5000
)

// errNoHistory: the collector serves no gpotel.v1.FinishedWork.
var errNoHistory = errors.New("this collector does not serve the history (gpotel.v1.FinishedWork: the sessionstate exporter's finished_queries)")

// historyRow is one finished query or one ended session, exactly one of
// the two set.
type historyRow struct {
	query   *gpotelv1.FinishedQuery
	session *gpotelv1.EndedSession
}

func (r historyRow) end() time.Time {
	if r.query != nil {
		return r.query.GetQueryEnd().AsTime()
	}
	return r.session.GetSessionEnd().AsTime()
}

// rowKey: a query by its session, command count and start; a session by
// its start, with ccnt -1 (no query has a negative command count).
func (r historyRow) rowKey() rowKey {
	if q := r.query; q != nil {
		return rowKey{tmID: q.GetTmId(), sessID: q.GetSessId(), ccnt: q.GetCcnt(), start: q.GetQueryStart().AsTime().UnixNano()}
	}
	s := r.session
	return rowKey{tmID: s.GetTmId(), sessID: s.GetSessId(), ccnt: -1, start: s.GetSessionStart().AsTime().UnixNano()}
}

// who is the row's user and database, for the filter.
func (r historyRow) who() SessionRow {
	if r.query != nil {
		return SessionRow{User: r.query.GetUsername(), Database: r.query.GetDatabase()}
	}
	return SessionRow{User: r.session.GetUsername(), Database: r.session.GetDatabase()}
}

// status is the row's status as the API names it.
func (r historyRow) status() string {
	if r.query != nil {
		return r.query.GetStatus()
	}
	return sessionStatus(r.session)
}

// failure is what the server said of how the row ended: the SQLSTATE,
// its message on one line, and why a query was cancelled; "" where none.
func (r historyRow) failure() (sqlstate, message, cancelReason string) {
	if q := r.query; q != nil {
		return q.GetSqlstate(), oneLine(q.GetErrorMessage()), q.GetCancelReason()
	}
	return r.session.GetSqlstate(), oneLine(r.session.GetErrorMessage()), ""
}

// partialCause is why the row is partial, as the API says it: the
// reasons, the silent hosts and since when; "" and nil where it says none.
func (r historyRow) partialCause() (reason, hosts string, since *timestamppb.Timestamp) {
	if q := r.query; q != nil {
		return q.GetPartialReason(), q.GetPartialHosts(), q.GetPartialSince()
	}
	return r.session.GetPartialReason(), r.session.GetPartialHosts(), r.session.GetPartialSince()
}

func (r historyRow) partial() bool {
	if r.query != nil {
		return r.query.GetPartial()
	}
	return r.session.GetPartial()
}

// compareHistory is the history's order, newest first: each list's order
// as the exporter pages it (the end, then the key), so that the two merge.
func compareHistory(a, b historyRow) int {
	ka, kb := a.rowKey(), b.rowKey()
	return cmp.Or(b.end().Compare(a.end()), cmp.Compare(ka.tmID, kb.tmID), cmp.Compare(ka.sessID, kb.sessID),
		cmp.Compare(ka.ccnt, kb.ccnt), cmp.Compare(ka.start, kb.start))
}

// heldList is what the client holds of one list: its first items and,
// while more match, the token of the next page.
type heldList[T any] struct {
	items []T
	next  string
	asked bool
}

// more tells a list with items not asked for yet.
func (h *heldList[T]) more() bool { return !h.asked || h.next != "" }

// bound is the last held item when more could follow it: the held
// items of the other list are in order only as far as it. ok is false
// when nothing bounds them; a list not asked yet bounds them all.
func (h *heldList[T]) bound() (last T, all, ok bool) {
	switch {
	case !h.asked:
		return last, true, true
	case h.next == "" || len(h.items) == 0:
		return last, false, false
	}
	return h.items[len(h.items)-1], false, true
}

// took adds a page; a page without items ends the list, whatever token
// came with it (a server that pages nothing would be asked forever).
func (h *heldList[T]) took(items []T, next string) {
	h.items, h.asked, h.next = append(h.items, items...), true, next
	if len(items) == 0 {
		h.next = ""
	}
}

// historyList is what the client holds of the history. The tokens are
// valid for the users and databases it was asked with only.
type historyList struct {
	queries          heldList[*gpotelv1.FinishedQuery]
	sessions         heldList[*gpotelv1.EndedSession]
	users, databases []string
	// full: a list reached maxHistoryItems with more to ask.
	full bool
}

// rows are the held items merged, newest first, as far as their order
// is known: past the last held item of a list with more, an item not yet
// asked for could come first.
func (l *historyList) rows() []historyRow {
	rows := make([]historyRow, 0, len(l.queries.items)+len(l.sessions.items))
	for _, q := range l.queries.items {
		rows = append(rows, historyRow{query: q})
	}
	for _, s := range l.sessions.items {
		rows = append(rows, historyRow{session: s})
	}
	slices.SortStableFunc(rows, compareHistory)
	known := len(rows)
	if q, all, ok := l.queries.bound(); all {
		known = 0
	} else if ok {
		known = min(known, sortedPrefix(rows, historyRow{query: q}))
	}
	if s, all, ok := l.sessions.bound(); all {
		known = 0
	} else if ok {
		known = min(known, sortedPrefix(rows, historyRow{session: s}))
	}
	return rows[:known]
}

// sortedPrefix is how many rows come before b, or are b.
func sortedPrefix(rows []historyRow, b historyRow) int {
	n, _ := slices.BinarySearchFunc(rows, b, func(r, b historyRow) int {
		if compareHistory(r, b) <= 0 {
			return -1
		}
		return 1
	})
	return n
}

// more tells whether a list has items not asked for yet.
func (l *historyList) more() bool { return l.queries.more() || l.sessions.more() }

// nextIsQueries tells which list to ask next: one not asked yet, else
// the one whose last held item comes first, the one that keeps the
// merged order from going further.
func (l *historyList) nextIsQueries() bool {
	switch {
	case !l.queries.asked || !l.sessions.more():
		return true
	case !l.sessions.asked || !l.queries.more():
		return false
	}
	q, _, _ := l.queries.bound()
	s, _, _ := l.sessions.bound()
	return compareHistory(historyRow{query: q}, historyRow{session: s}) < 0
}

// historyAsk is what the history is asked for: the filters, the page.
type historyAsk struct {
	filter filter
	page   int
}

// shown are the rows of the list the filter lets through.
func (l *historyList) shown(f filter) []historyRow {
	var out []historyRow
	for _, r := range l.rows() {
		if f.showsHistory(r) {
			out = append(out, r)
		}
	}
	return out
}

// loadHistory asks for the newest pages of the lists, for the filter's
// user and database (the collector filters those), as far as ask's page.
func (c *sessionClient) loadHistory(ctx context.Context, ask historyAsk) (*historyList, error) {
	l := &historyList{}
	if ask.filter.user != "" {
		l.users = []string{ask.filter.user}
	}
	if ask.filter.database != "" {
		l.databases = []string{ask.filter.database}
	}
	return l, c.loadMore(ctx, l, ask)
}

// loadMore asks for further pages of l until it shows ask's page whole,
// the lists end, or it holds maxHistoryItems of a list.
func (c *sessionClient) loadMore(ctx context.Context, l *historyList, ask historyAsk) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	api := gpotelv1.NewFinishedWorkClient(c.conn)
	size := uint32(historyPageRows)
	if ask.filter.status != "" {
		size = statusPageSize
	}
	request := func(token string) *gpotelv1.ListFinishedWorkRequest {
		return &gpotelv1.ListFinishedWorkRequest{Descending: true, PageSize: size, PageToken: token, Users: l.users, Databases: l.databases}
	}
	for len(l.shown(ask.filter)) < (ask.page+1)*historyPageRows && l.more() {
		if len(l.queries.items) >= maxHistoryItems || len(l.sessions.items) >= maxHistoryItems {
			l.full = true
			return nil
		}
		if l.nextIsQueries() {
			resp, err := api.ListFinishedQueries(ctx, request(l.queries.next))
			if err != nil {
				return historyError(c, err)
			}
			l.queries.took(resp.GetQueries(), resp.GetNextPageToken())
			continue
		}
		resp, err := api.ListEndedSessions(ctx, request(l.sessions.next))
		if err != nil {
			return historyError(c, err)
		}
		l.sessions.took(resp.GetSessions(), resp.GetNextPageToken())
	}
	return nil
}

func historyError(c *sessionClient, err error) error {
	if status.Code(err) == codes.Unimplemented {
		return errNoHistory
	}
	return c.callError("the history", err)
}

// historyMsg carries a page of the history into the model.
type historyMsg struct {
	gen  int
	list *historyList
	err  error
}

// olderHistory asks for what page shows, past what l holds.
func (m *topModel) olderHistory(l historyList, ask historyAsk) tea.Cmd {
	ctx, c, gen := m.ctx, m.client, m.historyGen
	// Its own slices: an older ask still running must not append into them.
	l.queries.items, l.sessions.items = slices.Clone(l.queries.items), slices.Clone(l.sessions.items)
	return func() tea.Msg {
		err := c.loadMore(ctx, &l, ask)
		return historyMsg{gen: gen, list: &l, err: err}
	}
}

// historyKey handles the history's own keys: ] the next older page, [
// the newer one, S the status filter.
func (m topModel) historyKey(key string) (topModel, tea.Cmd, bool) {
	switch key {
	case "]":
		shown := len(m.history.shown(m.filter))
		if shown <= (m.historyPage+1)*historyPageRows && (!m.history.more() || m.history.full) {
			m.say("no older rows")
			return m, nil, true
		}
		m.historyPage++
		m.historyGen++
		m.selected[m.view] = rowKey{} // the new page's first row, once it is here
		return m, m.olderHistory(m.history, historyAsk{m.filter, m.historyPage}), true
	case "S":
		return m.askFilter(statusFilterLabel, m.filter.status, func(f *filter, s string) { f.status = s }), nil, true
	case "[":
		if m.historyPage == 0 {
			return m, nil, true
		}
		m.historyPage--
		m.selected[m.view] = rowKey{}
		if m.historyPage == 0 { // the newest page is live again
			m.historyGen++
			return m, m.fetch(), true
		}
		m.selectFirstRows()
		return m, nil, true
	}
	return m, nil, false
}

// selectedHistory is the history's selected row.
func (m *topModel) selectedHistory() (historyRow, bool) {
	for _, r := range m.historyRows() {
		if r.rowKey() == m.selected[m.view] {
			return r, true
		}
	}
	return historyRow{}, false
}

// historyRows are the rows of the page shown.
func (m *topModel) historyRows() []historyRow {
	rows := m.history.shown(m.filter)
	from := min(m.historyPage*historyPageRows, len(rows))
	return rows[from:min(from+historyPageRows, len(rows))]
}

// optional is an optional figure's text; absentText when the event lacks it.
func optional[T int64 | float64](v *T, text func(float64) string) string {
	if v == nil {
		return absentText
	}
	return text(float64(*v))
}

// endText is when a row ended: the time today, the date and the minute
// before today.
func endText(end, now time.Time) string {
	end, now = end.Local(), now.Local()
	if y, m, d := end.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return clockText(end)
	}
	return end.Format("01-02 15:04")
}

// Widths of the history's END and STATUS columns: a date widens END; a
// status is as wide as the widest shown, within bounds.
const (
	clockWidth     = 8
	dateWidth      = 11
	minStatusWidth = 6
	maxStatusWidth = 12
	// usualStatusWidth fits every status the exporter sends ("completed").
	usualStatusWidth = 9
	historyTextMin   = 16
	historyTextLeast = 10
)

// historyColumns are the history's figures, each what the event carries
// over the query's or session's whole life; the text takes the rest.
// now is the day rows are dated against.
func historyColumns(rows []historyRow, now time.Time) table[historyRow] {
	figure := func(q func(*gpotelv1.FinishedQuery) string, s func(*gpotelv1.EndedSession) string) func(historyRow) string {
		return func(r historyRow) string {
			if r.query != nil {
				return q(r.query)
			}
			return s(r.session)
		}
	}
	endWidth, statusWidth := clockWidth, minStatusWidth
	for _, r := range rows {
		endWidth = max(endWidth, len(endText(r.end(), now)))
		statusWidth = max(statusWidth, min(ansi.StringWidth(statusCell(r, maxStatusWidth)), maxStatusWidth))
	}
	return table[historyRow]{
		columns: []column[historyRow]{
			{"END", endWidth, false, 0, func(r historyRow) string { return endText(r.end(), now) }},
			{"SESS", 7, false, 0, func(r historyRow) string { return strconv.FormatInt(r.rowKey().sessID, 10) }},
			{"USER", 9, true, 1, func(r historyRow) string { return valueOr(r.who().User) }},
			{"DATABASE", 9, true, 5, func(r historyRow) string { return valueOr(r.who().Database) }},
			{"STATUS", statusWidth, true, 1, func(r historyRow) string { return statusCell(r, statusWidth) }},
			{"DUR", 6, false, 1, figure(
				func(q *gpotelv1.FinishedQuery) string { return durationText(q.GetDuration()) },
				func(s *gpotelv1.EndedSession) string { return durationText(s.GetDuration()) })},
			{"CPU", 6, false, 0, figure(
				func(q *gpotelv1.FinishedQuery) string { return optional(q.CpuTime, durationText) },
				func(s *gpotelv1.EndedSession) string { return optional(s.CpuTime, durationText) })},
			{"READ", 5, false, 2, figure(
				func(q *gpotelv1.FinishedQuery) string { return optional(q.DiskIoRead, bytesText) },
				func(s *gpotelv1.EndedSession) string { return optional(s.DiskIoRead, bytesText) })},
			{"WRITE", 5, false, 2, figure(
				func(q *gpotelv1.FinishedQuery) string { return optional(q.DiskIoWrite, bytesText) },
				func(s *gpotelv1.EndedSession) string { return optional(s.DiskIoWrite, bytesText) })},
			{"SPILL", 5, false, 4, figure(
				func(q *gpotelv1.FinishedQuery) string { return optional(q.SpillSizeMax, bytesText) },
				func(s *gpotelv1.EndedSession) string { return optional(s.SpillSizeMax, bytesText) })},
		},
		textTitle: "QUERY / SESSION",
		text: figure(
			func(q *gpotelv1.FinishedQuery) string { return oneLine(q.GetQueryText()) },
			func(s *gpotelv1.EndedSession) string {
				t := "session of " + countText(s.GetQueries(), "query", "queries")
				if s.Application != nil {
					t += ", application " + oneLine(s.GetApplication())
				}
				return t
			}),
		// The text gives way to a date and a wide status before a figure does.
		textMin: max(historyTextMin-max(endWidth-clockWidth+statusWidth-usualStatusWidth, 0), historyTextLeast),
		wide:    map[string]int{"USER": 20, "DATABASE": 20},
	}
}

// countText is n and its noun, singular for one.
func countText(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(n, 10) + " " + many
}

// historyStatus is one status the history shows: as the API names it,
// its cell, and what it means (the help).
type historyStatus struct{ api, cell, what string }

// historyStatuses are every status of a finished query or an ended
// session. A status the collector sends that is not here is shown as
// it came.
var historyStatuses = []historyStatus{
	{"completed", "completed", "the query ran to its end"},
	{"error", "error", "the query failed: its page has the SQLSTATE and the server's message"},
	{"cancelled", "cancelled", "the query was cancelled (57014): by a user's request, a statement timeout, …; its page says why where the server does"},
	{"terminated", "terminated", "the query's or session's backend was terminated (57P01 or another termination code, or a signal)"},
	{"client_lost", "client_lost", "the query's client went away while it ran"},
	{"aborted", "aborted", "its session was seen idle in an aborted transaction after it: it, or a statement before it in the transaction, failed or " +
		"was cancelled"},
	{"unknown", "unknown", "nothing tells how it ended (no server log read, and no snapshot or exit told): never a guess"},
	{"client_disconnect", "disconnect", "the session's client disconnected while the session was idle"},
	{"connection_lost", "conn.lost", "the session's connection to its client was lost (SQLSTATE class 08)"},
	{"server_shutdown", "shutdown", "the server shut down under the session"},
	{"ended", "ended", "a session that ended, from a collector that does not say how"},
}

// partialMark is the mark of a row a host did not answer for whole.
const partialMark = "*"

// partialHelp says what partialMark means.
const partialHelp = "partial: a host did not answer for all of its life, or it began before gpotel saw it; its figures are a lower bound"

// sessionStatus is how an ended session ended, as the API names it;
// "ended" from a collector that does not say.
func sessionStatus(s *gpotelv1.EndedSession) string { return cmp.Or(s.GetEndReason(), "ended") }

// statusText is a status as the history shows it.
func statusText(api string) string {
	for _, s := range historyStatuses {
		if s.api == api {
			return s.cell
		}
	}
	return api
}

// statusCell is the row's status with its mark, at most width cells: the
// status gives way, the mark never does.
func statusCell(r historyRow, width int) string {
	text := statusText(r.status())
	mark := ""
	if r.partial() {
		mark = partialMark
	}
	if ansi.StringWidth(text+mark) > width {
		text = ansi.Truncate(text, width-len(mark), "…")
	}
	return text + mark
}

func historyListing(m *topModel, width int) listing {
	rows := m.historyRows()
	t := historyColumns(rows, m.today())
	cols := t.fit(width)
	l := listing{header: t.header(cols, width)}
	for _, r := range rows {
		l.keys = append(l.keys, r.rowKey())
	}
	l.line = func(i int, selected bool) string { return t.row(cols, rows[i], selected, width) }
	return l
}

// today is the moment rows are dated against: the newest answer's.
func (m *topModel) today() time.Time {
	if m.at.IsZero() {
		return time.Now()
	}
	return m.at
}

// historyFooter is why the history is missing, or how far it was looked
// through, under its rows.
func historyFooter(m *topModel, width, _ int) []string {
	switch {
	case m.historyErr != nil:
		return []string{cutLine(m.historyErr.Error(), width)}
	case m.history.full && len(m.historyRows()) < historyPageRows:
		return []string{"", cutLine(fmt.Sprintf("looked through the newest %d finished queries or ended sessions: older ones are not asked for (u, D "+
			"narrow the history on the collector)", maxHistoryItems), width)}
	}
	return nil
}

// historyTitle is the history's part of the title: its order and page.
func (m *topModel) historyTitle() string {
	if m.historyPage == 0 {
		return "newest first"
	}
	return fmt.Sprintf("page %d (older; as of %s, [ newer)", m.historyPage+1, clockText(m.historyAt))
}

// openFinished is Enter on a history row.
func openFinished(m *topModel, key rowKey) (page, tea.Cmd) {
	for _, r := range m.historyRows() {
		if r.rowKey() == key {
			return &finishedPage{row: r}, nil
		}
	}
	return nil, nil
}
