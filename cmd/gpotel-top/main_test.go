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
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gpotel/gpotel/proto/yagpcc"
)

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
	// unmeasuredWaits: the hosts measure no waits (no schedstat,
	// kernel.task_delayacct off): the API leaves them absent.
	unmeasuredWaits bool
}

// state is one live session of the newest snapshot.
func state(f sessionFigures) *yagpcc.SessionState {
	var avgs []*yagpcc.ProcAvg
	if f.avgCPU > 0 {
		avgs = []*yagpcc.ProcAvg{{TimeConstantSeconds: 60, CpuCores: f.avgCPU}, {TimeConstantSeconds: 300, CpuCores: f.avgCPU / 2}}
	}
	st := seenAt(&yagpcc.SessionState{
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
			RunDelaySeconds:   proto.Float64(f.runDelay),
			BlkioDelaySeconds: proto.Float64(f.blkio), SwapinDelaySeconds: proto.Float64(f.swapin), FreepagesDelaySeconds: proto.Float64(f.reclaim),
			Partial: f.partial,
			CpuSkew: f.skew, CpuHottestSegment: f.hottest,
		}, Spill: &yagpcc.SpillInfo{TotalBytes: f.spill}},
	}, snapshotTime)
	if f.unmeasuredWaits {
		last := st.LastMetrics.SystemStat
		last.RunDelaySeconds, last.BlkioDelaySeconds, last.SwapinDelaySeconds, last.FreepagesDelaySeconds = nil, nil, nil, nil
		st.TotalMetrics = &yagpcc.GPMetrics{SystemStat: &yagpcc.SystemStat{UserTimeSeconds: f.userCPU}}
	}
	return st
}

// threeSessions: each the largest in a different column.
func threeSessions() *fakeAPI {
	return &fakeAPI{sessions: []*yagpcc.SessionState{
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

// listRows are the lines after the column titles of a --once output.
func listRows(t *testing.T, out, title string) (header string, rows []string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), title+" ") {
			return l, lines[i+1:]
		}
	}
	t.Fatalf("no %s column in:\n%s", title, out)
	return "", nil
}

func sessOf(line string) string { return strings.Fields(line)[0] }

// The window's figures each in their one unit: CPU and waits in percent of
// a core, bytes with their letter, rates per second; the query on one line.
func TestOnceShowsWindowFiguresInOneUnitEach(t *testing.T) {
	out := runOnce(t, "--addr", serveAPI(t, threeSessions()), "--width", "250")
	header, rows := listRows(t, out, "SESS")
	if len(rows) != 3 {
		t.Fatalf("want 3 rows:\n%s", out)
	}
	for who, want := range map[string]map[string]string{
		// (15+5) s of CPU over 10 s: 200 % of a core; 10 MiB written in 10 s.
		"alice": {"CPU%": "200", "AVG%": "150", "RD/s": "0B", "WR/s": "1.0M", "RUNQ%": "5.0", "PRIV": "8.0M", "RSS": "64M", "SPILL": "0B", "VMEM": "-",
			"IOW%": "0.0", "SKEW": "-"},
		// Waited 1.25 s for block I/O and 0.75 s for memory in 10 s; 75 %
		// skewed onto segment 2; holds 96 MiB of workfiles.
		"bob": {"CPU%": "50.0", "RD/s": "10M", "WR/s": "5.0M", "IOW%": "12.5", "MEMW%": "7.5", "SKEW": "75%@2", "SPILL": "96M", "PRIV": "512M"},
		// A host did not answer: *.
		"carol": {"CPU%": "1.0*", "RUNQ%": "30.0"},
	} {
		row := lineWith(out, who)
		for title, figure := range want {
			if got := cellUnder(header, row, title); got != figure {
				t.Errorf("%s's %s = %q, want %q\n%s\n%s", who, title, got, figure, header, row)
			}
		}
	}
	if !strings.Contains(lineWith(out, "bob"), " <11 ") {
		t.Errorf("bob waits for alice's lock: %q", lineWith(out, "bob"))
	}
	if !strings.Contains(out, "select burn_cpu(30) from gp_dist_random('gp_id')") {
		t.Errorf("the query is not on one line:\n%s", out)
	}
	if !strings.Contains(out, "sessions 3 (2 active)") || !strings.Contains(out, "window 10s") {
		t.Errorf("the title lacks the counts:\n%s", out)
	}
}

func TestEachSortKeyPutsItsLargestSessionFirst(t *testing.T) {
	addr := serveAPI(t, threeSessions())
	for sortName, wantFirst := range map[string]string{
		"cpu": "11", "memory": "12", "read": "12", "write": "12", "delay": "13", "skew": "12", "avg": "11", "spill": "12",
	} {
		_, rows := listRows(t, runOnce(t, "--addr", addr, "--sort", sortName), "SESS")
		if got := sessOf(rows[0]); got != wantFirst {
			t.Errorf("--sort %s: first session %s, want %s", sortName, got, wantFirst)
		}
	}
}

func TestSortKeyAsksServerForMatchingField(t *testing.T) {
	f := threeSessions()
	runOnce(t, "--addr", serveAPI(t, f), "--sort", "w")
	f.mu.Lock()
	defer f.mu.Unlock()
	got := f.sessionReqs[len(f.sessionReqs)-1].GetField()
	if len(got) != 1 || got[0].GetFieldName() != yagpcc.SessionField_LAST_WRITE_BYTES || got[0].GetOrder() != yagpcc.SortOrder_SORT_DESC {
		t.Errorf("server sort fields = %v", got)
	}
}

