// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/statustest"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// fakeAgent answers GetMemoryContexts for any pid with contexts distinct
// contexts, and counts the calls.
type fakeAgent struct {
	gpotelv1.UnimplementedMemoryContextsServer
	contexts int
	calls    atomic.Int64
}

func (a *fakeAgent) GetMemoryContexts(_ context.Context, req *gpotelv1.GetMemoryContextsRequest) (*gpotelv1.GetMemoryContextsResponse, error) {
	a.calls.Add(1)
	resp := &gpotelv1.GetMemoryContextsResponse{Pid: req.GetPid(), Source: "stderr",
		GrandTotal: &gpotelv1.MemoryContext{Name: "Grand total", TotalBytes: 8192 * int64(a.contexts)}}
	for i := range a.contexts {
		resp.Contexts = append(resp.Contexts, &gpotelv1.MemoryContext{
			Name: fmt.Sprintf("context-%d-%d", req.GetPid(), i), Level: 2, TotalBytes: 8192, UsedBytes: 4096})
	}
	return resp, nil
}

// startAgent serves a on loopback with the server options (TLS).
func startAgent(t *testing.T, a *fakeAgent, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	gpotelv1.RegisterMemoryContextsServer(srv, a)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// sessionWithBackends is session 7 with n backends on sdw1, pids 1001...
func sessionWithBackends(n int) testSession {
	var refs []string
	for i := range n {
		refs = append(refs, pipeline.BackendRef{Host: "sdw1", SegmentID: int64(i % 8), PID: int64(1001 + i)}.String())
	}
	return testSession{sessID: 7, tmID: testTmID, meta: map[string]any{pipeline.MetaState: "active", pipeline.MetaBackends: refs}}
}

func memoryContextsOf(t *testing.T, srv *testServer) *gpotelv1.GetSessionMemoryContextsResponse {
	t.Helper()
	resp, err := gpotelv1.NewSessionMemoryContextsClient(srv.conn).GetSessionMemoryContexts(ctxTimeout(t),
		&gpotelv1.GetSessionMemoryContextsRequest{SessionKey: &gpotelv1.SessionKey{SessId: 7, TmId: testTmID}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestSessionMemoryContextsAreBoundedInBackendsAndBytes(t *testing.T) {
	agent := &fakeAgent{contexts: 200}
	cfg := testConfig()
	cfg.MaxResponseBytes = 64 << 10
	cfg.MemoryContexts.MaxBackends = 20
	cfg.MemoryContexts.Agents = map[string]string{"sdw1": startAgent(t, agent)}
	srv := startServer(t, cfg, nopHost())
	srv.consume(t, buildSnapshot(t0, []testSession{sessionWithBackends(50)}))

	resp := memoryContextsOf(t, srv)
	if n := agent.calls.Load(); n != 20 {
		t.Errorf("%d backends asked, want max_backends 20", n)
	}
	if size := proto.Size(resp); size > cfg.MaxResponseBytes {
		t.Errorf("answer of %d bytes, over max_response_bytes %d", size, cfg.MaxResponseBytes)
	}
	if !resp.GetPartial() {
		t.Error("an answer cut by the bounds is not marked partial")
	}
	if n := len(resp.GetBackends()); n != 21 {
		t.Fatalf("%d backend entries, want the 20 asked and one naming the rest", n)
	}
	if rest := resp.GetBackends()[20]; !strings.Contains(rest.GetError(), "30 more backends") || !strings.Contains(rest.GetError(), "max_backends 20") {
		t.Errorf("the last entry %q does not say how many backends were not asked and why", rest.GetError())
	}
	answered, cut := 0, 0
	for _, b := range resp.GetBackends()[:20] {
		switch {
		case b.GetError() == "" && len(b.GetContexts()) == 200:
			answered++
		case strings.Contains(b.GetError(), "max_response_bytes"):
			cut++
		default:
			t.Errorf("backend %d: %d contexts, error %q", b.GetPid(), len(b.GetContexts()), b.GetError())
		}
	}
	if answered == 0 || cut == 0 {
		t.Errorf("%d backends answered whole and %d cut by max_response_bytes: want some of each", answered, cut)
	}
}

func TestMemoryContextsClientUsesTLSForTheSystemCAPool(t *testing.T) {
	certFile, keyFile, _ := testCA(t)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	addr := startAgent(t, &fakeAgent{contexts: 1},
		grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})))
	cfg := testConfig()
	cfg.MemoryContexts.Agents = map[string]string{"sdw1": addr}
	cfg.MemoryContexts.Agent.TLS.IncludeSystemCACertsPool = true
	srv := startServer(t, cfg, nopHost())
	srv.consume(t, buildSnapshot(t0, []testSession{sessionWithBackends(1)}))
	// The test CA is in no system pool: a TLS client must refuse the
	// agent's certificate, where a plaintext one fails otherwise.
	if got := memoryContextsOf(t, srv).GetBackends()[0].GetError(); !strings.Contains(got, "certificate") {
		t.Fatalf("backend error %q: the client did not speak TLS to the agent", got)
	}
}

// Every caller's requests that would signal backends take a token from its
// own bucket: caller_max_burst at once, then caller_max_rate a second. A
// refused request asks no agent.
func TestMemoryContextRequestsAreRateLimited(t *testing.T) {
	agent := &fakeAgent{contexts: 1}
	cfg := testConfig()
	cfg.MemoryContexts.Agents = map[string]string{"sdw1": startAgent(t, agent)}
	srv := startServer(t, cfg, nopHost())
	srv.consume(t, buildSnapshot(t0, []testSession{sessionWithBackends(2)}))
	for range defaultCallerMaxBurst {
		memoryContextsOf(t, srv)
	}
	_, err := gpotelv1.NewSessionMemoryContextsClient(srv.conn).GetSessionMemoryContexts(ctxTimeout(t),
		&gpotelv1.GetSessionMemoryContextsRequest{SessionKey: &gpotelv1.SessionKey{SessId: 7, TmId: testTmID}})
	statustest.AssertCode(t, err, codes.ResourceExhausted, "address 127.0.0.1: at most 5 memory-context requests at once and then one every 1m0s")
	if n := agent.calls.Load(); n != 2*defaultCallerMaxBurst {
		t.Errorf("%d backends asked, want 2 for each of the %d admitted requests", n, defaultCallerMaxBurst)
	}

}
