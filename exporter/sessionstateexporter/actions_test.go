// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcmetadata "google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/metadata"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/metadatatest"
	"github.com/gpotel/gpotel/internal/clientname"
	"github.com/gpotel/gpotel/internal/gpsql"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// fakeSignaller records what would have been sent to the server.
type fakeSignaller struct {
	calls []string
	done  bool
	err   error
}

func (f *fakeSignaller) cancel(_ context.Context, pid int64, started time.Time) (bool, error) {
	f.calls = append(f.calls, fmt.Sprintf("cancel %d started %s", pid, started.Format(time.TimeOnly)))
	return f.done, f.err
}

func (f *fakeSignaller) terminate(_ context.Context, pid int64) (bool, error) {
	f.calls = append(f.calls, fmt.Sprintf("terminate %d", pid))
	return f.done, f.err
}

func (f *fakeSignaller) move(_ context.Context, sessID int64, group string) (bool, error) {
	f.calls = append(f.calls, fmt.Sprintf("move %d %s", sessID, group))
	return f.done, f.err
}

const testActionToken = "act-now"

// queryStarted is when every test session's running query started.
var queryStarted = t0.Add(-time.Minute)

// actionSession is a live session with a coordinator backend of pid 1000+id;
// ccnt > 0 gives it a running query of that command count.
func actionSession(id int64, app, state string, ccnt int64) *session {
	s := &session{
		key: pipeline.SessionKey{TmID: testTmID, ID: id},
		state: &yagpcc.SessionState{SessionKey: &yagpcc.SessionKey{SessId: id, TmId: testTmID}, SessionInfo: &yagpcc.SessionInfo{
			Pid: 1000 + id, Database: "sales", User: "alice", ApplicationName: app, State: state,
			QueryStart: timestamppb.New(queryStarted),
		}},
		running: state == "active",
		seen:    t0,
	}
	if ccnt > 0 {
		s.query = &queryRecord{id: queryID{session: s.key, ccnt: ccnt}, start: queryStarted}
	}
	return s
}

// actionTest is an action service over the given sessions, with a fake
// server, logs and telemetry to read.
type actionTest struct {
	svc  *actionService
	db   *fakeSignaller
	logs *observer.ObservedLogs
	tel  *componenttest.Telemetry
}

func newActionTest(t *testing.T, sessions ...*session) *actionTest {
	t.Helper()
	store := newSessionStore(testConfig(), zap.NewNop(), "")
	v := &view{time: t0, byKey: map[pipeline.SessionKey]*session{}}
	for _, s := range sessions {
		v.sessions = append(v.sessions, s)
		v.byKey[s.key] = s
	}
	store.current.Store(v)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	tb, err := metadata.NewTelemetryBuilder(tel.NewTelemetrySettings())
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	db := &fakeSignaller{done: true}
	cfg := defaultActionsConfig()
	cfg.MaxSessionsPerCall = 3
	return &actionTest{
		svc: &actionService{
			store: store, db: db, logger: zap.New(core), telemetry: tb, maxSessions: cfg.MaxSessionsPerCall,
			guard: actionGuard{token: []byte(testActionToken)},
		},
		db: db, logs: logs, tel: tel,
	}
}

// authorized is a call context that carries the action token.
func authorized(t *testing.T) context.Context {
	return grpcmetadata.NewIncomingContext(ctxTimeout(t), grpcmetadata.Pairs(clientname.ActionTokenHeader, testActionToken))
}

func sessionKey(id int64) *yagpcc.SessionKey { return &yagpcc.SessionKey{SessId: id, TmId: testTmID} }

