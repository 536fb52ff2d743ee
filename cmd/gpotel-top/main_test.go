// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gpotel/gpotel/proto/yagpcc"
)

// fixedSessions is an in-process GetGPInfo server answering with a fixed list.
type fixedSessions struct {
	yagpcc.UnimplementedGetGPInfoServer
	states []*yagpcc.SessionState
	token  string

	mu   sync.Mutex
	reqs []*yagpcc.GetGPSessionsReq
}

func (f *fixedSessions) GetGPSessions(ctx context.Context, req *yagpcc.GetGPSessionsReq) (*yagpcc.GetGPSessionsResponse, error) {
	if f.token != "" {
		md, _ := metadata.FromIncomingContext(ctx)
		if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer "+f.token {
			return nil, status.Error(codes.Unauthenticated, "bad token")
		}
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	return &yagpcc.GetGPSessionsResponse{SessionsState: f.states}, nil
}

func serve(t *testing.T, f *fixedSessions) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	yagpcc.RegisterGetGPInfoServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

type sessionFigures struct {
	sessID          int64
	user, db, state string
	query           string
	userCPU, sysCPU float64
	window          float64
	rssAnon, rss    uint64
	readB, writeB   uint64
	runDelay        float64
	blkio, swapin   float64
	reclaim         float64
	partial         bool
	avgCPU          float64 // smoothed cores; 0: no proc_avg
	spill           int64   // workfile bytes held now
	blockedBy       int64
	skew            float64
	hottest         *int32
}

func state(f sessionFigures) *yagpcc.SessionState {
	var avgs []*yagpcc.ProcAvg
	if f.avgCPU > 0 {
		avgs = []*yagpcc.ProcAvg{{TimeConstantSeconds: 60, CpuCores: f.avgCPU}, {TimeConstantSeconds: 300, CpuCores: f.avgCPU / 2}}
	}
	return &yagpcc.SessionState{
		ProcAvg:          avgs,
		SessionKey:       &yagpcc.SessionKey{SessId: f.sessID, TmId: 1700000000},
		SessionInfo:      &yagpcc.SessionInfo{User: f.user, Database: f.db, State: f.state, BlockedBySessId: f.blockedBy},
		RunningQueryInfo: &yagpcc.QueryInfo{QueryText: f.query},
		LastMetrics: &yagpcc.GPMetrics{SystemStat: &yagpcc.SystemStat{
			UserTimeSeconds:   f.userCPU,
			KernelTimeSeconds: f.sysCPU,
			WindowSeconds:     f.window,
			RssAnon:           f.rssAnon,
			Rss:               f.rss,
			ReadBytes:         f.readB,
			WriteBytes:        f.writeB,
			RunDelaySeconds:   f.runDelay,
			BlkioDelaySeconds: f.blkio, SwapinDelaySeconds: f.swapin, FreepagesDelaySeconds: f.reclaim,
			Partial: f.partial,
			CpuSkew: f.skew, CpuHottestSegment: f.hottest,
		}, Spill: &yagpcc.SpillInfo{TotalBytes: f.spill}},
	}
}

// Three sessions, each the largest in a different column.
func threeSessions() *fixedSessions {
	return &fixedSessions{states: []*yagpcc.SessionState{
		state(sessionFigures{sessID: 11, user: "alice", db: "sales", state: "active",
			query: "select burn_cpu(30)\nfrom gp_dist_random('gp_id')", userCPU: 15, sysCPU: 5, window: 10,
			rssAnon: 8 << 20, rss: 64 << 20, readB: 0, writeB: 10 << 20, runDelay: 0.5, avgCPU: 1.5}),
		state(sessionFigures{sessID: 12, user: "bob", db: "sales", state: "active",
			query: "insert into t select * from generate_series(1, 1e7)", userCPU: 2, sysCPU: 3, window: 10,
			rssAnon: 512 << 20, rss: 600 << 20, readB: 100 << 20, writeB: 50 << 20, runDelay: 0.1, blkio: 1.25, swapin: 0.5, reclaim: 0.25,
			skew: 0.75, hottest: proto.Int32(2), spill: 96 << 20, blockedBy: 11}),
		state(sessionFigures{sessID: 13, user: "carol", db: "hr", state: "idle",
			userCPU: 0.1, window: 10, rssAnon: 1 << 20, rss: 20 << 20, runDelay: 3, partial: true}),
	}}
}

func runOnce(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), append([]string{"--once"}, args...), &out); err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return out.String()
}

// tableRows returns the data lines of a --once output (after status and header).
func tableRows(t *testing.T, out string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) < 2 || !strings.HasPrefix(strings.TrimSpace(lines[1]), "SESS") {
		t.Fatalf("no table header in:\n%s", out)
	}
	return lines[2:]
}

