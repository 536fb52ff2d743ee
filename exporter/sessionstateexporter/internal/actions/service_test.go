// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package actions

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	grpcmetadata "google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/metadata"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/metadatatest"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/view"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/viewtest"
	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/clientname"
	"github.com/gpotel/gpotel/internal/gpsql"
	"github.com/gpotel/gpotel/internal/ownbackends"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/sessionaction"
	"github.com/gpotel/gpotel/internal/statustest"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// fakeSignaller records what would have been sent to the server.
type fakeSignaller struct {
	calls []string
	done  bool
	err   error
}

func (f *fakeSignaller) Cancel(_ context.Context, b sessionaction.Backend, started time.Time) (bool, error) {
	f.calls = append(f.calls, fmt.Sprintf("cancel %s started %s", backendString(b), started.Format(time.TimeOnly)))
	return f.done, f.err
}

func (f *fakeSignaller) Terminate(_ context.Context, b sessionaction.Backend) (bool, error) {
	f.calls = append(f.calls, fmt.Sprintf("terminate %s", backendString(b)))
	return f.done, f.err
}

func (f *fakeSignaller) Move(_ context.Context, b sessionaction.Backend, group string) (bool, error) {
	f.calls = append(f.calls, fmt.Sprintf("move %s %s", backendString(b), group))
	return f.done, f.err
}

func backendString(b sessionaction.Backend) string {
	return fmt.Sprintf("pid %d of %s session %d", b.PID, b.Started.Format(time.TimeOnly), b.SessID)
}

// viewtest.ActionToken is as long as the shortest token gpotel takes.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// queryStarted is when every test session's running query started, and
// backendStarted when its backend did.
var (
	queryStarted   = t0.Add(-time.Minute)
	backendStarted = t0.Add(-time.Hour)
)

// actionSession is a live session with a coordinator backend of pid 1000+id;
// ccnt > 0 gives it a running query of that command count.
func actionSession(id int64, app, state string, ccnt int64) *view.Session {
	s := &view.Session{
		Key: pipeline.SessionKey{TmID: viewtest.TmID, ID: id},
		State: &yagpcc.SessionState{SessionKey: &yagpcc.SessionKey{SessId: id, TmId: viewtest.TmID}, SessionInfo: &yagpcc.SessionInfo{
			Pid: 1000 + id, Database: "sales", User: "alice", ApplicationName: app, State: state,
			QueryStart: timestamppb.New(queryStarted), BackendStart: timestamppb.New(backendStarted),
		}},
		Running: state == "active",
		Seen:    t0,
	}
	if ccnt > 0 {
		s.Query = &view.QueryRecord{ID: view.QueryID{Session: s.Key, Ccnt: ccnt}, Start: queryStarted}
	}
	return s
}

// actionTest is an action service over the given sessions, with a fake
// server, logs and telemetry to read.
type actionTest struct {
	svc  *Service
	db   *fakeSignaller
	logs *observer.ObservedLogs
	tel  *componenttest.Telemetry
}

func newActionTest(t *testing.T, sessions ...*view.Session) *actionTest {
	t.Helper()
	// Stored just now, one 10 s interval after the view before it.
	v := &view.View{Time: t0, ByKey: map[pipeline.SessionKey]*view.Session{}, Received: time.Now(), Interval: 10 * time.Second}
	for _, s := range sessions {
		v.Sessions = append(v.Sessions, s)
		v.ByKey[s.Key] = s
	}
	return newActionTestOf(t, v)
}

// fixedView serves one view.
type fixedView struct{ v *view.View }

func (f fixedView) Load() *view.View { return f.v }

// newActionTestOf is an action service over the view v.
func newActionTestOf(t *testing.T, v *view.View) *actionTest {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	tb, err := metadata.NewTelemetryBuilder(tel.NewTelemetrySettings())
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	db := &fakeSignaller{done: true}
	// The rule's own tests (internal/sessionaction) wait.
	guard, err := sessionaction.NewGuard(sessionaction.Config{TokenFile: viewtest.ActionTokenFile(t, viewtest.ActionToken)}, sessionaction.WithDenialDelay(noDelay))
	if err != nil {
		t.Fatal(err)
	}
	cfg := sessionaction.DefaultConfig()
	cfg.MaxSessionsPerCall = 3
	return &actionTest{
		svc: NewService(fixedView{v}, sessionaction.NewWithSignaller(db, 0), guard, zap.New(core), tb, cfg.MaxSessionsPerCall),
		db:  db, logs: logs, tel: tel,
	}
}