func queryKey(id int64, ccnt int32) *yagpcc.QueryKey {
	return &yagpcc.QueryKey{Tmid: testTmID, Ssid: int32(id), Ccnt: ccnt} // #nosec G115 -- small test ids
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
		"no token":    ctxTimeout(t),
		"wrong token": grpcmetadata.NewIncomingContext(ctxTimeout(t), grpcmetadata.Pairs(clientname.ActionTokenHeader, "act-later")),
		// The whole token and nothing else: neither a prefix of it nor more.
		"its prefix":      grpcmetadata.NewIncomingContext(ctxTimeout(t), grpcmetadata.Pairs(clientname.ActionTokenHeader, testActionToken[:3])),
		"it and one more": grpcmetadata.NewIncomingContext(ctxTimeout(t), grpcmetadata.Pairs(clientname.ActionTokenHeader, testActionToken+"!")),
		// The API's read token, however valid, is not the action token.
		"read token only": grpcmetadata.NewIncomingContext(ctxTimeout(t), grpcmetadata.Pairs("authorization", "Bearer "+testActionToken)),
	} {
		_, err := at.svc.TerminateSession(ctx, &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(5)})
		assertCode(t, err, codes.PermissionDenied, clientname.ActionTokenHeader)
		_, err = at.svc.TerminateQuery(ctx, &yagpcc.TerminateQueryRequest{QueryKey: queryKey(5, 3)})
		assertCode(t, err, codes.PermissionDenied, "may not act")
		_, err = at.svc.TerminateSessions(ctx, &yagpcc.TerminateSessionsRequest{Username: "alice"})
		assertCode(t, err, codes.PermissionDenied, "may not act")
		_, err = at.svc.MoveQueryToResourceGroup(ctx, &yagpcc.MoveQueryToResourceGroupRequest{QueryKey: queryKey(5, 3), ResourceGroupName: "g"})
		assertCode(t, err, codes.PermissionDenied, "may not act")
		if t.Failed() {
			t.Logf("case %s", name)
		}
	}
	at.assertNothingSent(t)
}

func TestActionsOnAnUnknownSessionAreNotFound(t *testing.T) {
	gone := actionSession(6, "psql", "active", 0)
	gone.seen = t0.Add(-10 * time.Second) // kept for the grace period only
	at := newActionTest(t, actionSession(5, "psql", "active", 0), gone)
	for _, id := range []int64{99, 6} {
		_, err := at.svc.TerminateSession(authorized(t), &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(id)})
		assertCode(t, err, codes.NotFound, fmt.Sprintf("sess_id %d", id))
		_, err = at.svc.TerminateQuery(authorized(t), &yagpcc.TerminateQueryRequest{QueryKey: queryKey(id, 0)})
		assertCode(t, err, codes.NotFound, fmt.Sprintf("sess_id %d", id))
	}
	_, err := at.svc.TerminateSession(authorized(t), &yagpcc.TerminateSessionRequest{})
	assertCode(t, err, codes.InvalidArgument, "session_key")
	at.assertNothingSent(t)
}

func TestActionsRefuseSystemProcesses(t *testing.T) {
	sys := actionSession(5, "", "active", 0)
	sys.system = true
	at := newActionTest(t, sys)
	_, err := at.svc.TerminateSession(authorized(t), &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(5)})
	assertCode(t, err, codes.FailedPrecondition, "system process")
	_, err = at.svc.TerminateQuery(authorized(t), &yagpcc.TerminateQueryRequest{QueryKey: queryKey(5, 0)})
	assertCode(t, err, codes.FailedPrecondition, "system process")
	at.assertNothingSent(t)
}

// The receiver's monitoring session and the action connection's own are
// the collector's: it never acts on them, whoever asks.
func TestActionsRefuseTheCollectorsOwnSessions(t *testing.T) {
	at := newActionTest(t, actionSession(5, gpsql.ApplicationName, "active", 0), actionSession(6, gpsql.ActionsApplicationName, "active", 0))
	for _, id := range []int64{5, 6} {
		_, err := at.svc.TerminateSession(authorized(t), &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(id)})
		assertCode(t, err, codes.FailedPrecondition, "the collector's own")
		_, err = at.svc.TerminateQuery(authorized(t), &yagpcc.TerminateQueryRequest{QueryKey: queryKey(id, 0)})
		assertCode(t, err, codes.FailedPrecondition, "the collector's own")
	}
	at.assertNothingSent(t)

	// Whatever its application_name, the action connection's own backend.
	at = newActionTest(t, actionSession(7, "psql", "active", 0))
	at.db.err = errOwnSession
	_, err := at.svc.TerminateSession(authorized(t), &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(7)})
	assertCode(t, err, codes.FailedPrecondition, "the collector's own")
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
		{"another start", &yagpcc.QueryKey{Tmid: testTmID, Ssid: 5, QueryStart: timestamppb.New(queryStarted.Add(time.Second))}, "started at"},
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
		{Tmid: testTmID, Ssid: 5, QueryStart: timestamppb.New(queryStarted)},
	} {
		resp, err := at.svc.TerminateQuery(authorized(t), &yagpcc.TerminateQueryRequest{QueryKey: key})
		if err != nil || resp.GetStatusCode() != yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_SUCCESS {
			t.Errorf("%v: %v %v, want SUCCESS", key, resp, err)
		}
	}
	// Each asks the server to cancel only the query that started when the snapshot says.
	want := "cancel 1005 started " + queryStarted.Format(time.TimeOnly)
	if got := strings.Join(at.db.calls, ","); got != strings.Join([]string{want, want, want}, ",") {
		t.Errorf("sent %q, want three cancels of pid 1005's query started %s", got, queryStarted.Format(time.TimeOnly))
	}
}

