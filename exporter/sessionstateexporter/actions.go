// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	"github.com/gpotel/gpotel/internal/ownbackends"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// The actions and results the sessionstate_actions counter is kept by.
const (
	actionCancelQuery       = "cancel_query"
	actionTerminateSession  = "terminate_session"
	actionTerminateSessions = "terminate_sessions"
	actionMove              = "move_to_resource_group"

	resultDone     = "done"
	resultFailed   = "failed"
	resultRefused  = "refused"
	resultNotFound = "not_found"
	resultInvalid  = "invalid"
	resultDenied   = "denied"
)

// maxGroupNameBytes is NAMEDATALEN-1: the server cuts longer names.
const maxGroupNameBytes = 63

// actionService serves yagpcc's ActionService on the sessions of the newest
// snapshot: it signals a session's coordinator backend with the action
// connection's role, for clients actionGuard admits.
type actionService struct {
	yagpcc.UnimplementedActionServiceServer

	store       *sessionStore
	db          signaller
	guard       actionGuard
	logger      *zap.Logger
	telemetry   *metadata.TelemetryBuilder
	maxSessions int
	// maxViewAge is actions::max_view_age; 0: twice the collection interval.
	maxViewAge time.Duration
}

var _ yagpcc.ActionServiceServer = (*actionService)(nil)

var (
	terminateSuccess = yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_SUCCESS
	terminateError   = yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_ERROR
)

// actionCall is one call's account: who asked, what, on what; end logs it
// and counts it.
type actionCall struct {
	svc    *actionService
	action string
	fields []zap.Field
}

func (svc *actionService) begin(ctx context.Context, action string) (*actionCall, error) {
	c := &actionCall{svc: svc, action: action}
	who, err := svc.guard.admit(ctx)
	c.fields = append(c.fields, zap.String("action", action), zap.String("client", who))
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		c.fields = append(c.fields, zap.String("peer", p.Addr.String()))
	}
	if err != nil {
		return c, c.end(resultDenied, err)
	}
	return c, nil
}

// on names the session acted on.
func (c *actionCall) on(s *session) {
	info := s.state.GetSessionInfo()
	c.fields = append(c.fields, zap.Int64("sess_id", s.key.ID), zap.Int64("tm_id", s.key.TmID), zap.Int64("pid", info.GetPid()),
		zap.String("user", info.GetUser()), zap.String("database", info.GetDatabase()))
}

// end logs and counts the call's result; err is returned as given.
func (c *actionCall) end(result string, err error) error {
	detail := ""
	if err != nil {
		detail = status.Convert(err).Message()
	}
	c.svc.record(c.action, result, detail, c.fields)
	return err
}

// answer ends a call that answers with a TerminateResponse.
func (c *actionCall) answer(result string, code yagpcc.TerminateResponseStatusCode, text string) *yagpcc.TerminateResponse {
	c.svc.record(c.action, result, text, c.fields)
	return &yagpcc.TerminateResponse{StatusCode: code, StatusText: text}
}

func (svc *actionService) record(action, result, detail string, fields []zap.Field) {
	svc.logger.Info("session action", append(slices.Clip(fields), zap.String("result", result), zap.String("detail", detail))...)
	if svc.telemetry != nil {
		svc.telemetry.SessionstateActions.Add(context.Background(), 1, metric.WithAttributeSet(
			attribute.NewSet(attribute.String("action", action), attribute.String("result", result))))
	}
}

func (svc *actionService) TerminateQuery(ctx context.Context, req *yagpcc.TerminateQueryRequest) (*yagpcc.TerminateResponse, error) {
	call, err := svc.begin(ctx, actionCancelQuery)
	if err != nil {
		return nil, err
	}
	s, err := svc.queryTarget(call, req.GetQueryKey())
	if err != nil {
		return nil, err
	}
	if why := queryMismatch(s, req.GetQueryKey()); why != "" {
		return call.answer(resultRefused, terminateError, why+": nothing cancelled"), nil
	}
	// The server cancels only while the backend runs the snapshot's query.
	var started time.Time
	if qs := s.state.GetSessionInfo().GetQueryStart(); qs != nil {
		started = qs.AsTime()
	}
	done, err := svc.db.cancel(ctx, backendOf(s), started)
	return svc.signalled(call, s, "sent a cancel to the running query of", done, err)
}

