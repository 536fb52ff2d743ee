// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package actions serves yagpcc's ActionService for the sessionstate
// exporter on the sessions of the newest view: for clients the guard
// admits, it acts on a session's coordinator backend through the action
// path (internal/sessionaction) and answers in yagpcc's terms; every call
// is logged and counted.
package actions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/metadata"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/view"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/sessionaction"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// actionTerminateSessions is the counter's action of TerminateSessions:
// each session it ends is counted under it.
const actionTerminateSessions = "terminate_sessions"

// Service serves yagpcc's ActionService on the sessions of the newest
// view.
type Service struct {
	yagpcc.UnimplementedActionServiceServer

	views       Views
	actor       *sessionaction.Actor
	guard       *sessionaction.Guard
	logger      *zap.Logger
	telemetry   *metadata.TelemetryBuilder
	maxSessions int
}

var _ yagpcc.ActionServiceServer = (*Service)(nil)

// Views gives the newest view (the session store).
type Views interface {
	Load() *view.View
}

// NewService acts through actor on the sessions of views for the clients
// guard admits, at most maxSessions per TerminateSessions call; it logs
// each call to logger and counts it in telemetry (nil: not counted).
func NewService(views Views, actor *sessionaction.Actor, guard *sessionaction.Guard, logger *zap.Logger,
	telemetry *metadata.TelemetryBuilder, maxSessions int) *Service {
	return &Service{views: views, actor: actor, guard: guard, logger: logger, telemetry: telemetry, maxSessions: maxSessions}
}

var (
	terminateSuccess = yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_SUCCESS
	terminateError   = yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_ERROR
)

// actionCall is one call's account: who asked, what, on what; end logs it
// and counts it.
type actionCall struct {
	svc    *Service
	action string
	fields []zap.Field
}

func (svc *Service) begin(ctx context.Context, action string) (*actionCall, error) {
	c := &actionCall{svc: svc, action: action}
	who, err := svc.guard.Admit(ctx)
	c.fields = append(c.fields, zap.String("action", action), zap.String("client", who))
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		c.fields = append(c.fields, zap.String("peer", p.Addr.String()))
	}
	if err != nil {
		return c, c.end(sessionaction.Denied, err)
	}
	return c, nil
}

// on names the session acted on.
func (c *actionCall) on(s *view.Session) {
	info := s.State.GetSessionInfo()
	c.fields = append(c.fields, zap.Int64("sess_id", s.Key.ID), zap.Int64("tm_id", s.Key.TmID), zap.Int64("pid", info.GetPid()),
		zap.String("user", info.GetUser()), zap.String("database", info.GetDatabase()))
}

// end logs and counts the call's result; err is returned as given.
func (c *actionCall) end(result sessionaction.Result, err error) error {
	detail := ""
	if err != nil {
		detail = status.Convert(err).Message()
	}
	c.svc.record(c.action, result, detail, c.fields)
	return err
}

// answer ends a call that answers with a TerminateResponse.
func (c *actionCall) answer(result sessionaction.Result, code yagpcc.TerminateResponseStatusCode, text string) *yagpcc.TerminateResponse {
	c.svc.record(c.action, result, text, c.fields)
	return &yagpcc.TerminateResponse{StatusCode: code, StatusText: text}
}

func (svc *Service) record(action string, result sessionaction.Result, detail string, fields []zap.Field) {
	svc.logger.Info("session action", append(slices.Clip(fields), zap.String("result", string(result)), zap.String("detail", detail))...)
	if svc.telemetry != nil {
		svc.telemetry.SessionstateActions.Add(context.Background(), 1, metric.WithAttributeSet(
			attribute.NewSet(attribute.String("action", action), attribute.String("result", string(result)))))
	}
}

