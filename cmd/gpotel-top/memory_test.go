// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// memoryAnswer is one session's roll-up over two backends, one of which did not answer.
func memoryAnswer() *gpotelv1.GetSessionMemoryContextsResponse {
	return &gpotelv1.GetSessionMemoryContextsResponse{
		Partial:         true,
		GrandTotalBytes: 20 << 20,
		Rollup: []*gpotelv1.ContextRollup{
			{Name: "Caller tuples", TotalBytes: 48 << 20, Backends: 3,
				TopBackends: []*gpotelv1.BackendShare{{Hostname: "sdw1", SegmentId: 0, Pid: 501, TotalBytes: 16 << 20}}},
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
	}
}

func TestMemoryOnceShowsTheRollupLargestFirstWithBars(t *testing.T) {
	f := threeSessions()
	f.memory = memoryAnswer()
	out := runOnce(t, "--addr", serveAPI(t, f), "--memory", "12")
	for _, want := range []string{"memory contexts of session 12", "1 of 2 backends answered: 20M in all (partial)",
		"why the others did not answer:", "1 backend: connection refused", "[2] sdw2 seg1 pid 601  no answer: connection refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	first, second := lineWith(out, "Caller tuples"), lineWith(out, "CacheMemoryContext")
	if !strings.Contains(first, "48M") || strings.Count(first, "█") != barWidth || !strings.Contains(first, "sdw1 seg0 pid 501") {
		t.Errorf("first roll-up row %q", first)
	}
	if strings.Count(second, "█") >= barWidth/4 {
		t.Errorf("second roll-up row %q: its bar must be short", second)
	}
	if len(f.memoryAsked) != 1 || f.memoryAsked[0].GetSessId() != 12 {
		t.Fatalf("asked %v", f.memoryAsked)
	}
}

func TestMemoryOnceDrillsIntoOneBackendsTree(t *testing.T) {
	f := threeSessions()
	f.memory = memoryAnswer()
	out := runOnce(t, "--addr", serveAPI(t, f), "--memory", "12", "--backend", "1")
	for _, want := range []string{"sdw1 seg0 pid 501  20M in all  from stderr", "\nTopMemoryContext ", "\n  TopPortalContext ",
		"\n    PortalContext: gpotel_held ", "\n    (4 more child contexts) "} {
		if !strings.Contains(out, want) {
			t.Errorf("tree lacks %q:\n%s", want, out)
		}
	}
}

func TestKeyXOpensTheSelectedSessionsMemory(t *testing.T) {
	f := threeSessions()
	f.memory = memoryAnswer()
	h := newTUI(t, f, 120, 30)
	h.press("down") // from the first row to the second by CPU: bob's, 12
	h.press("x")
	if len(f.memoryAsked) != 1 || f.memoryAsked[0].GetSessId() != 12 {
		t.Fatalf("asked %v, want the selected session 12", f.memoryAsked)
	}
	if !strings.Contains(h.screen(), "Caller tuples") || !strings.Contains(h.lines()[0], "memory contexts of session 12") {
		t.Fatalf("memory screen:\n%s", h.screen())
	}
	h.press("tab")
	if !strings.Contains(h.screen(), "PortalContext: gpotel_held") {
		t.Fatalf("tab should show the first backend's tree:\n%s", h.screen())
	}
	h.press("esc")
	if !strings.Contains(h.screen(), "Caller tuples") {
		t.Fatalf("esc from a tree goes back to the roll-up:\n%s", h.screen())
	}
	h.press("esc")
	if !strings.Contains(h.screen(), " SESS ") || h.quit {
		t.Fatalf("esc from the roll-up goes back to the list:\n%s", h.screen())
	}
}

// A server that cannot log memory contexts (Greenplum 6 has no
// pg_log_backend_memory_contexts) is told as its reason, whole, without a
// gRPC code and without a grand total of nothing.
func TestMemoryOfAServerWithoutTheFunctionSaysWhy(t *testing.T) {
	why := "the server cannot log a backend's memory contexts: PostgreSQL 9.4.26 (Greenplum Database 6.24.3) has no pg_log_backend_memory_contexts (it " +
		"came in PostgreSQL 14)"
	f := threeSessions()
	f.memory = &gpotelv1.GetSessionMemoryContextsResponse{Partial: true, Backends: []*gpotelv1.BackendMemoryContexts{
		{Hostname: "mdw", SegmentId: -1, Pid: 100, Error: "FailedPrecondition: " + why},
		{Hostname: "sdw1", SegmentId: 0, Pid: 200, Error: "FailedPrecondition: " + why},
	}}
	h := newTUI(t, f, 80, 24)
	h.press("down", "x")
	h.fits("memory of a gp6 session")
	screen := strings.Join(strings.Fields(h.screen()), " ")
	if !strings.Contains(screen, "none of its 2 backends answered") || !strings.Contains(screen, "2 backends: "+why) {
		t.Errorf("the reason is not said whole:\n%s", h.screen())
	}
	if strings.Contains(screen, "FailedPrecondition") || strings.Contains(screen, "grand total") || strings.Contains(screen, " 0B in all") {
		t.Errorf("a code or a total of nothing:\n%s", h.screen())
	}
}