func (svc *actionService) TerminateSession(ctx context.Context, req *yagpcc.TerminateSessionRequest) (*yagpcc.TerminateResponse, error) {
	call, err := svc.begin(ctx, actionTerminateSession)
	if err != nil {
		return nil, err
	}
	k := req.GetSessionKey()
	if k == nil {
		return nil, call.end(resultInvalid, status.Error(codes.InvalidArgument, "session_key is required"))
	}
	s, err := svc.target(call, pipeline.SessionKey{TmID: k.GetTmId(), ID: k.GetSessId()})
	if err != nil {
		return nil, err
	}
	done, err := svc.db.terminate(ctx, backendOf(s))
	return svc.signalled(call, s, "terminated", done, err)
}

func (svc *actionService) TerminateSessions(ctx context.Context, req *yagpcc.TerminateSessionsRequest) (*yagpcc.TerminateResponses, error) {
	call, err := svc.begin(ctx, actionTerminateSessions)
	if err != nil {
		return nil, err
	}
	call.fields = append(call.fields, zap.String("match_database", req.GetDatabase()), zap.String("match_user", req.GetUsername()))
	switch {
	case req.GetQueryId() != 0:
		return nil, call.end(resultInvalid, status.Errorf(codes.InvalidArgument,
			"query_id %d: gpotel keys queries by (tmid, ssid, ccnt) and has no query_id; end the session, or cancel its query with TerminateQuery", req.GetQueryId()))
	case req.GetDatabase() == "" && req.GetUsername() == "":
		return nil, call.end(resultInvalid, status.Error(codes.InvalidArgument, "name a database or username (or both): gpotel does not end every session at once"))
	}
	v, err := svc.freshView(call)
	if err != nil {
		return nil, err
	}
	var matched []*session
	for _, s := range v.sessions {
		info := s.state.GetSessionInfo()
		if v.live(s) && (req.GetDatabase() == "" || info.GetDatabase() == req.GetDatabase()) &&
			(req.GetUsername() == "" || info.GetUser() == req.GetUsername()) {
			matched = append(matched, s)
		}
	}
	if len(matched) > svc.maxSessions {
		return nil, call.end(resultRefused, status.Errorf(codes.FailedPrecondition,
			"%d sessions match, more than actions::max_sessions_per_call %d: none was ended; narrow the request", len(matched), svc.maxSessions))
	}
	resp := &yagpcc.TerminateResponses{}
	for _, s := range matched {
		one := &actionCall{svc: svc, action: actionTerminateSessions, fields: slices.Clip(call.fields)}
		one.on(s)
		var answer *yagpcc.TerminateResponse
		if why := untouchable(s); why != "" {
			answer = one.answer(resultRefused, terminateError, fmt.Sprintf("%s: not ended: %s", sessionName(s), why))
		} else {
			done, err := svc.db.terminate(ctx, backendOf(s))
			if answer, err = svc.signalled(one, s, "terminated", done, err); err != nil {
				answer = &yagpcc.TerminateResponse{StatusCode: terminateError, StatusText: status.Convert(err).Message()}
			}
		}
		resp.TerminateResponse = append(resp.TerminateResponse, answer)
	}
	return resp, nil
}