// authorized is a call context that carries the action token.
func authorized(t *testing.T) context.Context {
	return grpcmetadata.NewIncomingContext(await.Context(t), grpcmetadata.Pairs(clientname.ActionTokenHeader, viewtest.ActionToken))
}

func sessionKey(id int64) *yagpcc.SessionKey {
	return &yagpcc.SessionKey{SessId: id, TmId: viewtest.TmID}
}

func queryKey(id int64, ccnt int32) *yagpcc.QueryKey {
	return &yagpcc.QueryKey{Tmid: viewtest.TmID, Ssid: int32(id), Ccnt: ccnt} // #nosec G115 -- small test ids
}

func (at *actionTest) assertNothingSent(t *testing.T) {
	t.Helper()
	if len(at.db.calls) > 0 {
		t.Errorf("sent to the server: %v", at.db.calls)
	}
}

func TestActionsNeedTheActionToken(t *testing.T) {
	at := newActionTest(t, actionSession(5, "psql", "active", 3))
	for name, ctx := range map[string]context.Context{
		"no token":    await.Context(t),
		"wrong token": grpcmetadata.NewIncomingContext(await.Context(t), grpcmetadata.Pairs(clientname.ActionTokenHeader, "act-later")),
		// The whole token and nothing else: neither a prefix of it nor more.
		"its prefix":      grpcmetadata.NewIncomingContext(await.Context(t), grpcmetadata.Pairs(clientname.ActionTokenHeader, viewtest.ActionToken[:3])),
		"it and one more": grpcmetadata.NewIncomingContext(await.Context(t), grpcmetadata.Pairs(clientname.ActionTokenHeader, viewtest.ActionToken+"!")),
		// The API's read token, however valid, is not the action token.
		"read token only": grpcmetadata.NewIncomingContext(await.Context(t), grpcmetadata.Pairs("authorization", "Bearer "+viewtest.ActionToken)),
	} {
		_, err := at.svc.TerminateSession(ctx, &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(5)})
		statustest.AssertCode(t, err, codes.PermissionDenied, clientname.ActionTokenHeader)
		_, err = at.svc.TerminateQuery(ctx, &yagpcc.TerminateQueryRequest{QueryKey: queryKey(5, 3)})
		statustest.AssertCode(t, err, codes.PermissionDenied, "may not act")
		_, err = at.svc.TerminateSessions(ctx, &yagpcc.TerminateSessionsRequest{Username: "alice"})
		statustest.AssertCode(t, err, codes.PermissionDenied, "may not act")
		_, err = at.svc.MoveQueryToResourceGroup(ctx, &yagpcc.MoveQueryToResourceGroupRequest{QueryKey: queryKey(5, 3), ResourceGroupName: "g"})
		statustest.AssertCode(t, err, codes.PermissionDenied, "may not act")
		if t.Failed() {
			t.Logf("case %s", name)
		}
	}
	at.assertNothingSent(t)
}

func TestActionsOnAnUnknownSessionAreNotFound(t *testing.T) {
	gone := actionSession(6, "psql", "active", 0)
	gone.Seen = t0.Add(-10 * time.Second) // kept for the grace period only
	at := newActionTest(t, actionSession(5, "psql", "active", 0), gone)
	for _, id := range []int64{99, 6} {
		_, err := at.svc.TerminateSession(authorized(t), &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(id)})
		statustest.AssertCode(t, err, codes.NotFound, fmt.Sprintf("sess_id %d", id))
		_, err = at.svc.TerminateQuery(authorized(t), &yagpcc.TerminateQueryRequest{QueryKey: queryKey(id, 0)})
		statustest.AssertCode(t, err, codes.NotFound, fmt.Sprintf("sess_id %d", id))
	}
	_, err := at.svc.TerminateSession(authorized(t), &yagpcc.TerminateSessionRequest{})
	statustest.AssertCode(t, err, codes.InvalidArgument, "session_key")
	at.assertNothingSent(t)
}

func TestActionsRefuseSystemProcesses(t *testing.T) {
	sys := actionSession(5, "", "active", 0)
	sys.System = true
	at := newActionTest(t, sys)
	_, err := at.svc.TerminateSession(authorized(t), &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(5)})
	statustest.AssertCode(t, err, codes.FailedPrecondition, "system process")
	_, err = at.svc.TerminateQuery(authorized(t), &yagpcc.TerminateQueryRequest{QueryKey: queryKey(5, 0)})
	statustest.AssertCode(t, err, codes.FailedPrecondition, "system process")
	at.assertNothingSent(t)
}

