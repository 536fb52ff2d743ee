// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/statustest"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// sessionsWithUserTime makes sessions whose LAST_USERTIMESECONDS repeats
// every mod sessions, so that ties are common.
func sessionsWithUserTime(ids []int64, mod int64) []testSession {
	out := make([]testSession, 0, len(ids))
	for _, id := range ids {
		out = append(out, testSession{sessID: id, tmID: testTmID, meta: map[string]any{pipeline.MetaState: "idle"},
			last: &testFigures{user: float64(id % mod), span: 300}})
	}
	return out
}

func idRange(from, to int64) []int64 {
	var ids []int64
	for i := from; i < to; i++ {
		ids = append(ids, i)
	}
	return ids
}

var byUserTimeDesc = []*yagpcc.SessionFieldWrapper{{FieldName: yagpcc.SessionField_LAST_USERTIMESECONDS, Order: yagpcc.SortOrder_SORT_DESC}}

// walk reads every page of one request and returns the responses.
func walk(ctx context.Context, client yagpcc.GetGPInfoClient, req *yagpcc.GetGPSessionsReq) ([]*yagpcc.GetGPSessionsResponse, error) {
	var pages []*yagpcc.GetGPSessionsResponse
	req = proto.Clone(req).(*yagpcc.GetGPSessionsReq)
	for {
		resp, err := client.GetGPSessions(ctx, req)
		if err != nil {
			return pages, err
		}
		pages = append(pages, resp)
		if resp.NextPageToken == "" {
			return pages, nil
		}
		if len(pages) > 100000 {
			return pages, fmt.Errorf("page walk does not end")
		}
		req.PageToken = resp.NextPageToken
	}
}

func TestPagingWalksEverySessionOnce(t *testing.T) {
	srv := startDefault(t)
	srv.consume(t, buildSnapshot(t0, sessionsWithUserTime(idRange(1, 51), 7)))
	pages, err := walk(ctxTimeout(t), srv.client, &yagpcc.GetGPSessionsReq{Field: byUserTimeDesc, PageSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) != 8 {
		t.Fatalf("50 sessions in pages of 7: want 8 pages, got %d", len(pages))
	}
	var all []*yagpcc.SessionState
	for i, p := range pages {
		if i < 7 && len(p.SessionsState) != 7 {
			t.Fatalf("page %d has %d sessions, want 7", i, len(p.SessionsState))
		}
		all = append(all, p.SessionsState...)
	}
	assertEachOnce(t, all, idRange(1, 51))
	assertSorted(t, all, sortableGetters[yagpcc.SessionField_LAST_USERTIMESECONDS], true)
}

func TestPageSizeDefaultAndCap(t *testing.T) {
	cfg := testConfig()
	cfg.DefaultPageSize, cfg.MaxPageSize = 5, 20
	srv := startServer(t, cfg, nopHost())
	srv.consume(t, buildSnapshot(t0, sessionsWithUserTime(idRange(1, 31), 4)))
	ctx := ctxTimeout(t)
	for _, tc := range []struct {
		pageSize int64
		want     int
	}{{0, 5}, {3, 3}, {20, 20}, {1000, 20}} {
		resp, err := srv.client.GetGPSessions(ctx, &yagpcc.GetGPSessionsReq{PageSize: tc.pageSize})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.SessionsState) != tc.want || resp.NextPageToken == "" {
			t.Fatalf("page_size %d: got %d sessions (next %q), want %d and a next page", tc.pageSize, len(resp.SessionsState), resp.NextPageToken, tc.want)
		}
	}
	_, err := srv.client.GetGPSessions(ctx, &yagpcc.GetGPSessionsReq{PageSize: -1})
	statustest.AssertCode(t, err, codes.InvalidArgument, "page_size")
	// Exactly one full page: no token that leads to an empty page.
	resp, err := srv.client.GetGPSessions(ctx, &yagpcc.GetGPSessionsReq{PageSize: 30})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.SessionsState) != 20 {
		t.Fatalf("capped page: got %d", len(resp.SessionsState))
	}
	cfg2 := testConfig()
	srv2 := startServer(t, cfg2, nopHost())
	srv2.consume(t, buildSnapshot(t0, sessionsWithUserTime(idRange(1, 11), 4)))
	resp, err = srv2.client.GetGPSessions(ctx, &yagpcc.GetGPSessionsReq{PageSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.SessionsState) != 10 || resp.NextPageToken != "" {
		t.Fatalf("10 sessions, page of 10: got %d, next %q; want no next page", len(resp.SessionsState), resp.NextPageToken)
	}
}

