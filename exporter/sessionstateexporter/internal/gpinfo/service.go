// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpinfo

import (
	"context"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/paging"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/view"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// Finished answers for the finished queries kept.
type Finished interface {
	// Has tells whether id's event is kept and not yet past the retention.
	Has(id view.QueryID) bool
	// GetGPQuery answers GetGPQuery for a query the newest snapshot no
	// longer has, collected at collect.
	GetGPQuery(id view.QueryID, k *yagpcc.QueryKey, collect time.Time) (*yagpcc.GetGPQueryResponse, error)
}

// Limits bound list answers.
type Limits struct {
	// DefaultPageSize applies when a request's page_size is 0, MaxPageSize
	// caps it.
	DefaultPageSize, MaxPageSize int
	// MaxResponseBytes keeps every list response below this encoded size.
	MaxResponseBytes int
}

// Service answers yagpcc's GetGPInfo from the session store.
type Service struct {
	yagpcc.UnimplementedGetGPInfoServer

	store    *view.Store
	finished Finished
	Limits
}

// NewService answers from store, and for the queries the newest view no
// longer has from finished (never nil: the exporter always keeps a store,
// empty when finished_queries::retention is 0).
func NewService(store *view.Store, finished Finished, limits Limits) *Service {
	return &Service{store: store, finished: finished, Limits: limits}
}

// listRequest is what GetGPSessions and GetGPQueries have in common.
type listRequest struct {
	method    string
	fields    []*yagpcc.SessionFieldWrapper
	filters   []*yagpcc.SessionFilter
	pageSize  int64
	pageToken string
}

// GetGPSessions answers a page of the newest view's sessions.
func (svc *Service) GetGPSessions(_ context.Context, req *yagpcc.GetGPSessionsReq) (*yagpcc.GetGPSessionsResponse, error) {
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

// GetGPQueries answers a page of the live sessions running a query.
func (svc *Service) GetGPQueries(_ context.Context, req *yagpcc.GetGPQueriesReq) (*yagpcc.GetGPSessionsResponse, error) {
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

func (svc *Service) list(req listRequest, filter *sessionFilter) (*yagpcc.GetGPSessionsResponse, error) {
	spec, err := parseSortSpec(req.fields)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	pageSize := int(req.pageSize)
	switch {
	case req.pageSize < 0:
		return nil, status.Errorf(codes.InvalidArgument, "page_size must not be negative, got %d", req.pageSize)
	case req.pageSize == 0:
		pageSize = svc.DefaultPageSize
	case req.pageSize > int64(svc.MaxPageSize):
		pageSize = svc.MaxPageSize
	}
	fingerprint := requestFingerprint(req.method, spec, filter)

	v := svc.store.Load()
	order := orderOf(v, spec)
	start := 0
	if req.pageToken != "" {
		vals, key, err := decodeToken(req.pageToken, fingerprint, spec)
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		start, _ = slices.BinarySearchFunc(order, 0, func(e orderEntry, _ int) int {
			if spec.compare(e.vals, e.s.Key, vals, key) <= 0 {
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
		tokenRoom := paging.TokenFieldOverhead + tokenBound(fingerprint, e)
		if size+e.s.EncodedSize+tokenRoom > svc.MaxResponseBytes {
			tokenRoom = paging.TokenFieldOverhead + len(encodeToken(fingerprint, e))
		}
		full := len(resp.SessionsState) == pageSize ||
			size+e.s.EncodedSize+tokenRoom > svc.MaxResponseBytes
		if full && len(resp.SessionsState) == 0 {
			return nil, status.Errorf(codes.ResourceExhausted,
				"session {sess_id %d, tm_id %d} alone needs %d bytes, more than max_response_bytes %d",
				e.s.Key.ID, e.s.Key.TmID, e.s.EncodedSize+tokenRoom, svc.MaxResponseBytes)
		}
		if full {
			// A matching session remains: the client needs the next page.
			resp.NextPageToken = encodeToken(fingerprint, last)
			break
		}
		resp.SessionsState = append(resp.SessionsState, e.s.State)
		size += e.s.EncodedSize
		last = e
	}
	return resp, nil
}

// GetGPSession answers one session of the newest view.
func (svc *Service) GetGPSession(_ context.Context, req *yagpcc.GetGPSessionReq) (*yagpcc.GetGPSessionResponse, error) {
	k := req.GetSessionKey()
	if k == nil {
		return nil, status.Error(codes.InvalidArgument, "session_key is required")
	}
	s, ok := svc.store.Load().ByKey[pipeline.SessionKey{TmID: k.GetTmId(), ID: k.GetSessId()}]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no session {sess_id %d, tm_id %d} in the latest snapshots", k.GetSessId(), k.GetTmId())
	}
	return &yagpcc.GetGPSessionResponse{SessionsState: s.State}, nil
}

// unknownState names sessions whose pg_stat_activity.state is NULL (another
// user's backend seen without privileges, or a system process).
const unknownState = "unknown"

// GetTotalSessionsStat counts the live client sessions by state.
func (svc *Service) GetTotalSessionsStat(context.Context, *yagpcc.GetTotalSessionsReq) (*yagpcc.GetTotalSessionsResponse, error) {
	v := svc.store.Load()
	counts := map[string]int{}
	for _, s := range v.Sessions {
		if s.System || !v.Live(s) {
			continue
		}
		state := s.State.GetSessionInfo().GetState()
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

// GetGPQuery answers one query: running, or finished from the finished work kept.
func (svc *Service) GetGPQuery(_ context.Context, req *yagpcc.GetGPQueryReq) (*yagpcc.GetGPQueryResponse, error) {
	k := req.GetQueryKey()
	if k == nil {
		return nil, status.Error(codes.InvalidArgument, "query_key is required")
	}
	v := svc.store.Load()
	sk := pipeline.SessionKey{TmID: int64(k.GetTmid()), ID: int64(k.GetSsid())}
	s, ok := v.ByKey[sk]
	if !ok || !v.Live(s) {
		s = nil
	}
	// A key names one query by its command count, or (ccnt 0) by its
	// query_start; ccnt 0 without query_start asks for the running query.
	var id view.QueryID
	keyed := true
	switch {
	case k.GetCcnt() != 0:
		id = view.QueryID{Session: sk, Ccnt: int64(k.GetCcnt())}
	case k.GetQueryStart() != nil:
		id = view.QueryID{Session: sk, Start: k.GetQueryStart().AsTime().UnixNano()}
	default:
		keyed = false
	}
	var q *view.QueryRecord
	if keyed {
		q = v.Queries[id]
		// An ended query's event says how and when it ended, which the
		// processor's output cannot: it answers once it has come, within
		// the window too, and alone after it (kept for the retention).
		if q == nil || svc.finished.Has(id) {
			return svc.finished.GetGPQuery(id, k, v.Time)
		}
	} else if s != nil {
		q = s.Query
	}
	if q != nil {
		return &yagpcc.GetGPQueryResponse{QueriesData: q.TotalQueryData(s, v.Time)}, nil
	}
	if s == nil || !s.Running {
		return nil, status.Errorf(codes.NotFound, "no running query of session {ssid %d, tmid %d} in the latest snapshot; "+
			"a key with ccnt or query_start names a finished one", k.GetSsid(), k.GetTmid())
	}
	// No query figures (the processor's queries are off): the session's recent window.
	st := s.State
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