// ownBackend makes pid one of the collector's own backends for the test.
func ownBackend(t *testing.T, pid int64, what string) {
	var own ownbackends.Pool
	own.Add(pid, 0, what)
	t.Cleanup(func() { own.Remove(pid) })
}

// The receiver's monitoring connections and the action connection are the
// collector's by their backend pid: it never acts on them, whoever asks.
func TestActionsRefuseTheCollectorsOwnSessions(t *testing.T) {
	ownBackend(t, 1005, "monitoring connection")
	ownBackend(t, 1006, "action connection")
	at := newActionTest(t, actionSession(5, "psql", "active", 0), actionSession(6, "psql", "active", 0))
	for id, what := range map[int64]string{5: "monitoring connection (backend pid 1005)", 6: "action connection (backend pid 1006)"} {
		_, err := at.svc.TerminateSession(authorized(t), &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(id)})
		statustest.AssertCode(t, err, codes.FailedPrecondition, "the collector's own "+what)
		_, err = at.svc.TerminateQuery(authorized(t), &yagpcc.TerminateQueryRequest{QueryKey: queryKey(id, 0)})
		statustest.AssertCode(t, err, codes.FailedPrecondition, "the collector's own "+what)
	}
	at.assertNothingSent(t)

	// Whatever its application_name, the action connection's own backend.
	at = newActionTest(t, actionSession(7, "psql", "active", 0))
	at.db.err = sessionaction.ErrOwnSession
	_, err := at.svc.TerminateSession(authorized(t), &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(7)})
	statustest.AssertCode(t, err, codes.FailedPrecondition, "the collector's own")
}

// An application_name is anyone's to set (SET application_name = 'gpotel'):
// a session that took the collector's names is not the collector's, and
// gpotel acts on it like on any other.
func TestApplicationNameDoesNotProtectASession(t *testing.T) {
	at := newActionTest(t, actionSession(5, gpsql.ApplicationName, "active", 0), actionSession(6, gpsql.ActionsApplicationName, "idle", 0))
	resp, err := at.svc.TerminateQuery(authorized(t), &yagpcc.TerminateQueryRequest{QueryKey: queryKey(5, 0)})
	if err != nil || resp.GetStatusCode() != terminateSuccess {
		t.Errorf("cancel of a session named %q: %v %v, want SUCCESS", gpsql.ApplicationName, resp, err)
	}
	resp, err = at.svc.TerminateSession(authorized(t), &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(6)})
	if err != nil || resp.GetStatusCode() != terminateSuccess {
		t.Errorf("end of a session named %q: %v %v, want SUCCESS", gpsql.ActionsApplicationName, resp, err)
	}
	many, err := at.svc.TerminateSessions(authorized(t), &yagpcc.TerminateSessionsRequest{Username: "alice"})
	if err != nil || len(many.GetTerminateResponse()) != 2 ||
		many.GetTerminateResponse()[0].GetStatusCode() != terminateSuccess || many.GetTerminateResponse()[1].GetStatusCode() != terminateSuccess {
		t.Errorf("TerminateSessions over both: %v %v, want both ended", many, err)
	}
	if len(at.db.calls) != 4 {
		t.Errorf("sent %v, want a cancel and three ends", at.db.calls)
	}
}