func (svc *actionService) MoveQueryToResourceGroup(ctx context.Context, req *yagpcc.MoveQueryToResourceGroupRequest) (*emptypb.Empty, error) {
	call, err := svc.begin(ctx, actionMove)
	if err != nil {
		return nil, err
	}
	group := req.GetResourceGroupName()
	call.fields = append(call.fields, zap.String("resource_group", group))
	if group == "" || len(group) > maxGroupNameBytes || strings.ContainsRune(group, 0) {
		return nil, call.end(resultInvalid, status.Errorf(codes.InvalidArgument, "resource_group_name %q: must be 1 to %d bytes, without NUL", group, maxGroupNameBytes))
	}
	s, err := svc.queryTarget(call, req.GetQueryKey())
	if err != nil {
		return nil, err
	}
	if why := queryMismatch(s, req.GetQueryKey()); why != "" {
		return nil, call.end(resultRefused, status.Error(codes.FailedPrecondition, why+": not moved"))
	}
	done, err := svc.db.move(ctx, backendOf(s), group)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, errOwnSession):
		return nil, call.end(resultRefused, status.Errorf(codes.FailedPrecondition, "%s: not moved: the collector's own session", sessionName(s)))
	case errors.Is(err, errNoBackend):
		return nil, call.end(resultNotFound, status.Errorf(codes.NotFound, "%s (pid %d): not moved: %v", sessionName(s), s.state.GetSessionInfo().GetPid(), err))
	case errors.Is(err, errOtherBackend), errors.Is(err, errBackendUnseen):
		return nil, call.end(resultRefused, status.Errorf(codes.FailedPrecondition, "%s (pid %d): not moved: %v", sessionName(s), s.state.GetSessionInfo().GetPid(), err))
	case errors.Is(err, errNoResourceGroups), errors.As(err, &pgErr):
		return nil, call.end(resultFailed, status.Errorf(codes.FailedPrecondition, "%s: not moved: %v", sessionName(s), err))
	case err != nil:
		return nil, call.end(resultFailed, status.Errorf(codes.Unavailable, "%s: not moved: %v", sessionName(s), err))
	case !done:
		return nil, call.end(resultFailed, status.Errorf(codes.FailedPrecondition, "%s: the server did not move it to %q", sessionName(s), group))
	}
	return &emptypb.Empty{}, call.end(resultDone, nil)
}

// queryTarget is the session of a query key, as target finds it.
func (svc *actionService) queryTarget(call *actionCall, k *yagpcc.QueryKey) (*session, error) {
	if k == nil {
		return nil, call.end(resultInvalid, status.Error(codes.InvalidArgument, "query_key is required"))
	}
	call.fields = append(call.fields, zap.Int64("ccnt", int64(k.GetCcnt())))
	if k.GetQueryStart() != nil {
		call.fields = append(call.fields, zap.Time("query_start", k.GetQueryStart().AsTime()))
	}
	return svc.target(call, pipeline.SessionKey{TmID: int64(k.GetTmid()), ID: int64(k.GetSsid())})
}

// target is a live session of the newest snapshot that gpotel may act on.
func (svc *actionService) target(call *actionCall, key pipeline.SessionKey) (*session, error) {
	v, err := svc.freshView(call)
	if err != nil {
		return nil, err
	}
	s := v.byKey[key]
	if s == nil || !v.live(s) {
		call.fields = append(call.fields, zap.Int64("sess_id", key.ID), zap.Int64("tm_id", key.TmID))
		return nil, call.end(resultNotFound, status.Errorf(codes.NotFound, "no session {sess_id %d, tm_id %d} in the newest snapshot", key.ID, key.TmID))
	}
	call.on(s)
	if why := untouchable(s); why != "" {
		return nil, call.end(resultRefused, status.Errorf(codes.FailedPrecondition, "%s: gpotel does not act on it: %s", sessionName(s), why))
	}
	return s, nil
}

// freshView is the newest snapshot's view, unless it is older than
// actions::max_view_age (or twice the interval between the last two
// snapshots): a receiver that stopped producing snapshots leaves a view
// whose pids the kernel may have given to other backends since.
func (svc *actionService) freshView(call *actionCall) (*view, error) {
	v := svc.store.load()
	limit := svc.maxViewAge
	if limit == 0 {
		limit = 2 * v.interval
	}
	switch age := v.age(time.Now()); {
	case v.time.IsZero():
		return nil, call.end(resultRefused, status.Error(codes.FailedPrecondition, "no snapshot yet: nothing to act on"))
	case limit == 0:
		return nil, call.end(resultRefused, status.Error(codes.FailedPrecondition,
			"one snapshot only: the collection interval is not known yet, so neither is how old a view may be to act on (actions::max_view_age 0: twice the interval between the last two snapshots); try again after the next snapshot"))
	case age > limit:
		return nil, call.end(resultRefused, status.Errorf(codes.FailedPrecondition,
			"the newest snapshot is %s old, more than %s (actions::max_view_age, or twice the collection interval): the receiver is not producing snapshots and pids may have been reused, so gpotel acts on nothing",
			age.Round(time.Millisecond), limit))
	}
	return v, nil
}