// TerminateQuery cancels the running query a key names.
func (svc *Service) TerminateQuery(ctx context.Context, req *yagpcc.TerminateQueryRequest) (*yagpcc.TerminateResponse, error) {
	call, err := svc.begin(ctx, string(sessionaction.CancelQuery))
	if err != nil {
		return nil, err
	}
	s, v, err := svc.queryTarget(call, req.GetQueryKey())
	if err != nil {
		return nil, err
	}
	o := svc.act(ctx, v, s, sessionaction.Request{Action: sessionaction.CancelQuery, Query: queryOf(req.GetQueryKey())})
	if o.Stage == sessionaction.StageQuery {
		return call.answer(o.Result, terminateError, o.Err.Error()+": nothing cancelled"), nil
	}
	return svc.signalled(call, s, "sent a cancel to the running query of", o)
}

// TerminateSession ends a session.
func (svc *Service) TerminateSession(ctx context.Context, req *yagpcc.TerminateSessionRequest) (*yagpcc.TerminateResponse, error) {
	call, err := svc.begin(ctx, string(sessionaction.TerminateSession))
	if err != nil {
		return nil, err
	}
	k := req.GetSessionKey()
	if k == nil {
		return nil, call.end(sessionaction.Invalid, status.Error(codes.InvalidArgument, "session_key is required"))
	}
	s, v, err := svc.target(call, pipeline.SessionKey{TmID: k.GetTmId(), ID: k.GetSessId()})
	if err != nil {
		return nil, err
	}
	return svc.signalled(call, s, "terminated", svc.act(ctx, v, s, sessionaction.Request{Action: sessionaction.TerminateSession}))
}

// TerminateSessions ends the live sessions of a database or user, up to
// actions::max_sessions_per_call at once.
func (svc *Service) TerminateSessions(ctx context.Context, req *yagpcc.TerminateSessionsRequest) (*yagpcc.TerminateResponses, error) {
	call, err := svc.begin(ctx, actionTerminateSessions)
	if err != nil {
		return nil, err
	}
	call.fields = append(call.fields, zap.String("match_database", req.GetDatabase()), zap.String("match_user", req.GetUsername()))
	switch {
	case req.GetQueryId() != 0:
		return nil, call.end(sessionaction.Invalid, status.Errorf(codes.InvalidArgument,
			"query_id %d: gpotel keys queries by (tmid, ssid, ccnt) and has no query_id; end the session, or cancel its query with TerminateQuery", req.GetQueryId()))
	case req.GetDatabase() == "" && req.GetUsername() == "":
		return nil, call.end(sessionaction.Invalid, status.Error(codes.InvalidArgument,
			"name a database or username (or both): gpotel does not end every session at once"))
	}
	v, err := svc.freshView(call)
	if err != nil {
		return nil, err
	}
	var matched []*view.Session
	for _, s := range v.Sessions {
		info := s.State.GetSessionInfo()
		if v.Live(s) && (req.GetDatabase() == "" || info.GetDatabase() == req.GetDatabase()) &&
			(req.GetUsername() == "" || info.GetUser() == req.GetUsername()) {
			matched = append(matched, s)
		}
	}
	if len(matched) > svc.maxSessions {
		return nil, call.end(sessionaction.Refused, status.Errorf(codes.FailedPrecondition,
			"%d sessions match, more than actions::max_sessions_per_call %d: none was ended; narrow the request", len(matched), svc.maxSessions))
	}
	resp := &yagpcc.TerminateResponses{}
	for _, s := range matched {
		one := &actionCall{svc: svc, action: actionTerminateSessions, fields: slices.Clip(call.fields)}
		one.on(s)
		var answer *yagpcc.TerminateResponse
		if o := svc.act(ctx, v, s, sessionaction.Request{Action: sessionaction.TerminateSession}); o.Stage == sessionaction.StageTarget {
			answer = one.answer(o.Result, terminateError, fmt.Sprintf("%s: not ended: %v", sessionName(s), o.Err))
		} else if answer, err = svc.signalled(one, s, "terminated", o); err != nil {
			answer = &yagpcc.TerminateResponse{StatusCode: terminateError, StatusText: status.Convert(err).Message()}
		}
		resp.TerminateResponse = append(resp.TerminateResponse, answer)
	}
	return resp, nil
}

