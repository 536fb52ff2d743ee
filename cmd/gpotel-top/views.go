// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"slices"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
)

// A view is one list tab cycles through. Adding one (the history of
// finished queries, say) is one entry here: how to list its rows from the
// model's answers, and optionally what Enter opens and what k and K act on.
type view struct {
	name    string
	listing func(m *topModel, width int) listing
	// open is Enter on a row; nil: the rows have no page.
	open func(m *topModel, key rowKey) (page, tea.Cmd)
	// target is the session k, K and x act on for a row; nil: none.
	target func(m *topModel, key rowKey) (actionTarget, bool)
	// footer is drawn under the rows in the room left; nil: nothing.
	footerFunc func(m *topModel, width, room int) []string
	// keys are the view's own keys on the help line.
	keys []item
}

var views = []view{
	{name: "sessions", listing: sessionListing, open: openSession, target: sessionTarget},
	{name: "queries", listing: queryListing, open: openQuery, target: queryTarget},
	{name: "hosts", listing: hostListing, footerFunc: pressureFooter},
	{name: "history", listing: historyListing, open: openFinished, footerFunc: historyFooter,
		keys: []item{{3, "] older"}, {3, "[ newer"}, {4, "S status"}}},
}

func (v view) footer(m *topModel, width, room int) []string {
	if v.footerFunc == nil {
		return nil
	}
	return v.footerFunc(m, width, room)
}

// rowKey is what a selection follows across refreshes: a session, a
// query (its session and command count, or its start) or a host.
type rowKey struct {
	tmID, sessID int64
	ccnt, start  int64
	host         string
}

// listing is one view's rows as drawn: their keys in order, their lines.
type listing struct {
	header string
	keys   []rowKey
	line   func(i int, selected bool) string
	faint  func(i int) bool
	// impossible: a row has a figure marked impossibleMark.
	impossible bool
}

// index is the row of key, -1 when it is not listed.
func (l listing) index(key rowKey) int {
	if key == (rowKey{}) {
		return -1
	}
	return slices.Index(l.keys, key)
}

// filter is what the lists show: one user, one database, and gpotel's
// own sessions or not; in the history, one status (which String leaves
// to the history's title).
type filter struct {
	user, database, status string
	showOwn                bool
}

func (f filter) shows(r *SessionRow) bool {
	return (f.user == "" || r.User == f.user) && (f.database == "" || r.Database == f.database) && (f.showOwn || !r.Own)
}

func (f filter) String() string {
	var parts []string
	if f.user != "" {
		parts = append(parts, "user "+f.user)
	}
	if f.database != "" {
		parts = append(parts, "database "+f.database)
	}
	return strings.Join(parts, ", ")
}

// showsHistory tells a history row of the user, database and status;
// the status as the API names it or as the row shows it.
func (f filter) showsHistory(r historyRow) bool {
	who := r.who()
	return f.shows(&who) && (f.status == "" || f.status == r.status() || f.status == statusText(r.status()))
}

func (f filter) active() bool { return f.user != "" || f.database != "" }

// shownRows are the sessions the filter lets through, in list order.
func (m *topModel) shownRows() []*SessionRow {
	var out []*SessionRow
	for i := range m.rows {
		if m.filter.shows(&m.rows[i]) {
			out = append(out, &m.rows[i])
		}
	}
	return out
}

// session is the row of key, nil when the list has none.
func (m *topModel) session(key sessionKey) *SessionRow {
	for i := range m.rows {
		if m.rows[i].Key == key {
			return &m.rows[i]
		}
	}
	return nil
}

func sessionListing(m *topModel, width int) listing {
	capa := capacityOf(m.top)
	t := sessionColumns(capa)
	rows := m.shownRows()
	if !slices.ContainsFunc(rows, func(r *SessionRow) bool { return r.RuleMark != "" }) {
		t.columns = slices.DeleteFunc(t.columns, func(c column[SessionRow]) bool { return c.title == ruleColumn })
	}
	cols := t.fit(width)
	l := listing{header: t.header(cols, width)}
	for _, r := range rows {
		l.keys = append(l.keys, rowKey{tmID: r.Key.tmID, sessID: r.Key.sessID})
		if !r.Ended && r.HasWindow && (!possible(r.CPU, capa.cluster) || r.HasAvg && !possible(r.AvgCPU, capa.cluster)) {
			l.impossible = true
		}
	}
	l.line = func(i int, selected bool) string { return t.row(cols, *rows[i], selected, width) }
	l.faint = func(i int) bool { return rows[i].Ended }
	return l
}