func sessOf(line string) string { return strings.Fields(line)[0] }

func TestOnceShowsWindowFiguresAsPercentAndRates(t *testing.T) {
	addr := serve(t, threeSessions())
	out := runOnce(t, "--addr", addr)
	rows := tableRows(t, out)
	if len(rows) != 3 {
		t.Fatalf("want 3 rows, got %d:\n%s", len(rows), out)
	}
	// Session 11: (15+5) s over 10 s = 200 %, 10 MiB written in 10 s = 1.0M/s.
	// Its smoothed CPU at the shortest time constant is 1.50 cores.
	want := []string{"11", "alice", "sales", "active", "200.0", "1.50", "-", "8.0M", "64.0M", "0", "1.0M", "0.50s", "0", "-", "0.00s", "0.00s", "select", "burn_cpu(30)"}
	if got := strings.Fields(rows[0]); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("first row\n got %q\nwant %q", got, want)
	}
	// Session 12 waited 1.25 s for block I/O and 0.5 + 0.25 s for memory;
	// its CPU is 75 % skewed, segment 2 the hottest; it holds 96 MiB of
	// workfiles and waits for a lock session 11 holds.
	want = []string{"12", "bob", "sales", "active", "50.0", "-", "75%@2", "512.0M", "600.0M", "10.0M", "5.0M", "0.10s", "96.0M", "-", "<11", "1.25s", "0.75s", "insert"}
	if got := strings.Fields(rows[1]); strings.Join(got[:len(want)], " ") != strings.Join(want, " ") {
		t.Errorf("second row\n got %q\nwant %q", got, want)
	}
	if strings.Contains(out, "gp_dist_random") {
		t.Errorf("only the query's first line belongs in the table:\n%s", out)
	}
	if !strings.Contains(rows[2], " 1.0* ") || !strings.Contains(out, "partial 1") {
		t.Errorf("partial session not marked:\n%s", out)
	}
	if !strings.Contains(out, "sessions 3") || !strings.Contains(out, "window 10s") {
		t.Errorf("status line lacks counts:\n%s", out)
	}
}

func TestEachSortKeyPutsItsLargestSessionFirst(t *testing.T) {
	addr := serve(t, threeSessions())
	for sortName, wantFirst := range map[string]string{
		"cpu": "11", "memory": "12", "read": "12", "write": "12", "delay": "13", "skew": "12", "avg": "11",
	} {
		rows := tableRows(t, runOnce(t, "--addr", addr, "--sort", sortName))
		if got := sessOf(rows[0]); got != wantFirst {
			t.Errorf("--sort %s: first session %s, want %s", sortName, got, wantFirst)
		}
	}
}

func TestSortKeyAsksServerForMatchingField(t *testing.T) {
	f := threeSessions()
	addr := serve(t, f)
	runOnce(t, "--addr", addr, "--sort", "w")
	f.mu.Lock()
	defer f.mu.Unlock()
	got := f.reqs[len(f.reqs)-1].GetField()
	if len(got) != 1 || got[0].GetFieldName() != yagpcc.SessionField_LAST_WRITE_BYTES || got[0].GetOrder() != yagpcc.SortOrder_SORT_DESC {
		t.Errorf("server sort fields = %v", got)
	}
}

func TestKeysMapToSortOrders(t *testing.T) {
	for key, want := range map[string]SortKey{"c": SortCPU, "m": SortMemory, "r": SortRead, "w": SortWrite, "d": SortRunDelay, "s": SortSkew, "a": SortSmoothed} {
		if got, ok := sortKeyForKey(key); !ok || got != want {
			t.Errorf("key %q → %v, %v; want %v", key, got, ok, want)
		}
	}
	if _, ok := sortKeyForKey("x"); ok {
		t.Error("key x must not change the sort")
	}
	if _, err := parseSortKey("size"); err == nil {
		t.Error("unknown --sort accepted")
	}
}

func TestZeroWindowShowsDashNotInfinity(t *testing.T) {
	addr := serve(t, &fixedSessions{states: []*yagpcc.SessionState{
		state(sessionFigures{sessID: 5, user: "u", db: "d", state: "active", userCPU: 1, readB: 10}),
	}})
	row := strings.Fields(tableRows(t, runOnce(t, "--addr", addr))[0])
	if row[4] != "-" || row[9] != "-" || row[10] != "-" {
		t.Errorf("figures without a window span must print '-': %q", row)
	}
}

func TestWidthCutsLines(t *testing.T) {
	addr := serve(t, threeSessions())
	out := runOnce(t, "--addr", addr, "--width", "40")
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n")[1:] {
		if len(l) > 40 {
			t.Errorf("line longer than 40: %q", l)
		}
	}
}