// MoveQueryToResourceGroup moves the session of a running query to a
// resource group.
func (svc *Service) MoveQueryToResourceGroup(ctx context.Context, req *yagpcc.MoveQueryToResourceGroupRequest) (*emptypb.Empty, error) {
	call, err := svc.begin(ctx, string(sessionaction.MoveToResourceGroup))
	if err != nil {
		return nil, err
	}
	group := req.GetResourceGroupName()
	call.fields = append(call.fields, zap.String("resource_group", group))
	move := sessionaction.Request{Action: sessionaction.MoveToResourceGroup, Query: queryOf(req.GetQueryKey()), Group: group}
	if err := sessionaction.CheckRequest(move); err != nil {
		return nil, call.end(sessionaction.Invalid, status.Error(codes.InvalidArgument, err.Error()))
	}
	s, v, err := svc.queryTarget(call, req.GetQueryKey())
	if err != nil {
		return nil, err
	}
	o := svc.act(ctx, v, s, move)
	var pgErr *pgconn.PgError
	pid := s.State.GetSessionInfo().GetPid()
	code := codes.FailedPrecondition
	switch {
	case o.Result == sessionaction.Done:
		return &emptypb.Empty{}, call.end(o.Result, nil)
	case o.Stage == sessionaction.StageQuery:
		return nil, call.end(o.Result, status.Error(code, o.Err.Error()+": not moved"))
	case o.Stage != sessionaction.StageServer:
		return nil, svc.refusedBefore(call, s, o)
	case errors.Is(o.Err, sessionaction.ErrOwnSession):
		return nil, call.end(o.Result, status.Errorf(code, "%s: not moved: the collector's own session", sessionName(s)))
	case errors.Is(o.Err, sessionaction.ErrNoBackend):
		return nil, call.end(o.Result, status.Errorf(codes.NotFound, "%s (pid %d): not moved: %v", sessionName(s), pid, o.Err))
	case errors.Is(o.Err, sessionaction.ErrOtherBackend), errors.Is(o.Err, sessionaction.ErrBackendUnseen):
		return nil, call.end(o.Result, status.Errorf(code, "%s (pid %d): not moved: %v", sessionName(s), pid, o.Err))
	case errors.Is(o.Err, sessionaction.ErrNotDone):
		return nil, call.end(o.Result, status.Errorf(code, "%s: the server did not move it to %q", sessionName(s), group))
	case !errors.Is(o.Err, sessionaction.ErrNoResourceGroups) && !errors.As(o.Err, &pgErr):
		code = codes.Unavailable
	}
	return nil, call.end(o.Result, status.Errorf(code, "%s: not moved: %v", sessionName(s), o.Err))
}

// queryTarget is the session of a query key, as target finds it.
func (svc *Service) queryTarget(call *actionCall, k *yagpcc.QueryKey) (*view.Session, *view.View, error) {
	if k == nil {
		return nil, nil, call.end(sessionaction.Invalid, status.Error(codes.InvalidArgument, "query_key is required"))
	}
	call.fields = append(call.fields, zap.Int64("ccnt", int64(k.GetCcnt())))
	if k.GetQueryStart() != nil {
		call.fields = append(call.fields, zap.Time("query_start", k.GetQueryStart().AsTime()))
	}
	return svc.target(call, pipeline.SessionKey{TmID: int64(k.GetTmid()), ID: int64(k.GetSsid())})
}

// target is a live session of the newest snapshot, and that snapshot's view.
func (svc *Service) target(call *actionCall, key pipeline.SessionKey) (*view.Session, *view.View, error) {
	v, err := svc.freshView(call)
	if err != nil {
		return nil, nil, err
	}
	s := v.ByKey[key]
	if s == nil || !v.Live(s) {
		call.fields = append(call.fields, zap.Int64("sess_id", key.ID), zap.Int64("tm_id", key.TmID))
		return nil, nil, call.end(sessionaction.NotFound, status.Errorf(codes.NotFound, "no session {sess_id %d, tm_id %d} in the newest snapshot", key.ID, key.TmID))
	}
	call.on(s)
	return s, v, nil
}

