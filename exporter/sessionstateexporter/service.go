// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// getGPInfoService answers yagpcc's GetGPInfo from the session store.
type getGPInfoService struct {
	yagpcc.UnimplementedGetGPInfoServer

	store            *sessionStore
	finished         *finishedWork // nil: none kept
	defaultPageSize  int
	maxPageSize      int
	maxResponseBytes int
}

// listRequest is what GetGPSessions and GetGPQueries have in common.
type listRequest struct {
	method    string
	fields    []*yagpcc.SessionFieldWrapper
	filters   []*yagpcc.SessionFilter
	pageSize  int64
	pageToken string
}

func (svc *getGPInfoService) GetGPSessions(_ context.Context, req *yagpcc.GetGPSessionsReq) (*yagpcc.GetGPSessionsResponse, error) {
	switch req.GetShowQueryType() {
	case yagpcc.RunningQueryType_RQT_UNSPECIFIED, yagpcc.RunningQueryType_RQT_TOP, yagpcc.RunningQueryType_RQT_LAST:
		// pg_stat_activity shows one statement: top and last are the same here.
	default:
		return nil, status.Errorf(codes.InvalidArgument, "show_query_type: unknown value %d", req.GetShowQueryType())
	}
	filter, err := parseFilters(req.GetFilter())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	filter.showSystem = req.GetShowSystem()
	filter.hideEmpty = req.GetHideEmptyQueries()
	return svc.list(listRequest{
		method: "GetGPSessions", fields: req.GetField(), filters: req.GetFilter(),
		pageSize: req.GetPageSize(), pageToken: req.GetPageToken(),
	}, filter)
}

func (svc *getGPInfoService) GetGPQueries(_ context.Context, req *yagpcc.GetGPQueriesReq) (*yagpcc.GetGPSessionsResponse, error) {
	filter, err := parseFilters(req.GetFilter())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	filter.runningOnly = true
	filter.liveOnly = true
	return svc.list(listRequest{
		method: "GetGPQueries", fields: req.GetField(), filters: req.GetFilter(),
		pageSize: req.GetPageSize(), pageToken: req.GetPageToken(),
	}, filter)
}

// Room kept in every list response for next_page_token's tag and length.
const tokenFieldOverhead = 1 + 5

func (svc *getGPInfoService) list(req listRequest, filter *sessionFilter) (*yagpcc.GetGPSessionsResponse, error) {
	spec, err := parseSortSpec(req.fields)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	pageSize := int(req.pageSize)
	switch {
	case req.pageSize < 0:
		return nil, status.Errorf(codes.InvalidArgument, "page_size must not be negative, got %d", req.pageSize)
	case req.pageSize == 0:
		pageSize = svc.defaultPageSize
	case req.pageSize > int64(svc.maxPageSize):
		pageSize = svc.maxPageSize
	}
	fingerprint := requestFingerprint(req.method, spec, filter)

	v := svc.store.load()
	order := v.order(spec)
	start := 0
	if req.pageToken != "" {
		vals, key, err := decodeToken(req.pageToken, fingerprint, spec)
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		start, _ = slices.BinarySearchFunc(order, 0, func(e orderEntry, _ int) int {
			if spec.compare(e.vals, e.s.key, vals, key) <= 0 {
				return -1
			}
			return 1
		})
	}

	resp := &yagpcc.GetGPSessionsResponse{}
	size := 0
	var last orderEntry
	for i := start; i < len(order); i++ {
		e := order[i]
		if !filter.match(v, e.s) {
			continue
		}
		// Room for the token naming e, should e end the page: a cheap bound
		// first, the exact length only when the bound does not fit.
		tokenRoom := tokenFieldOverhead + tokenBound(fingerprint, e)
		if size+e.s.encodedSize+tokenRoom > svc.maxResponseBytes {
			tokenRoom = tokenFieldOverhead + len(encodeToken(fingerprint, e))
		}
		full := len(resp.SessionsState) == pageSize ||
			size+e.s.encodedSize+tokenRoom > svc.maxResponseBytes
		if full && len(resp.SessionsState) == 0 {
			return nil, status.Errorf(codes.ResourceExhausted,
				"session {sess_id %d, tm_id %d} alone needs %d bytes, more than max_response_bytes %d",
				e.s.key.ID, e.s.key.TmID, e.s.encodedSize+tokenRoom, svc.maxResponseBytes)
		}
		if full {
			// A matching session remains: the client needs the next page.
			resp.NextPageToken = encodeToken(fingerprint, last)
			break
		}
		resp.SessionsState = append(resp.SessionsState, e.s.state)
		size += e.s.encodedSize
		last = e
	}
	return resp, nil
}