func TestPageTokenBelongsToItsRequest(t *testing.T) {
	srv := startDefault(t)
	srv.consume(t, buildSnapshot(t0, sessionsWithUserTime(idRange(1, 21), 4)))
	ctx := ctxTimeout(t)
	first, err := srv.client.GetGPSessions(ctx, &yagpcc.GetGPSessionsReq{Field: byUserTimeDesc, PageSize: 5})
	if err != nil {
		t.Fatal(err)
	}
	tok := first.NextPageToken
	userFilter := []*yagpcc.SessionFilter{{FieldName: yagpcc.SessionFilterEnum_SESSION_FILTER_USER, Value: "x"}}
	for name, req := range map[string]*yagpcc.GetGPSessionsReq{
		"other sort":      {PageToken: tok, PageSize: 5},
		"other direction": {PageToken: tok, Field: []*yagpcc.SessionFieldWrapper{{FieldName: yagpcc.SessionField_LAST_USERTIMESECONDS}}},
		"other filter":    {PageToken: tok, Field: byUserTimeDesc, Filter: userFilter},
		"show_system":     {PageToken: tok, Field: byUserTimeDesc, ShowSystem: true},
	} {
		_, err := srv.client.GetGPSessions(ctx, req)
		statustest.AssertCode(t, err, codes.InvalidArgument, "different request")
		_ = name
	}
	_, err = srv.client.GetGPQueries(ctx, &yagpcc.GetGPQueriesReq{PageToken: tok, Field: byUserTimeDesc})
	statustest.AssertCode(t, err, codes.InvalidArgument, "different request")
	for _, bad := range []string{"not base64!", base64.RawURLEncoding.EncodeToString([]byte("{nope"))} {
		_, err = srv.client.GetGPSessions(ctx, &yagpcc.GetGPSessionsReq{PageToken: bad, Field: byUserTimeDesc})
		statustest.AssertCode(t, err, codes.InvalidArgument, "page_token")
	}
	// A different page size is fine.
	if _, err := srv.client.GetGPSessions(ctx, &yagpcc.GetGPSessionsReq{PageToken: tok, Field: byUserTimeDesc, PageSize: 9}); err != nil {
		t.Fatal(err)
	}
}

// While snapshots keep arriving, a page walk returns every session that
// stayed present with unchanged sort values exactly once, and never returns
// any session with unchanged values twice.
func TestPagingUnderConcurrentUpdates(t *testing.T) {
	cfg := testConfig()
	cfg.SessionGracePeriod = 0
	srv := startServer(t, cfg, nopHost())
	stable := idRange(1, 301)     // always present, fixed values
	churn := idRange(1000, 1200)  // come and go, fixed values
	movers := idRange(2000, 2050) // always present, values change
	snapshot := func(_ int, rng *rand.Rand) []testSession {
		ids := append([]int64{}, stable...)
		for _, id := range churn {
			if rng.IntN(2) == 0 {
				ids = append(ids, id)
			}
		}
		sessions := sessionsWithUserTime(ids, 13)
		for _, id := range movers {
			sessions = append(sessions, testSession{sessID: id, tmID: testTmID,
				last: &testFigures{user: float64(rng.IntN(20)), span: 300}})
		}
		rng.Shuffle(len(sessions), func(i, j int) { sessions[i], sessions[j] = sessions[j], sessions[i] })
		return sessions
	}
	rng := rand.New(rand.NewPCG(1, 2))
	srv.consume(t, buildSnapshot(t0, snapshot(0, rng)))

	ctx := ctxTimeout(t)
	var stop atomic.Bool
	var snapshots atomic.Int64
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for gen := 1; !stop.Load(); gen++ {
			if err := srv.exp.ConsumeMetrics(ctx, buildSnapshot(t0.Add(time.Duration(gen)*time.Second), snapshot(gen, rng))); err != nil {
				t.Error(err)
				return
			}
			snapshots.Add(1)
		}
	}()

	const walkers, walksEach = 8, 6
	var wg sync.WaitGroup
	errs := make(chan error, walkers*walksEach)
	for w := 0; w < walkers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for k := 0; k < walksEach; k++ {
				req := &yagpcc.GetGPSessionsReq{Field: byUserTimeDesc, PageSize: int64(1 + (w*7+k*3)%40)}
				if k%2 == 1 {
					req.Field = []*yagpcc.SessionFieldWrapper{{FieldName: yagpcc.SessionField_SESSION_FIELD_KEY, Order: yagpcc.SortOrder_SORT_DESC}}
				}
				pages, err := walk(ctx, srv.client, req)
				if err != nil {
					errs <- err
					return
				}
				seen := map[int64]int{}
				for _, p := range pages {
					for _, s := range p.SessionsState {
						seen[s.SessionKey.SessId]++
					}
				}
				for id, n := range seen {
					if n > 1 && id < 2000 {
						errs <- fmt.Errorf("walk %d/%d (page size %d): session %d returned %d times", w, k, req.PageSize, id, n)
					}
				}
				for _, id := range stable {
					if seen[id] != 1 {
						errs <- fmt.Errorf("walk %d/%d (page size %d): stable session %d returned %d times", w, k, req.PageSize, id, seen[id])
					}
				}
			}
		}(w)
	}
	wg.Wait()
	stop.Store(true)
	<-writerDone
	close(errs)
	var msgs []string
	for err := range errs {
		msgs = append(msgs, err.Error())
	}
	if len(msgs) > 0 {
		t.Fatalf("%d problems, first: %s", len(msgs), strings.Join(msgs[:min(5, len(msgs))], "; "))
	}
	if snapshots.Load() == 0 {
		t.Fatalf("no snapshot arrived during the walks: the test proved nothing")
	}
	t.Logf("%d snapshots arrived during %d page walks", snapshots.Load(), walkers*walksEach)
}

