// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// historyLimit is how many items the history view asks each list for and
// shows: a screen's worth, the newest. The newest historyLimit of both
// lists together are among the newest historyLimit of each.
const historyLimit = 50

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

// history asks for the newest finished queries and ended sessions and
// merges them, newest first.
func (c *sessionClient) history(ctx context.Context) ([]historyRow, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	api := gpotelv1.NewFinishedWorkClient(c.conn)
	req := &gpotelv1.ListFinishedWorkRequest{Descending: true, PageSize: historyLimit}
	queries, err := api.ListFinishedQueries(ctx, req)
	if err == nil {
		var sessions *gpotelv1.ListEndedSessionsResponse
		if sessions, err = api.ListEndedSessions(ctx, req); err == nil {
			return mergeHistory(queries.GetQueries(), sessions.GetSessions()), nil
		}
	}
	if status.Code(err) == codes.Unimplemented {
		return nil, errNoHistory
	}
	return nil, c.callError("the history", err)
}

// mergeHistory is the newest historyLimit of both, newest first; ties in
// key order.
func mergeHistory(queries []*gpotelv1.FinishedQuery, sessions []*gpotelv1.EndedSession) []historyRow {
	rows := make([]historyRow, 0, len(queries)+len(sessions))
	for _, q := range queries {
		rows = append(rows, historyRow{query: q})
	}
	for _, s := range sessions {
		rows = append(rows, historyRow{session: s})
	}
	slices.SortStableFunc(rows, func(a, b historyRow) int {
		ka, kb := a.rowKey(), b.rowKey()
		return cmp.Or(b.end().Compare(a.end()), cmp.Compare(ka.tmID, kb.tmID), cmp.Compare(ka.sessID, kb.sessID), cmp.Compare(ka.ccnt, kb.ccnt))
	})
	return rows[:min(len(rows), historyLimit)]
}

// historyRows are the rows the filter lets through. gpotel's own
// monitoring sessions have no events (docs/pipeline.md), so there is
// nothing of theirs to hide.
func (m *topModel) historyRows() []historyRow {
	var out []historyRow
	for _, r := range m.history {
		if who := r.who(); m.filter.shows(&who) {
			out = append(out, r)
		}
	}
	return out
}

// optional is an optional figure's text; absentText when the event lacks it.
func optional[T int64 | float64](v *T, text func(float64) string) string {
	if v == nil {
		return absentText
	}
	return text(float64(*v))
}

// historyColumns are the history's figures, each what the event carries
// over the query's or session's whole life; the text takes the rest.
func historyColumns() table[historyRow] {
	figure := func(q func(*gpotelv1.FinishedQuery) string, s func(*gpotelv1.EndedSession) string) func(historyRow) string {
		return func(r historyRow) string {
			if r.query != nil {
				return q(r.query)
			}
			return s(r.session)
		}
	}
	return table[historyRow]{
		columns: []column[historyRow]{
			{"END", 8, false, 0, func(r historyRow) string { return clockText(r.end().Local()) }},
			{"SESS", 7, false, 0, func(r historyRow) string { return strconv.FormatInt(r.rowKey().sessID, 10) }},
			{"USER", 9, true, 2, func(r historyRow) string { return valueOr(r.who().User) }},
			{"DATABASE", 9, true, 6, func(r historyRow) string { return valueOr(r.who().Database) }},
			{"STATUS", 9, true, 1, figure(
				func(q *gpotelv1.FinishedQuery) string {
					return partialMark(queryStatusText(q.GetStatus()), q.GetPartial())
				},
				func(s *gpotelv1.EndedSession) string { return partialMark("ended", s.GetPartial()) })},
			{"DUR", 6, false, 1, figure(
				func(q *gpotelv1.FinishedQuery) string { return durationText(q.GetDuration()) },
				func(s *gpotelv1.EndedSession) string { return durationText(s.GetDuration()) })},
			{"CPU", 6, false, 0, figure(
				func(q *gpotelv1.FinishedQuery) string { return optional(q.CpuTime, durationText) },
				func(s *gpotelv1.EndedSession) string { return optional(s.CpuTime, durationText) })},
			{"READ", 5, false, 3, figure(
				func(q *gpotelv1.FinishedQuery) string { return optional(q.DiskIoRead, bytesText) },
				func(s *gpotelv1.EndedSession) string { return optional(s.DiskIoRead, bytesText) })},
			{"WRITE", 5, false, 5, figure(
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
				t := "session of " + strconv.FormatInt(s.GetQueries(), 10) + " queries"
				if s.Application != nil {
					t += ", application " + oneLine(s.GetApplication())
				}
				return t
			}),
		textMin: 16,
		wide:    map[string]int{"USER": 20, "DATABASE": 20},
	}
}

// queryStatusText is a finished query's status in at most 9 cells.
func queryStatusText(s string) string {
	if s == "session_ended" {
		return "sess.end"
	}
	return s
}

// partialMark adds "*" to what a host did not fully answer for.
func partialMark(s string, partial bool) string {
	if partial {
		return s + "*"
	}
	return s
}

func historyListing(m *topModel, width int) listing {
	t := historyColumns()
	cols := t.fit(width)
	rows := m.historyRows()
	l := listing{header: t.header(cols, width)}
	for _, r := range rows {
		l.keys = append(l.keys, r.rowKey())
	}
	l.line = func(i int, selected bool) string { return t.row(cols, rows[i], selected, width) }
	return l
}

// historyFooter is why the history is missing, under its column titles.
func historyFooter(m *topModel, width, _ int) []string {
	if m.historyErr != nil {
		return []string{cutLine(m.historyErr.Error(), width)}
	}
	return nil
}