// TerminateQuery cancels only the query it names: the session's running
// query, by command count or start, or (both 0) whatever the session runs.
func TestTerminateQueryCancelsOnlyTheNamedRunningQuery(t *testing.T) {
	at := newActionTest(t, actionSession(5, "psql", "active", 3), actionSession(6, "psql", "idle", 0), actionSession(8, "psql", "active", 0))
	for _, tc := range []struct {
		name string
		key  *yagpcc.QueryKey
		why  string
	}{
		{"another command count", queryKey(5, 2), "ccnt 3, not 2"},
		{"another start", &yagpcc.QueryKey{Tmid: viewtest.TmID, Ssid: 5, QueryStart: timestamppb.New(queryStarted.Add(time.Second))}, "started at"},
		{"an idle session", queryKey(6, 0), "runs no query"},
		{"a command count the snapshot does not know", queryKey(8, 4), "does not know the running query's command count"},
	} {
		resp, err := at.svc.TerminateQuery(authorized(t), &yagpcc.TerminateQueryRequest{QueryKey: tc.key})
		if err != nil || resp.GetStatusCode() != yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_ERROR ||
			!strings.Contains(resp.GetStatusText(), tc.why) {
			t.Errorf("%s: %v %v, want ERROR saying %q", tc.name, resp, err, tc.why)
		}
	}
	at.assertNothingSent(t)

	for _, key := range []*yagpcc.QueryKey{
		queryKey(5, 3), queryKey(5, 0),
		{Tmid: viewtest.TmID, Ssid: 5, QueryStart: timestamppb.New(queryStarted)},
	} {
		resp, err := at.svc.TerminateQuery(authorized(t), &yagpcc.TerminateQueryRequest{QueryKey: key})
		if err != nil || resp.GetStatusCode() != yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_SUCCESS {
			t.Errorf("%v: %v %v, want SUCCESS", key, resp, err)
		}
	}
	// Each asks the server to cancel only the query that started when the snapshot says.
	want := "cancel pid 1005 of " + backendStarted.Format(time.TimeOnly) + " session 5 started " + queryStarted.Format(time.TimeOnly)
	if got := strings.Join(at.db.calls, ","); got != strings.Join([]string{want, want, want}, ",") {
		t.Errorf("sent %q, want three cancels of pid 1005's query started %s", got, queryStarted.Format(time.TimeOnly))
	}
}

// Every action is refused, nothing sent, while the newest snapshot is older
// than twice the interval between the last two (or actions::max_view_age),
// or when only one has come: its pids may name other backends by now.
func TestActionsRefuseAStaleView(t *testing.T) {
	everyAction := func(at *actionTest) []error {
		ctx := authorized(t)
		_, errQuery := at.svc.TerminateQuery(ctx, &yagpcc.TerminateQueryRequest{QueryKey: queryKey(5, 3)})
		_, errSession := at.svc.TerminateSession(ctx, &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(5)})
		_, errSessions := at.svc.TerminateSessions(ctx, &yagpcc.TerminateSessionsRequest{Username: "alice"})
		_, errMove := at.svc.MoveQueryToResourceGroup(ctx, &yagpcc.MoveQueryToResourceGroupRequest{QueryKey: queryKey(5, 3), ResourceGroupName: "etl"})
		return []error{errQuery, errSession, errSessions, errMove}
	}
	withView := func(received time.Time, interval, maxViewAge time.Duration) *actionTest {
		at := newActionTest(t, actionSession(5, "psql", "active", 3))
		v := at.svc.views.Load()
		v.Received, v.Interval = received, interval
		at.svc.actor = sessionaction.NewWithSignaller(at.db, maxViewAge)
		return at
	}
	for name, tc := range map[string]struct {
		at   *actionTest
		want string
	}{
		"three intervals old":                {withView(time.Now().Add(-30*time.Second), 10*time.Second, 0), "more than 20s"},
		"older than max_view_age":            {withView(time.Now().Add(-time.Minute), time.Hour, 50*time.Second), "more than 50s"},
		"one snapshot: the interval unknown": {withView(time.Now(), 0, 0), "the collection interval is not known yet"},
		"no snapshot":                        {newActionTestOf(t, &view.View{ByKey: map[pipeline.SessionKey]*view.Session{}}), "no snapshot yet"},
	} {
		for _, err := range everyAction(tc.at) {
			statustest.AssertCode(t, err, codes.FailedPrecondition, tc.want)
		}
		tc.at.assertNothingSent(t)
		if t.Failed() {
			t.Fatalf("case %s", name)
		}
	}

	// Within the bound, the same calls reach the server.
	fresh := withView(time.Now().Add(-15*time.Second), 10*time.Second, 0)
	for _, err := range everyAction(fresh) {
		if err != nil {
			t.Errorf("a view 15 s old at a 10 s interval: %v", err)
		}
	}
	if len(fresh.db.calls) != 4 {
		t.Errorf("sent %v, want the four actions", fresh.db.calls)
	}
}

