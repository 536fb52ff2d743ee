// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package finishedwork

import (
	"cmp"
	"container/heap"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
	"unique"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/paging"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// Service answers gpotel.v1.FinishedWork from the finished work kept,
// bounded as GetGPSessions is: page size, response bytes.
type Service struct {
	gpotelv1.UnimplementedFinishedWorkServer

	store            *Store
	defaultPageSize  int
	maxPageSize      int
	maxResponseBytes int
}

// NewService lists what store keeps, pages of defaultPageSize items unless
// asked for another size up to maxPageSize, each within maxResponseBytes.
func NewService(store *Store, defaultPageSize, maxPageSize, maxResponseBytes int) *Service {
	return &Service{store: store, defaultPageSize: defaultPageSize, maxPageSize: maxPageSize, maxResponseBytes: maxResponseBytes}
}

// ListFinishedQueries answers a page of the finished queries kept.
func (svc *Service) ListFinishedQueries(_ context.Context, req *gpotelv1.ListFinishedWorkRequest) (*gpotelv1.ListFinishedQueriesResponse, error) {
	page, err := svc.list("ListFinishedQueries", queryLayout, req)
	if err != nil {
		return nil, err
	}
	resp := &gpotelv1.ListFinishedQueriesResponse{NextPageToken: page.next, CompleteSince: page.since}
	for _, m := range page.items {
		resp.Queries = append(resp.Queries, m.Interface().(*gpotelv1.FinishedQuery))
	}
	return resp, nil
}

// ListEndedSessions answers a page of the ended sessions kept.
func (svc *Service) ListEndedSessions(_ context.Context, req *gpotelv1.ListFinishedWorkRequest) (*gpotelv1.ListEndedSessionsResponse, error) {
	page, err := svc.list("ListEndedSessions", sessionLayout, req)
	if err != nil {
		return nil, err
	}
	resp := &gpotelv1.ListEndedSessionsResponse{NextPageToken: page.next, CompleteSince: page.since}
	for _, m := range page.items {
		resp.Sessions = append(resp.Sessions, m.Interface().(*gpotelv1.EndedSession))
	}
	return resp, nil
}

// finishedPage is one page of either list.
type finishedPage struct {
	items []protoreflect.Message
	next  string
	since *timestamppb.Timestamp
}

// Room kept in a list response for complete_since: its tag, length and a
// Timestamp's largest encoding.
const completeSinceRoom = 2 + 11 + 6

func (svc *Service) list(method string, l *eventLayout, req *gpotelv1.ListFinishedWorkRequest) (finishedPage, error) {
	if svc.store.retention <= 0 {
		return finishedPage{}, status.Error(codes.FailedPrecondition, "finished_queries::retention is 0: the exporter keeps no finished work")
	}
	sel, err := parseFinishedSelection(method, l, req)
	if err != nil {
		return finishedPage{}, status.Error(codes.InvalidArgument, err.Error())
	}
	limit := svc.defaultPageSize
	if req.GetPageSize() > 0 {
		limit = int(min(req.GetPageSize(), uint32(svc.maxPageSize))) // #nosec G115 -- a positive int from the configuration
	}
	candidates, since := svc.store.selectRows(sel, limit+1)

	page := finishedPage{}
	if since != 0 {
		page.since = timestamppb.New(timeOf(since))
	}
	size := completeSinceRoom
	var last *candidate
	for i := range candidates {
		c := &candidates[i]
		if len(page.items) == limit {
			page.next = sel.token(last)
			break
		}
		m := c.r.message()
		n := proto.Size(m.Interface())
		enc := paging.ItemLen(n)
		// Room for the token naming c, should c end the page: a cheap bound
		// first, the exact length only when the bound does not fit.
		room := paging.TokenFieldOverhead + sel.tokenBound(c)
		if size+enc+room > svc.maxResponseBytes {
			room = paging.TokenFieldOverhead + len(sel.token(c))
		}
		if size+enc+room > svc.maxResponseBytes {
			if len(page.items) == 0 {
				return finishedPage{}, status.Errorf(codes.ResourceExhausted, "one item alone needs %d bytes, more than max_response_bytes %d",
					enc+room, svc.maxResponseBytes)
			}
			page.next = sel.token(last)
			break
		}
		page.items = append(page.items, m)
		size += enc
		last = c
	}
	return page, nil
}

// finishedSelection is a list request, checked.
type finishedSelection struct {
	layout           *eventLayout
	from, to         int64 // unix ns: [from, to)
	hasFrom, hasTo   bool
	users, databases map[unique.Handle[string]]struct{}
	sessIDs          map[int64]struct{}
	tmID             int64
	column           sortColumn
	desc             bool
	after            *finishedCursor
	fingerprint      string
}

// finishedCursor is the place of the last item of the previous page.
type finishedCursor struct {
	value paging.Value
	key   []int64 // the identity fields' values
}

func parseFinishedSelection(method string, l *eventLayout, req *gpotelv1.ListFinishedWorkRequest) (*finishedSelection, error) {
	if n := len(req.GetUsers()) + len(req.GetDatabases()) + len(req.GetSessIds()); n > paging.MaxFilterValues {
		return nil, fmt.Errorf("users, databases, sess_ids: %d values, at most %d filter values are accepted", n, paging.MaxFilterValues)
	}
	sel := &finishedSelection{layout: l, tmID: req.GetTmId(), desc: req.GetDescending()}
	for name, ts := range map[string]*timestamppb.Timestamp{"ended_from": req.GetEndedFrom(), "ended_to": req.GetEndedTo()} {
		if ts != nil {
			if err := ts.CheckValid(); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	if ts := req.GetEndedFrom(); ts != nil {
		sel.from, sel.hasFrom = clampedUnixNano(ts.AsTime()), true
	}
	if ts := req.GetEndedTo(); ts != nil {
		sel.to, sel.hasTo = clampedUnixNano(ts.AsTime()), true
	}
	if sel.hasFrom && sel.hasTo && sel.from > sel.to {
		return nil, fmt.Errorf("ended_from %s is after ended_to %s", req.GetEndedFrom().AsTime(), req.GetEndedTo().AsTime())
	}
	column := req.GetSortBy()
	if column == "" {
		column = l.fields[l.end].Column
	}
	var ok bool
	if sel.column, ok = l.columns[column]; !ok {
		return nil, fmt.Errorf("sort_by %.64q: no field of %s by that name to sort by (its number, time, string and bool fields)",
			column, l.message().Descriptor().Name())
	}
	sel.users, sel.databases = handles(req.GetUsers()), handles(req.GetDatabases())
	if ids := req.GetSessIds(); len(ids) > 0 {
		sel.sessIDs = map[int64]struct{}{}
		for _, id := range ids {
			sel.sessIDs[id] = struct{}{}
		}
	}
	sel.fingerprint = sel.fingerprintOf(method, column, req)
	if tok := req.GetPageToken(); tok != "" {
		after, err := sel.decodeToken(tok)
		if err != nil {
			return nil, err
		}
		sel.after = after
	}
	return sel, nil
}

// clampedUnixNano is t in Unix nanoseconds, a time before 1678 or after
// 2262 (which UnixNano would wrap into another year) the nearest that is held.
func clampedUnixNano(t time.Time) int64 {
	switch {
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// handles interns filter values, so that rows compare by pointer.
func handles(values []string) map[unique.Handle[string]]struct{} {
	if len(values) == 0 {
		return nil
	}
	m := make(map[unique.Handle[string]]struct{}, len(values))
	for _, v := range values {
		m[unique.Make(v)] = struct{}{}
	}
	return m
}

// fingerprintOf names what a page token is valid for: the method, the
// order and every filter.
func (sel *finishedSelection) fingerprintOf(method, column string, req *gpotelv1.ListFinishedWorkRequest) string {
	h := paging.NewMAC()
	_, _ = fmt.Fprintf(h, "%s|%d:%s|%t|%t%d|%t%d|%d|", method, len(column), column, sel.desc, sel.hasFrom, sel.from, sel.hasTo, sel.to, sel.tmID)
	for _, set := range [][]string{req.GetUsers(), req.GetDatabases()} {
		for _, v := range slices.Sorted(slices.Values(set)) {
			_, _ = fmt.Fprintf(h, "%d:%s,", len(v), v)
		}
		_, _ = fmt.Fprint(h, ";")
	}
	_, _ = fmt.Fprint(h, slices.Sorted(maps.Keys(sel.sessIDs)))
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// matches tells a row of the list's kind, within the range and filters.
func (sel *finishedSelection) matches(r *eventRow) bool {
	l := sel.layout
	if r.layout != l {
		return false
	}
	end := r.end()
	if sel.hasFrom && end < sel.from || sel.hasTo && end >= sel.to {
		return false
	}
	if sel.tmID != 0 && r.num(l.tmID) != sel.tmID {
		return false
	}
	if sel.sessIDs != nil {
		if _, ok := sel.sessIDs[r.num(l.sessID)]; !ok {
			return false
		}
	}
	return in(sel.users, r.strs[l.slot[l.user]]) && in(sel.databases, r.strs[l.slot[l.database]])
}

// in tells a value of the set, or a set that is not asked for (nil).
func in(set map[unique.Handle[string]]struct{}, v unique.Handle[string]) bool {
	if set == nil {
		return true
	}
	_, ok := set[v]
	return ok
}

// candidate is a row at its place in the requested order.
type candidate struct {
	r *eventRow
	v paging.Value
}

// compare orders two candidates: by the sort value, then by key ascending.
func (sel *finishedSelection) compare(a, b *candidate) int {
	if c := sel.compareValue(&a.v, &b.v); c != 0 {
		return c
	}
	for _, i := range sel.layout.identity {
		if c := cmp.Compare(a.r.num(i), b.r.num(i)); c != 0 {
			return c
		}
	}
	return 0
}

func (sel *finishedSelection) compareValue(a, b *paging.Value) int {
	c := paging.Compare(sel.column.kind, a, b)
	if sel.desc {
		return -c
	}
	return c
}

// pastCursor tells a candidate that comes after the previous page's last item.
func (sel *finishedSelection) pastCursor(c *candidate) bool {
	if sel.after == nil {
		return true
	}
	if x := sel.compareValue(&c.v, &sel.after.value); x != 0 {
		return x > 0
	}
	for j, i := range sel.layout.identity {
		if x := cmp.Compare(c.r.num(i), sel.after.key[j]); x != 0 {
			return x > 0
		}
	}
	return false
}

// selectRows is the first n rows of the selection in its order, past its
// cursor, and the time since which the store is complete.
func (w *Store) selectRows(sel *finishedSelection, n int) ([]candidate, int64) {
	w.mu.RLock()
	h := &worstFirst{sel: sel, c: make([]candidate, 0, min(n, w.count))}
	for _, r := range w.queue[w.head:] {
		if r == nil || w.expired(r) || !sel.matches(r) {
			continue
		}
		c := candidate{r: r, v: sel.column.get(r)}
		if !sel.pastCursor(&c) {
			continue
		}
		switch {
		case len(h.c) < n:
			heap.Push(h, c)
		case sel.compare(&c, &h.c[0]) < 0:
			h.c[0] = c
			heap.Fix(h, 0)
		}
	}
	since := w.completeSince()
	w.mu.RUnlock()
	slices.SortFunc(h.c, func(a, b candidate) int { return sel.compare(&a, &b) })
	return h.c, since
}

// worstFirst is a heap of candidates with the last in order on top: the
// first n of a selection are kept in O(rows × log n).
type worstFirst struct {
	sel *finishedSelection
	c   []candidate
}

func (h *worstFirst) Len() int           { return len(h.c) }
func (h *worstFirst) Less(i, j int) bool { return h.sel.compare(&h.c[i], &h.c[j]) > 0 }
func (h *worstFirst) Swap(i, j int)      { h.c[i], h.c[j] = h.c[j], h.c[i] }
func (h *worstFirst) Push(x any)         { h.c = append(h.c, x.(candidate)) }
func (h *worstFirst) Pop() any {
	x := h.c[len(h.c)-1]
	h.c = h.c[:len(h.c)-1]
	return x
}

// finishedToken is a page token: the request it belongs to, and the
// place (sort value, key) of the last item returned.
type finishedToken struct {
	Request string            `json:"r"`
	Value   paging.TokenValue `json:"v"`
	// A fixed array: a forged token's longer list is skipped, not held.
	Key [4]int64 `json:"k"`
}

func (sel *finishedSelection) token(c *candidate) string {
	t := finishedToken{Request: sel.fingerprint,
		Value: paging.TokenOf(c.v)}
	for j, i := range sel.layout.identity {
		t.Key[j] = c.r.num(i)
	}
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

// tokenBound is an upper bound of token's length, cheap to compute.
func (sel *finishedSelection) tokenBound(c *candidate) int {
	n := 200 + len(sel.fingerprint) + 6*len(c.v.S) // JSON escapes a byte to at most \u00XX
	return (n*4+2)/3 + 4
}

func (sel *finishedSelection) decodeToken(tok string) (*finishedCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return nil, paging.ErrBadToken
	}
	var t finishedToken
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, paging.ErrBadToken
	}
	if t.Request != sel.fingerprint {
		return nil, errors.New("page_token was issued for a different request (method, sort, range or filters changed) or by another run of the collector")
	}
	v := t.Value
	return &finishedCursor{value: v.Value(),
		key: t.Key[:len(sel.layout.identity)]}, nil
}