func (svc *getGPInfoService) GetGPSession(_ context.Context, req *yagpcc.GetGPSessionReq) (*yagpcc.GetGPSessionResponse, error) {
	k := req.GetSessionKey()
	if k == nil {
		return nil, status.Error(codes.InvalidArgument, "session_key is required")
	}
	s, ok := svc.store.load().byKey[pipeline.SessionKey{TmID: k.GetTmId(), ID: k.GetSessId()}]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no session {sess_id %d, tm_id %d} in the latest snapshots", k.GetSessId(), k.GetTmId())
	}
	return &yagpcc.GetGPSessionResponse{SessionsState: s.state}, nil
}

// unknownState names sessions whose pg_stat_activity.state is NULL (another
// user's backend seen without privileges, or a system process).
const unknownState = "unknown"

func (svc *getGPInfoService) GetTotalSessionsStat(context.Context, *yagpcc.GetTotalSessionsReq) (*yagpcc.GetTotalSessionsResponse, error) {
	v := svc.store.load()
	counts := map[string]int{}
	for _, s := range v.sessions {
		if s.system || !v.live(s) {
			continue
		}
		state := s.state.GetSessionInfo().GetState()
		if state == "" {
			state = unknownState
		}
		counts[state]++
	}
	resp := &yagpcc.GetTotalSessionsResponse{}
	for state, n := range counts {
		resp.SessionsStat = append(resp.SessionsStat, &yagpcc.SessionStat{State: state, Count: float64(n)})
	}
	slices.SortFunc(resp.SessionsStat, func(a, b *yagpcc.SessionStat) int {
		if a.State < b.State {
			return -1
		}
		return 1
	})
	return resp, nil
}

func (svc *getGPInfoService) GetGPQuery(_ context.Context, req *yagpcc.GetGPQueryReq) (*yagpcc.GetGPQueryResponse, error) {
	k := req.GetQueryKey()
	if k == nil {
		return nil, status.Error(codes.InvalidArgument, "query_key is required")
	}
	v := svc.store.load()
	sk := pipeline.SessionKey{TmID: int64(k.GetTmid()), ID: int64(k.GetSsid())}
	s, ok := v.byKey[sk]
	if !ok || !v.live(s) {
		s = nil
	}
	// A key names one query by its command count, or (ccnt 0) by its
	// query_start; ccnt 0 without query_start asks for the running query.
	var id queryID
	keyed := true
	switch {
	case k.GetCcnt() != 0:
		id = queryID{session: sk, ccnt: int64(k.GetCcnt())}
	case k.GetQueryStart() != nil:
		id = queryID{session: sk, start: k.GetQueryStart().AsTime().UnixNano()}
	default:
		keyed = false
	}
	var q *queryRecord
	if keyed {
		q = v.queries[id]
		// An ended query's event says how and when it ended, which the
		// processor's output cannot: it answers once it has come, within
		// the window too, and alone after it (kept for the retention).
		if q == nil || svc.finished.has(id) {
			return svc.finished.getGPQuery(id, k, v.time)
		}
	} else if s != nil {
		q = s.query
	}
	if q != nil {
		return &yagpcc.GetGPQueryResponse{QueriesData: q.totalQueryData(s, v.time)}, nil
	}
	if s == nil || !s.running {
		return nil, status.Errorf(codes.NotFound, "no running query of session {ssid %d, tmid %d} in the latest snapshot; "+
			"a key with ccnt or query_start names a finished one", k.GetSsid(), k.GetTmid())
	}
	// No query figures (the processor's queries are off): the session's recent window.
	st := s.state
	return &yagpcc.GetGPQueryResponse{QueriesData: &yagpcc.TotalQueryData{
		QueryStat: &yagpcc.QueryStat{
			ClusterId:         st.GetClusterId(),
			Hostname:          st.GetHostname(),
			CollectTime:       st.GetTime(),
			QueryKey:          st.GetRunningQuery(),
			QueryInfo:         st.GetRunningQueryInfo(),
			QueryStatus:       yagpcc.QueryStatus_QUERY_STATUS_START,
			StartTime:         st.GetRunningQueryInfo().GetStartTime(),
			TotalQueryMetrics: st.GetLastMetrics(),
			SessionState:      st.GetSessionInfo().GetState(),
		},
	}}, nil
}

func queryKeyString(k *yagpcc.QueryKey) string {
	return fmt.Sprintf("{ssid %d, tmid %d, ccnt %d, query_start %s}",
		k.GetSsid(), k.GetTmid(), k.GetCcnt(), k.GetQueryStart().AsTime().Format(time.RFC3339Nano))
}
