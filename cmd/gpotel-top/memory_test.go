// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"google.golang.org/grpc"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// fixedMemory answers GetSessionMemoryContexts with one fixed roll-up.
type fixedMemory struct {
	gpotelv1.UnimplementedSessionMemoryContextsServer
	asked []*gpotelv1.SessionKey
}

func (f *fixedMemory) GetSessionMemoryContexts(_ context.Context, req *gpotelv1.GetSessionMemoryContextsRequest) (*gpotelv1.GetSessionMemoryContextsResponse, error) {
	f.asked = append(f.asked, req.GetSessionKey())
	return &gpotelv1.GetSessionMemoryContextsResponse{
		SessionKey: req.GetSessionKey(),
		Partial:    true,
		Rollup: []*gpotelv1.ContextRollup{
			{Name: "Caller tuples", TotalBytes: 48 << 20, Backends: 3, TopBackends: []*gpotelv1.BackendShare{{Hostname: "sdw1", SegmentId: 0, Pid: 501, TotalBytes: 16 << 20}}},
			{Name: "CacheMemoryContext", TotalBytes: 3 << 20, Backends: 3},
		},
		Backends: []*gpotelv1.BackendMemoryContexts{
			{Hostname: "sdw1", SegmentId: 0, Pid: 501, Source: "stderr", GrandTotal: &gpotelv1.MemoryContext{TotalBytes: 20 << 20},
				Contexts: []*gpotelv1.MemoryContext{
					{Name: "TopMemoryContext", Level: 1, TotalBytes: 80 << 10},
					{Name: "TopPortalContext", Level: 2, TotalBytes: 8 << 10},
					{Name: "PortalContext", Ident: "gpotel_held", Level: 3, TotalBytes: 1 << 10},
					{Name: "more child contexts", Level: 3, AggregatedContexts: 4, TotalBytes: 4 << 10},
				}},
			{Hostname: "sdw2", SegmentId: 1, Pid: 601, Error: "Unavailable: connection refused"},
		},
	}, nil
}

func serveWithMemory(t *testing.T, f *fixedSessions, mem *fixedMemory) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	yagpcc.RegisterGetGPInfoServer(srv, f)
	gpotelv1.RegisterSessionMemoryContextsServer(srv, mem)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func TestMemoryOnceShowsTheRollupLargestFirstWithBars(t *testing.T) {
	mem := &fixedMemory{}
	addr := serveWithMemory(t, threeSessions(), mem)
	out := runOnce(t, "--addr", addr, "--memory", "12")
	lines := strings.Split(out, "\n")
	if !strings.Contains(lines[0], "session 12") || !strings.Contains(lines[0], "partial") {
		t.Fatalf("title %q", lines[0])
	}
	if !strings.HasPrefix(lines[2], "Caller tuples") || !strings.Contains(lines[2], "48.0M") || strings.Count(lines[2], "█") != barWidth ||
		!strings.Contains(lines[2], "sdw1 seg0 pid 501") {
		t.Fatalf("first roll-up row %q", lines[2])
	}
	if !strings.HasPrefix(lines[3], "CacheMemoryContext") || strings.Count(lines[3], "█") >= barWidth/4 {
		t.Fatalf("second roll-up row %q: its bar must be short", lines[3])
	}
	if !strings.Contains(out, "[2] sdw2 seg1 pid 601  no answer: Unavailable") {
		t.Fatalf("the unanswered backend is not listed:\n%s", out)
	}
	if len(mem.asked) != 1 || mem.asked[0].GetSessId() != 12 {
		t.Fatalf("asked %v", mem.asked)
	}
}

func TestMemoryOnceDrillsIntoOneBackendsTree(t *testing.T) {
	addr := serveWithMemory(t, threeSessions(), &fixedMemory{})
	out := runOnce(t, "--addr", addr, "--memory", "12", "--backend", "1")
	for _, want := range []string{"sdw1 seg0 pid 501  grand total 20.0M  from stderr", "\nTopMemoryContext ", "\n  TopPortalContext ",
		"\n    PortalContext: gpotel_held ", "\n    (4 more child contexts) "} {
		if !strings.Contains(out, want) {
			t.Errorf("tree lacks %q:\n%s", want, out)
		}
	}
}

func TestKeyXOpensTheSelectedSessionsMemory(t *testing.T) {
	mem := &fixedMemory{}
	addr := serveWithMemory(t, threeSessions(), mem)
	c, err := dial(context.Background(), clientOptions{Addr: addr, CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	var m tea.Model = topModel{ctx: context.Background(), client: c, interval: time.Second, width: 120, height: 30}
	m, _ = m.Update(m.(topModel).fetch()())
	m, _ = m.Update(tea.KeyMsg{Type: tea.KeyDown})
	want := m.(topModel).rows[1].SessID
	m, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("x")})
	if cmd == nil {
		t.Fatal("x must ask for the memory contexts")
	}
	m, _ = m.Update(cmd())
	if len(mem.asked) != 1 || mem.asked[0].GetSessId() != want {
		t.Fatalf("asked %v, want the selected session %d", mem.asked, want)
	}
	if v := m.View(); !strings.Contains(v, "Caller tuples") || !strings.Contains(v, "memory contexts of session") {
		t.Fatalf("memory screen:\n%s", v)
	}
	m, _ = m.Update(tea.KeyMsg{Type: tea.KeyTab})
	if v := m.View(); !strings.Contains(v, "PortalContext: gpotel_held") {
		t.Fatalf("tab should show the first backend's tree:\n%s", v)
	}
	m, _ = m.Update(tea.KeyMsg{Type: tea.KeyEsc})
	m, _ = m.Update(tea.KeyMsg{Type: tea.KeyEsc})
	if v := m.View(); !strings.Contains(v, "SESS") {
		t.Fatalf("esc twice should return to the sessions:\n%s", v)
	}
}