func sessionTarget(m *topModel, key rowKey) (actionTarget, bool) {
	r := m.session(sessionKey{key.tmID, key.sessID})
	if r == nil {
		return actionTarget{}, false
	}
	return actionTarget{session: *r, query: r.Running, queryText: r.Query}, true
}

// queryRows are GetClusterTop's queries the filter lets through, in the
// server's order, each with its session, or who its session was when it
// has left the list.
func (m *topModel) queryRows() []queryRow {
	var out []queryRow
	for _, q := range m.top.GetQueries() {
		key := sessionKey{q.GetTmId(), q.GetSessId()}
		r := queryRow{q: q, session: m.session(key)}
		who := SessionRow{Key: key, Ended: true}
		if r.session != nil {
			who = *r.session
		} else if k, ok := m.known[key]; ok {
			who.User, who.Database, who.Own = k.user, k.database, k.own
		} else if m.filter.active() {
			continue // whose it was is unknown
		}
		if !m.filter.shows(&who) {
			continue
		}
		r.who = who
		out = append(out, r)
	}
	return out
}

func (r queryRow) rowKey() rowKey {
	k := rowKey{tmID: r.q.GetTmId(), sessID: r.q.GetSessId()}
	if r.q.CommandCount != nil {
		k.ccnt = r.q.GetCommandCount()
	} else {
		k.start = r.q.GetStartUnixNano()
	}
	return k
}

func queryListing(m *topModel, width int) listing {
	capa := capacityOf(m.top)
	t := queryColumns(capa)
	cols := t.fit(width)
	rows := m.queryRows()
	l := listing{header: t.header(cols, width)}
	for _, r := range rows {
		l.keys = append(l.keys, r.rowKey())
		if r.q.GetUsage() != nil && !possible(r.q.GetUsage().GetCpuCores(), capa.cluster) {
			l.impossible = true
		}
	}
	l.line = func(i int, selected bool) string { return t.row(cols, rows[i], selected, width) }
	l.faint = func(i int) bool { return !rows[i].running() && !rows[i].q.GetCompleted() }
	return l
}

// queryOf is the listed query of key.
func (m *topModel) queryOf(key rowKey) (queryRow, bool) {
	for _, r := range m.queryRows() {
		if r.rowKey() == key {
			return r, true
		}
	}
	return queryRow{}, false
}

func queryTarget(m *topModel, key rowKey) (actionTarget, bool) {
	r, ok := m.queryOf(key)
	if !ok {
		return actionTarget{}, false
	}
	t := actionTarget{session: r.who, queryText: oneLine(r.q.GetQuery())}
	if r.running() {
		t.query = r.apiKey()
	}
	return t, true
}

func hostListing(m *topModel, width int) listing {
	t := hostColumns(m.top)
	cols := t.fit(width)
	hosts := m.top.GetHosts()
	l := listing{header: t.header(cols, width), impossible: clusterImpossible(m.top, capacityOf(m.top))}
	for _, h := range hosts {
		l.keys = append(l.keys, rowKey{host: h.GetHostname()})
	}
	l.line = func(i int, selected bool) string { return t.row(cols, hosts[i], selected, width) }
	l.faint = func(i int) bool { return !hosts[i].GetUp() }
	return l
}

// pressureFooter is the hosts' pressure pane under the hosts, when it fits.
func pressureFooter(m *topModel, width, room int) []string {
	if m.pressureErr != nil {
		return []string{"", cutLine(m.pressureErr.Error(), width)}
	}
	pane := pressurePane(m.pressure, width)
	if len(pane) == 0 || len(pane)+1 > room {
		return nil
	}
	return append([]string{""}, pane...)
}

// listHelp is the help line under a list, the most needed first.
func listHelp(v view) []item {
	out := []item{{0, "q quit"}, {2, "? help"}, {1, "tab view"}, {3, "↑↓ select"}}
	if v.open != nil {
		out = append(out, item{2, "enter details"})
	}
	if v.target != nil {
		out = append(out, item{0, "k cancel"}, item{0, "K terminate"}, item{5, "x memory"})
	}
	out = append(out, v.keys...)
	return append(out, item{4, "u/D filter"}, item{6, "g gpotel's own"})
}