func TestResponsesStayUnderMaxResponseBytes(t *testing.T) {
	cfg := testConfig()
	cfg.MaxResponseBytes = 2048
	srv := startServer(t, cfg, nopHost())
	var sessions []testSession
	for _, id := range idRange(1, 31) {
		sessions = append(sessions, testSession{sessID: id, tmID: testTmID, meta: map[string]any{
			pipeline.MetaState: "active", pipeline.MetaQuery: strings.Repeat("x", 250) + fmt.Sprint(id)},
			last: &testFigures{user: float64(id), span: 300}})
	}
	srv.consume(t, buildSnapshot(t0, sessions))
	ctx := ctxTimeout(t)
	req := &yagpcc.GetGPSessionsReq{Field: []*yagpcc.SessionFieldWrapper{{FieldName: yagpcc.SessionField_QUERY_QUERY_TEXT}}, PageSize: 100}
	pages, err := walk(ctx, srv.client, req)
	if err != nil {
		t.Fatal(err)
	}
	var all []*yagpcc.SessionState
	for i, p := range pages {
		if size := proto.Size(p); size > cfg.MaxResponseBytes {
			t.Fatalf("page %d is %d bytes, over max_response_bytes %d", i, size, cfg.MaxResponseBytes)
		}
		all = append(all, p.SessionsState...)
	}
	if len(pages) < 3 {
		t.Fatalf("30 sessions of ~300 bytes under 2048 bytes need several pages, got %d", len(pages))
	}
	assertEachOnce(t, all, idRange(1, 31))

	huge := testSession{sessID: 99, tmID: testTmID, meta: map[string]any{pipeline.MetaState: "active", pipeline.MetaQuery: strings.Repeat("y", 4000)}}
	srv.consume(t, buildSnapshot(t0.Add(time.Second), []testSession{huge}))
	_, err = srv.client.GetGPSessions(ctx, &yagpcc.GetGPSessionsReq{Filter: []*yagpcc.SessionFilter{
		{FieldName: yagpcc.SessionFilterEnum_SESSION_FILTER_SESS_ID, Value: "99"},
	}})
	statustest.AssertCode(t, err, codes.ResourceExhausted, "sess_id 99")
}

func assertEachOnce(t *testing.T, states []*yagpcc.SessionState, want []int64) {
	t.Helper()
	seen := map[int64]int{}
	for _, s := range states {
		seen[s.SessionKey.SessId]++
	}
	for _, id := range want {
		if seen[id] != 1 {
			t.Fatalf("session %d returned %d times", id, seen[id])
		}
	}
	if len(states) != len(want) {
		t.Fatalf("got %d sessions, want %d", len(states), len(want))
	}
}