func TestKeysMapToSortOrders(t *testing.T) {
	for key, want := range map[string]SortKey{"c": SortCPU, "m": SortMemory, "r": SortRead, "w": SortWrite, "d": SortRunDelay, "s": SortSkew,
		"a": SortSmoothed, "p": SortSpill} {
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

// Figures of a window that spans no time are absent, not infinite.
func TestZeroWindowShowsADash(t *testing.T) {
	out := runOnce(t, "--addr", serveAPI(t, &fakeAPI{sessions: []*yagpcc.SessionState{
		state(sessionFigures{sessID: 5, user: "u", db: "d", state: "active", userCPU: 1, readB: 10}),
	}}), "--width", "200")
	header, rows := listRows(t, out, "SESS")
	for _, title := range []string{"CPU%", "RD/s", "WR/s", "RUNQ%"} {
		if got := cellUnder(header, rows[0], title); got != "-" {
			t.Errorf("%s without a window span: %q", title, got)
		}
	}
}

func TestWidthCutsLines(t *testing.T) {
	out := runOnce(t, "--addr", serveAPI(t, threeSessions()), "--width", "40")
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if len([]rune(l)) > 40 {
			t.Errorf("line longer than 40: %q", l)
		}
	}
}

func TestBearerTokenIsSent(t *testing.T) {
	f := threeSessions()
	f.token = "s3cret"
	addr := serveAPI(t, f)
	if err := run(context.Background(), []string{"--once", "--addr", addr}, &bytes.Buffer{}); status.Code(err) != codes.Unauthenticated {
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
	addr := serveAPI(t, threeSessions())
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
		{"--once", "--addr", "10.0.0.5:1432", "--action-token-file", file},
	} {
		err := run(context.Background(), append(args, "--timeout", "1s"), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "--tls") {
			t.Errorf("%v: err = %v, want a refusal to send the token in plaintext", args, err)
		}
	}
	for _, env := range []string{tokenEnv, actionTokenEnv} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "s3cret")
			err := run(context.Background(), []string{"--once", "--addr", "10.0.0.5:1432", "--timeout", "1s"}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), "--tls") {
				t.Errorf("token from %s: err = %v, want a refusal to send it in plaintext", env, err)
			}
		})
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

// A collector that is not there is said in a sentence, not in gRPC's words.
func TestUnreachableServerIsASentence(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), []string{"--once", "--addr", addr, "--timeout", "2s"}, &bytes.Buffer{})
	if err == nil || !strings.HasPrefix(err.Error(), "cannot reach the collector at "+addr+" (connection refused)") ||
		strings.Contains(err.Error(), "rpc error") || strings.Contains(err.Error(), "desc =") {
		t.Fatalf("err = %v", err)
	}
	if status.Code(err) != codes.Unavailable {
		t.Errorf("the sentence must keep the status for code that decides by it: %v", status.Code(err))
	}
}

func TestBadFlagsAreRejected(t *testing.T) {
	for _, args := range [][]string{
		{"--once", "--sort", "size"},
		{"--once", "--tls-cert", "c.pem"},
		{"--once", "--interval", "0s"},
		{"--once", "--view", "tables"},
		{"--view", "queries"},
		{"--memory", "12"},
		{"--no-such-flag"},
		{"extra"},
	} {
		if err := run(context.Background(), args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// --help succeeds, as every CLI's does, and lists the flags and the keys.
func TestHelpListsTheKeysAndSucceeds(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		var out bytes.Buffer
		if err := run(context.Background(), []string{arg}, &out); err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		for _, want := range []string{"usage: gpotel-top", "-addr", "-once", "KEYS", "\n  K ", "\n  k ", "\n  esc ", "never quits", "COLUMNS", "CPU%"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s lacks %q:\n%s", arg, want, out.String())
			}
		}
	}
}

func TestVersionNamesTheBuild(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "gpotel-top ") || !strings.Contains(out.String(), "go1.") {
		t.Errorf("--version printed %q", out.String())
	}
}

// A sort key re-sorts the screen at once and asks the server again.
func TestKeyPressResortsTheScreen(t *testing.T) {
	h := newTUI(t, threeSessions(), 120, 20)
	h.press("d")
	if !strings.Contains(h.lines()[0], "sort delay") {
		t.Errorf("the title does not name the sort: %q", h.lines()[0])
	}
	_, rows := listRows(t, h.screen(), "SESS")
	if got := sessOf(rows[0]); got != "13" {
		t.Errorf("after 'd' the first session is %s, want 13\n%s", got, h.screen())
	}
	h.press("q")
	if !h.quit {
		t.Error("q must quit")
	}
}

// Esc never quits: not on the list, not on a page, not in a prompt.
func TestEscNeverQuits(t *testing.T) {
	h := newTUI(t, threeSessions(), 120, 30)
	for _, keys := range [][]string{{"esc"}, {"down", "enter", "esc", "esc"}, {"K", "esc"}, {"u", "esc"}, {"?", "esc", "esc"}} {
		h.press(keys...)
		if h.quit {
			t.Fatalf("%v quit", keys)
		}
	}
	if !strings.Contains(h.screen(), "SESS") {
		t.Errorf("not back on the list:\n%s", h.screen())
	}
}