// A backend the server no longer has, or a server error, is the answer's
// ERROR, with the server's reason.
func TestTerminateSessionSaysWhatTheServerAnswered(t *testing.T) {
	at := newActionTest(t, actionSession(5, "psql", "idle", 0))
	at.db.done = false
	resp, err := at.svc.TerminateSession(authorized(t), &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(5)})
	if err != nil || resp.GetStatusCode() != yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_ERROR ||
		!strings.Contains(resp.GetStatusText(), "no backend pid 1005") {
		t.Errorf("server found no backend: %v %v", resp, err)
	}
	at.db.err = fmt.Errorf("connect as gpotel_actions: refused")
	resp, err = at.svc.TerminateSession(authorized(t), &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(5)})
	if err != nil || resp.GetStatusCode() != yagpcc.TerminateResponseStatusCode_TERMINATE_RESPONSE_STATUS_CODE_ERROR ||
		!strings.Contains(resp.GetStatusText(), "connect as gpotel_actions: refused") {
		t.Errorf("server unreachable: %v %v", resp, err)
	}
}

func TestTerminateSessionsAnswersForEachMatchingSession(t *testing.T) {
	bob := actionSession(7, "psql", "idle", 0)
	bob.state.SessionInfo.User = "bob"
	at := newActionTest(t, actionSession(5, "psql", "active", 0), actionSession(6, gpsql.ApplicationName, "idle", 0), bob)
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
	if strings.Join(at.db.calls, ",") != "terminate 1005" {
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
	assertCode(t, err, codes.InvalidArgument, "database or username")
	_, err = at.svc.TerminateSessions(authorized(t), &yagpcc.TerminateSessionsRequest{Username: "alice", QueryId: 12})
	assertCode(t, err, codes.InvalidArgument, "query_id")

	many := newActionTest(t, actionSession(1, "psql", "idle", 0), actionSession(2, "psql", "idle", 0),
		actionSession(3, "psql", "idle", 0), actionSession(4, "psql", "idle", 0))
	_, err = many.svc.TerminateSessions(authorized(t), &yagpcc.TerminateSessionsRequest{Username: "alice"})
	assertCode(t, err, codes.FailedPrecondition, "4 sessions match, more than actions::max_sessions_per_call 3")
	many.assertNothingSent(t)
}

func TestMoveQueryToResourceGroup(t *testing.T) {
	at := newActionTest(t, actionSession(5, "psql", "active", 3))
	if _, err := at.svc.MoveQueryToResourceGroup(authorized(t), &yagpcc.MoveQueryToResourceGroupRequest{QueryKey: queryKey(5, 3), ResourceGroupName: "etl"}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(at.db.calls, ",") != "move 5 etl" {
		t.Errorf("sent %v, want session 5 moved to etl", at.db.calls)
	}
	_, err := at.svc.MoveQueryToResourceGroup(authorized(t), &yagpcc.MoveQueryToResourceGroupRequest{QueryKey: queryKey(5, 2), ResourceGroupName: "etl"})
	assertCode(t, err, codes.FailedPrecondition, "ccnt 3, not 2")
	_, err = at.svc.MoveQueryToResourceGroup(authorized(t), &yagpcc.MoveQueryToResourceGroupRequest{QueryKey: queryKey(5, 3)})
	assertCode(t, err, codes.InvalidArgument, "resource_group_name")
	for _, name := range []string{strings.Repeat("g", 64), "etl\x00"} {
		_, err = at.svc.MoveQueryToResourceGroup(authorized(t), &yagpcc.MoveQueryToResourceGroupRequest{QueryKey: queryKey(5, 3), ResourceGroupName: name})
		assertCode(t, err, codes.InvalidArgument, "resource_group_name")
	}

	at.db.err = fmt.Errorf("%w (dialect postgresql)", errNoResourceGroups)
	_, err = at.svc.MoveQueryToResourceGroup(authorized(t), &yagpcc.MoveQueryToResourceGroupRequest{QueryKey: queryKey(5, 3), ResourceGroupName: "etl"})
	assertCode(t, err, codes.FailedPrecondition, "no resource groups (dialect postgresql)")
}

// Every action is logged with who asked, what, on which session and the
// result, and counted by action and result.
func TestEveryActionIsLoggedAndCounted(t *testing.T) {
	at := newActionTest(t, actionSession(5, "psql", "active", 3), actionSession(6, gpsql.ApplicationName, "idle", 0))
	_, _ = at.svc.TerminateQuery(authorized(t), &yagpcc.TerminateQueryRequest{QueryKey: queryKey(5, 3)})
	_, _ = at.svc.TerminateSession(authorized(t), &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(6)})
	_, _ = at.svc.TerminateSession(ctxTimeout(t), &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(5)})

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

func TestActionTokenFileIsRead(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"token": testActionToken + "\n", "empty": "\n", "huge": strings.Repeat("x", maxSecretBytes+1)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	g, err := newActionGuard(ActionsConfig{TokenFile: filepath.Join(dir, "token")})
	if err != nil || string(g.token) != testActionToken {
		t.Errorf("token file: %q, %v", g.token, err)
	}
	for _, bad := range []string{"empty", "huge", "absent"} {
		if _, err := newActionGuard(ActionsConfig{TokenFile: filepath.Join(dir, bad)}); err == nil || !strings.Contains(err.Error(), "actions::token_file") {
			t.Errorf("%s token file: %v", bad, err)
		}
	}
}

// Under mutual TLS, a client certificate named in allowed_clients may act;
// another the same CA signed may read, not act.
func TestActionsAdmitTheAllowedClientCertificates(t *testing.T) {
	ca := newTestAuthority(t)
	serverCert, serverKey := ca.issue("127.0.0.1", x509.ExtKeyUsageServerAuth)
	cfg := testConfig()
	tlsCfg := configtls.NewDefaultServerConfig()
	tlsCfg.CertFile, tlsCfg.KeyFile, tlsCfg.ClientCAFile = serverCert, serverKey, ca.file
	cfg.TLS = configoptional.Some(tlsCfg)
	cfg.Actions.Enabled = true
	cfg.Actions.Host, cfg.Actions.Database, cfg.Actions.User = "127.0.0.1", "postgres", testActionRole
	cfg.Actions.AllowedClients = []string{"ops"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, cfg, nopHost())
	clientAs := func(cn string) *grpc.ClientConn {
		certFile, keyFile := ca.issue(cn, x509.ExtKeyUsageClientAuth)
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		return dial(t, srv.addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			RootCAs: ca.roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})))
	}
	unknown := &yagpcc.TerminateSessionRequest{SessionKey: sessionKey(99)}

	viewer := clientAs("viewer")
	if _, err := yagpcc.NewGetGPInfoClient(viewer).GetGPSessions(ctxTimeout(t), &yagpcc.GetGPSessionsReq{}); err != nil {
		t.Fatalf("viewer cannot read: %v", err)
	}
	_, err := yagpcc.NewActionServiceClient(viewer).TerminateSession(ctxTimeout(t), unknown)
	assertCode(t, err, codes.PermissionDenied, "actions::allowed_clients")

	// Past the guard: the session is unknown.
	_, err = yagpcc.NewActionServiceClient(clientAs("ops")).TerminateSession(ctxTimeout(t), unknown)
	assertCode(t, err, codes.NotFound, "sess_id 99")
}

// Off by default: the server does not even offer ActionService.
func TestActionServiceIsNotServedByDefault(t *testing.T) {
	srv := startDefault(t)
	srv.consume(t, buildSnapshot(t0, []testSession{fullSession()}))
	_, err := yagpcc.NewActionServiceClient(srv.conn).TerminateSession(
		grpcmetadata.AppendToOutgoingContext(ctxTimeout(t), clientname.ActionTokenHeader, testActionToken),
		&yagpcc.TerminateSessionRequest{SessionKey: sessionKey(42)})
	assertCode(t, err, codes.Unimplemented, "yagpcc.ActionService")
}