func TestBearerTokenIsSent(t *testing.T) {
	f := threeSessions()
	f.token = "s3cret"
	addr := serve(t, f)
	if err := run(context.Background(), []string{"--once", "--addr", addr}, &bytes.Buffer{}); status.Code(unwrapStatus(err)) != codes.Unauthenticated {
		t.Fatalf("without a token: err = %v, want Unauthenticated", err)
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runOnce(t, "--addr", addr, "--token-file", file)
	t.Setenv(tokenEnv, "s3cret")
	runOnce(t, "--addr", addr)
}

func TestTokenIsNotTakenFromTheCommandLine(t *testing.T) {
	addr := serve(t, threeSessions())
	err := run(context.Background(), []string{"--once", "--addr", addr, "--token", "s3cret"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--token-file") || !strings.Contains(err.Error(), tokenEnv) {
		t.Fatalf("--token on the command line (seen by ps): err = %v, want a refusal naming --token-file and %s", err, tokenEnv)
	}
}

func TestTokenNeedsTLSBeyondLoopback(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--once", "--addr", "10.0.0.5:1432", "--token-file", file},
		{"--once", "--addr", "coord:1432", "--token-file", file},
	} {
		err := run(context.Background(), append(args, "--timeout", "1s"), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "--tls") {
			t.Errorf("%v: err = %v, want a refusal to send the token in plaintext", args, err)
		}
	}
	t.Setenv(tokenEnv, "s3cret")
	err := run(context.Background(), []string{"--once", "--addr", "10.0.0.5:1432", "--timeout", "1s"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--tls") {
		t.Errorf("token from %s: err = %v, want a refusal to send it in plaintext", tokenEnv, err)
	}
}

func TestOversizedTokenFileIsRefused(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, bytes.Repeat([]byte("x"), maxTokenBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"--once", "--addr", "127.0.0.1:1", "--token-file", file}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "token file") {
		t.Fatalf("a token file over %d bytes: err = %v", maxTokenBytes, err)
	}
}

func unwrapStatus(err error) error {
	for e := err; e != nil; {
		if _, ok := status.FromError(e); ok {
			return e
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	return err
}

func TestUnreachableServerFailsWithinTimeout(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), []string{"--once", "--addr", addr, "--timeout", "2s"}, &bytes.Buffer{})
	if err == nil {
		t.Fatal("want an error for a closed port")
	}
}

func TestBadFlagsAreRejected(t *testing.T) {
	for _, args := range [][]string{
		{"--once", "--sort", "size"},
		{"--once", "--tls-cert", "c.pem"},
		{"--once", "--interval", "0s"},
	} {
		if err := run(context.Background(), args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

func TestKeyPressResortsTheScreen(t *testing.T) {
	f := threeSessions()
	addr := serve(t, f)
	c, err := dial(context.Background(), clientOptions{Addr: addr, CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	var m tea.Model = topModel{ctx: context.Background(), client: c, interval: time.Second, width: 120, height: 20}
	m, _ = m.Update(m.(topModel).fetch()())
	m, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("d")})
	if cmd == nil {
		t.Fatal("a sort key must trigger a refetch")
	}
	m, _ = m.Update(cmd())
	view := m.View()
	lines := strings.Split(view, "\n")
	if !strings.Contains(lines[0], "sort delay") {
		t.Errorf("status line does not name the sort: %q", lines[0])
	}
	if got := sessOf(lines[firstRow(t, lines)]); got != "13" {
		t.Errorf("after 'd' the first session is %s, want 13\n%s", got, view)
	}
	if _, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")}); cmd == nil || cmd() != tea.Quit() {
		t.Error("q must quit")
	}
}

func TestQueryColumnHasNoControlCharacters(t *testing.T) {
	got := firstLine("\tSELECT a,\tb\x1b[2J FROM t\n  WHERE x")
	if got != "SELECT a, b [2J FROM t" {
		t.Fatalf("firstLine = %q: a tab or escape would reach the terminal", got)
	}
	table := formatTable([]SessionRow{{Query: firstLine("SELECT\t1\t2\t3\t4\t5\t6\t7\t8\t9")}}, 60)
	for _, line := range strings.Split(strings.TrimRight(table, "\n"), "\n") {
		if strings.ContainsRune(line, '\t') || len(line) > 60 {
			t.Fatalf("line %q is not cut to 60 plain columns", line)
		}
	}
}

// firstRow is the index of the first session line: the one after the table header.
func firstRow(t *testing.T, lines []string) int {
	t.Helper()
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "SESS ") {
			return i + 1
		}
	}
	t.Fatalf("no table header in:\n%s", strings.Join(lines, "\n"))
	return 0
}