// A session whose snapshot does not name its backend's start cannot be
// told from a later backend of the pid: gpotel refuses to act on it.
func TestActionsRefuseABackendWithoutItsStart(t *testing.T) {
	unnamed := actionSession(5, "psql", "active", 3)
	unnamed.State.SessionInfo.BackendStart = nil
	at := newActionTest(t, unnamed)
	_, err := at.svc.TerminateSession(authorized(t), &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(5)})
	statustest.AssertCode(t, err, codes.FailedPrecondition, "does not name the start of its backend")
	_, err = at.svc.TerminateQuery(authorized(t), &yagpcc.TerminateQueryRequest{QueryKey: queryKey(5, 3)})
	statustest.AssertCode(t, err, codes.FailedPrecondition, "does not name the start of its backend")
	resp, err := at.svc.TerminateSessions(authorized(t), &yagpcc.TerminateSessionsRequest{Username: "alice"})
	if err != nil || len(resp.GetTerminateResponse()) != 1 || !strings.Contains(resp.GetTerminateResponse()[0].GetStatusText(), "does not name the start") {
		t.Errorf("TerminateSessions: %v %v", resp, err)
	}
	at.assertNothingSent(t)
}

// A backend the server no longer has, or a server error, is the answer's
// ERROR, with the server's reason.
func TestTerminateSessionSaysWhatTheServerAnswered(t *testing.T) {
	at := newActionTest(t, actionSession(5, "psql", "idle", 0))
	for answer, want := range map[error]string{
		sessionaction.ErrNoBackend:    "pid 1005): the server has no backend of this pid",
		sessionaction.ErrOtherBackend: "pid 1005): the pid now names another backend",
	} {
		at.db.err = answer
		resp, err := at.svc.TerminateSession(authorized(t), &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(5)})
		if err != nil || resp.GetStatusCode() != yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_ERROR ||
			!strings.Contains(resp.GetStatusText(), want) {
			t.Errorf("server answered %v: %v %v, want ERROR saying %q", answer, resp, err, want)
		}
	}
	at.db.err = fmt.Errorf("connect as gpotel_actions: refused")
	resp, err := at.svc.TerminateSession(authorized(t), &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(5)})
	if err != nil || resp.GetStatusCode() != yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_ERROR ||
		!strings.Contains(resp.GetStatusText(), "connect as gpotel_actions: refused") {
		t.Errorf("server unreachable: %v %v", resp, err)
	}
}