// freshView is the newest snapshot's view, unless the action path finds it
// too old to act on.
func (svc *Service) freshView(call *actionCall) (*view.View, error) {
	v := svc.views.Load()
	if err := svc.actor.Fresh(actionView(v)); err != nil {
		return nil, call.end(sessionaction.Refused, status.Error(codes.FailedPrecondition, err.Error()))
	}
	return v, nil
}

// act acts on s through the action path, on the word of v.
func (svc *Service) act(ctx context.Context, v *view.View, s *view.Session, req sessionaction.Request) sessionaction.Outcome {
	return svc.actor.Act(ctx, actionView(v), actionTarget(s), req)
}

// refusedBefore ends a call the action path refused before sending: its
// view went stale since target read it, or gpotel never acts on s.
func (svc *Service) refusedBefore(call *actionCall, s *view.Session, o sessionaction.Outcome) error {
	if o.Stage == sessionaction.StageTarget {
		return call.end(o.Result, status.Errorf(codes.FailedPrecondition, "%s: gpotel does not act on it: %v", sessionName(s), o.Err))
	}
	return call.end(o.Result, status.Error(codes.FailedPrecondition, o.Err.Error()))
}

// actionView is what the action path needs to know of a view.
func actionView(v *view.View) sessionaction.View {
	return sessionaction.View{Time: v.Time, Age: v.Age(time.Now()), Interval: v.Interval}
}

// actionTarget is the session as the action path sees it.
func actionTarget(s *view.Session) sessionaction.Target {
	info := s.State.GetSessionInfo()
	t := sessionaction.Target{
		Key: s.Key, PID: info.GetPid(), System: s.System, Running: s.Running, State: info.GetState(),
	}
	if info.GetBackendStart() != nil {
		t.BackendStart = info.GetBackendStart().AsTime()
	}
	if info.GetQueryStart() != nil {
		t.QueryStart = info.GetQueryStart().AsTime()
	}
	if s.Query != nil {
		t.QueryCcnt = s.Query.ID.Ccnt
	}
	return t
}

// queryOf is the query a key names: by command count, by start, or both.
func queryOf(k *yagpcc.QueryKey) sessionaction.Query {
	q := sessionaction.Query{Ccnt: int64(k.GetCcnt())}
	if k.GetQueryStart() != nil {
		q.Start = k.GetQueryStart().AsTime()
	}
	return q
}

// signalled answers a cancel or terminate by the action's outcome.
func (svc *Service) signalled(call *actionCall, s *view.Session, did string, o sessionaction.Outcome) (*yagpcc.TerminateResponse, error) {
	pid := s.State.GetSessionInfo().GetPid()
	switch {
	case o.Stage != sessionaction.StageServer:
		return nil, svc.refusedBefore(call, s, o)
	case errors.Is(o.Err, sessionaction.ErrOwnSession):
		return nil, call.end(o.Result, status.Errorf(codes.FailedPrecondition, "%s: gpotel does not act on it: %v", sessionName(s), o.Err))
	case errors.Is(o.Err, sessionaction.ErrNotDone):
		return call.answer(o.Result, terminateError, fmt.Sprintf("%s: the server did not signal its backend pid %d", sessionName(s), pid)), nil
	case o.Result != sessionaction.Done:
		return call.answer(o.Result, terminateError, fmt.Sprintf("%s (pid %d): %v", sessionName(s), pid, o.Err)), nil
	}
	return call.answer(o.Result, terminateSuccess, fmt.Sprintf("%s %s (pid %d)", did, sessionName(s), pid)), nil
}

func sessionName(s *view.Session) string {
	return actionTarget(s).Name()
}