// backendOf names the session's coordinator backend for the server's check.
func backendOf(s *session) backendID {
	info := s.state.GetSessionInfo()
	return backendID{pid: info.GetPid(), started: info.GetBackendStart().AsTime(), sessID: s.key.ID}
}

// untouchable says why gpotel never acts on a session: a system process,
// one of the collector's own connections, or one the snapshot does not name
// well enough for the server to tell it from a later backend; "" for any
// other.
func untouchable(s *session) string {
	info := s.state.GetSessionInfo()
	own, isOwn := ownbackends.Of(info.GetPid())
	switch {
	case s.system:
		return "it is a system process, not a client session"
	case isOwn:
		return fmt.Sprintf("it is the collector's own %s (backend pid %d)", own, info.GetPid())
	case info.GetPid() <= 0:
		return "the snapshot names no coordinator backend to signal"
	case info.GetBackendStart() == nil:
		return fmt.Sprintf("the snapshot does not name the start of its backend (pid %d), so the server could not tell it from a later backend of the same pid "+
			"(the receiver's role cannot see other users' backend_start?)", info.GetPid())
	}
	return ""
}

// queryMismatch says why the key does not name the session's running query:
// by command count, by start, or (both 0) whichever query it runs.
func queryMismatch(s *session, k *yagpcc.QueryKey) string {
	info := s.state.GetSessionInfo()
	if !s.running {
		return fmt.Sprintf("%s runs no query (state %q in the newest snapshot)", sessionName(s), info.GetState())
	}
	if ccnt := int64(k.GetCcnt()); ccnt != 0 {
		switch {
		case s.query == nil || s.query.id.ccnt == 0:
			return fmt.Sprintf("%s: the snapshot does not know the running query's command count, so ccnt %d cannot be checked: name the query by query_start, or with ccnt 0",
				sessionName(s), ccnt)
		case s.query.id.ccnt != ccnt:
			return fmt.Sprintf("%s: its running query is ccnt %d, not %d", sessionName(s), s.query.id.ccnt, ccnt)
		}
	}
	if want := k.GetQueryStart(); want != nil {
		if got := info.GetQueryStart(); got == nil || !got.AsTime().Equal(want.AsTime()) {
			return fmt.Sprintf("%s: its running query started at %s, not %s",
				sessionName(s), got.AsTime().Format(time.RFC3339Nano), want.AsTime().Format(time.RFC3339Nano))
		}
	}
	return ""
}

// signalled answers a cancel or terminate by what the server did.
func (svc *actionService) signalled(call *actionCall, s *session, did string, done bool, err error) (*yagpcc.TerminateResponse, error) {
	pid := s.state.GetSessionInfo().GetPid()
	switch {
	case errors.Is(err, errOwnSession):
		return nil, call.end(resultRefused, status.Errorf(codes.FailedPrecondition, "%s: gpotel does not act on it: %v", sessionName(s), err))
	case errors.Is(err, errNoBackend):
		return call.answer(resultNotFound, terminateError, fmt.Sprintf("%s (pid %d): %v", sessionName(s), pid, err)), nil
	case isServersAnswer(err):
		return call.answer(resultRefused, terminateError, fmt.Sprintf("%s (pid %d): %v", sessionName(s), pid, err)), nil
	case err != nil:
		return call.answer(resultFailed, terminateError, fmt.Sprintf("%s (pid %d): %v", sessionName(s), pid, err)), nil
	case !done:
		return call.answer(resultFailed, terminateError, fmt.Sprintf("%s: the server did not signal its backend pid %d", sessionName(s), pid)), nil
	}
	return call.answer(resultDone, terminateSuccess, fmt.Sprintf("%s %s (pid %d)", did, sessionName(s), pid)), nil
}

func sessionName(s *session) string {
	return fmt.Sprintf("session {sess_id %d, tm_id %d}", s.key.ID, s.key.TmID)
}