func TestTerminateSessionsAnswersForEachMatchingSession(t *testing.T) {
	bob := actionSession(7, "psql", "idle", 0)
	bob.State.SessionInfo.User = "bob"
	ownBackend(t, 1006, "monitoring connection")
	at := newActionTest(t, actionSession(5, "psql", "active", 0), actionSession(6, "psql", "idle", 0), bob)
	resp, err := at.svc.TerminateSessions(authorized(t), &yagpcc.TerminateSessionsRequest{Database: "sales", Username: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	got := resp.GetTerminateResponse()
	if len(got) != 2 || got[0].GetStatusCode() != yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_SUCCESS ||
		!strings.Contains(got[0].GetStatusText(), "sess_id 5") ||
		got[1].GetStatusCode() != yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_ERROR ||
		!strings.Contains(got[1].GetStatusText(), "sess_id 6") || !strings.Contains(got[1].GetStatusText(), "the collector's own") {
		t.Errorf("answers %v: want sess_id 5 terminated and 6 refused", got)
	}
	if strings.Join(at.db.calls, ",") != "terminate pid 1005 of "+backendStarted.Format(time.TimeOnly)+" session 5" {
		t.Errorf("sent %v, want only pid 1005's terminate", at.db.calls)
	}
	var logged []string
	for _, e := range at.logs.FilterMessage("session action").All() {
		m := e.ContextMap()
		logged = append(logged, fmt.Sprintf("%v %v %v %v", m["action"], m["match_user"], m["sess_id"], m["result"]))
	}
	if got := strings.Join(logged, ", "); got != "terminate_sessions alice 5 done, terminate_sessions alice 6 refused" {
		t.Errorf("logged %q, want each session's line", got)
	}

	_, err = at.svc.TerminateSessions(authorized(t), &yagpcc.TerminateSessionsRequest{})
	statustest.AssertCode(t, err, codes.InvalidArgument, "database or username")
	_, err = at.svc.TerminateSessions(authorized(t), &yagpcc.TerminateSessionsRequest{Username: "alice", QueryId: 12})
	statustest.AssertCode(t, err, codes.InvalidArgument, "query_id")

	many := newActionTest(t, actionSession(1, "psql", "idle", 0), actionSession(2, "psql", "idle", 0),
		actionSession(3, "psql", "idle", 0), actionSession(4, "psql", "idle", 0))
	_, err = many.svc.TerminateSessions(authorized(t), &yagpcc.TerminateSessionsRequest{Username: "alice"})
	statustest.AssertCode(t, err, codes.FailedPrecondition, "4 sessions match, more than actions::max_sessions_per_call 3")
	many.assertNothingSent(t)
}

func TestMoveQueryToResourceGroup(t *testing.T) {
	at := newActionTest(t, actionSession(5, "psql", "active", 3))
	if _, err := at.svc.MoveQueryToResourceGroup(authorized(t), &yagpcc.MoveQueryToResourceGroupRequest{QueryKey: queryKey(5, 3), ResourceGroupName: "etl"}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(at.db.calls, ",") != "move pid 1005 of "+backendStarted.Format(time.TimeOnly)+" session 5 etl" {
		t.Errorf("sent %v, want session 5 moved to etl", at.db.calls)
	}
	_, err := at.svc.MoveQueryToResourceGroup(authorized(t), &yagpcc.MoveQueryToResourceGroupRequest{QueryKey: queryKey(5, 2), ResourceGroupName: "etl"})
	statustest.AssertCode(t, err, codes.FailedPrecondition, "ccnt 3, not 2")
	_, err = at.svc.MoveQueryToResourceGroup(authorized(t), &yagpcc.MoveQueryToResourceGroupRequest{QueryKey: queryKey(5, 3)})
	statustest.AssertCode(t, err, codes.InvalidArgument, "resource_group_name")
	for _, name := range []string{strings.Repeat("g", 64), "etl\x00"} {
		_, err = at.svc.MoveQueryToResourceGroup(authorized(t), &yagpcc.MoveQueryToResourceGroupRequest{QueryKey: queryKey(5, 3), ResourceGroupName: name})
		statustest.AssertCode(t, err, codes.InvalidArgument, "resource_group_name")
	}

	at.db.err = fmt.Errorf("%w (dialect postgresql)", sessionaction.ErrNoResourceGroups)
	_, err = at.svc.MoveQueryToResourceGroup(authorized(t), &yagpcc.MoveQueryToResourceGroupRequest{QueryKey: queryKey(5, 3), ResourceGroupName: "etl"})
	statustest.AssertCode(t, err, codes.FailedPrecondition, "no resource groups (dialect postgresql)")
}

// Every action is logged with who asked, what, on which session and the
// result, and counted by action and result.
func TestEveryActionIsLoggedAndCounted(t *testing.T) {
	ownBackend(t, 1006, "monitoring connection")
	at := newActionTest(t, actionSession(5, "psql", "active", 3), actionSession(6, "psql", "idle", 0))
	_, _ = at.svc.TerminateQuery(authorized(t), &yagpcc.TerminateQueryRequest{QueryKey: queryKey(5, 3)})
	_, _ = at.svc.TerminateSession(authorized(t), &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(6)})
	_, _ = at.svc.TerminateSession(await.Context(t), &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(5)})

	entries := at.logs.FilterMessage("session action").All()
	if len(entries) != 3 {
		t.Fatalf("%d action log lines, want 3: %v", len(entries), at.logs.All())
	}
	first := entries[0].ContextMap()
	if first["action"] != "cancel_query" || first["client"] != "action token" || first["sess_id"] != int64(5) ||
		first["pid"] != int64(1005) || first["ccnt"] != int64(3) || first["result"] != "done" || entries[0].Level != zapcore.InfoLevel {
		t.Errorf("cancel logged as %v", first)
	}
	if e := entries[1].ContextMap(); e["action"] != "terminate_session" || e["result"] != "refused" || !strings.Contains(fmt.Sprint(e["detail"]), "monitoring") {
		t.Errorf("refusal logged as %v", e)
	}
	if e := entries[2].ContextMap(); e["result"] != "denied" || e["client"] != "" {
		t.Errorf("denial logged as %v", e)
	}

	counted := func(action, result string, n int64) metricdata.DataPoint[int64] {
		return metricdata.DataPoint[int64]{Value: n, Attributes: attribute.NewSet(attribute.String("action", action), attribute.String("result", result))}
	}
	metadatatest.AssertEqualSessionstateActions(t, at.tel, []metricdata.DataPoint[int64]{
		counted("cancel_query", "done", 1), counted("terminate_session", "refused", 1), counted("terminate_session", "denied", 1),
	}, metricdatatest.IgnoreTimestamp())
}

// noDelay is a wrong token's delay already over.
func noDelay(time.Duration) <-chan time.Time {
	over := make(chan time.Time)
	close(over)
	return over
}
