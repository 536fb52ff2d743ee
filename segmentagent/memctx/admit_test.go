// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memctx

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/segmentagent/procfixture"
)

// fixtureService serves one fake instance whose postmaster (pid 900, as
// procfixture writes every parent) has the backend pids in a fixture procfs.
func fixtureService(t *testing.T, pids ...int) *Service {
	t.Helper()
	root := t.TempDir()
	if err := procfixture.Write(filepath.Join(root, "proc"), pids, os.Getuid()); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(root, "data")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// No server listens on this socket directory: a request that passes admission fails to connect.
	pidFile := fmt.Sprintf("900\n%s\n1795246391\n5432\n%s\n127.0.0.1\n", dataDir, filepath.Join(root, "no-socket"))
	if err := os.WriteFile(filepath.Join(dataDir, "postmaster.pid"), []byte(pidFile), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := NewDefaultConfig()
	cfg.DataDirectories = []string{dataDir}
	cfg.DatabaseUser = "gpadmin"
	s, err := NewService(cfg, filepath.Join(root, "proc"), "sdw1", func(int64) bool { return true }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSprayedPidsDoNotCrowdOutRealRequests: 10⁵ requests for pids that are
// no backend are refused without the agent remembering them, and a real
// backend is still admitted, once per min_interval.
func TestSprayedPidsDoNotCrowdOutRealRequests(t *testing.T) {
	const backend = 4242
	s := fixtureService(t, backend)
	ctx := context.Background()
	for pid := int64(100_000); pid < 200_000; pid++ {
		_, err := s.GetMemoryContexts(ctx, &gpotelv1.GetMemoryContextsRequest{Pid: pid})
		if status.Code(err) != codes.NotFound {
			t.Fatalf("pid %d: %v, want NotFound", pid, err)
		}
	}
	if n := s.limit.tracked(); n != 0 {
		t.Fatalf("after 10⁵ pids that are no backend the agent tracks %d pids", n)
	}
	_, err := s.GetMemoryContexts(ctx, &gpotelv1.GetMemoryContextsRequest{Pid: backend})
	if code := status.Code(err); code != codes.Unavailable {
		t.Fatalf("the real backend: %v, want admitted (then Unavailable: no server listens)", err)
	}
	_, err = s.GetMemoryContexts(ctx, &gpotelv1.GetMemoryContextsRequest{Pid: backend})
	if code := status.Code(err); code != codes.ResourceExhausted {
		t.Fatalf("the real backend again within min_interval: %v, want ResourceExhausted", err)
	}
	if n := s.limit.tracked(); n != 1 {
		t.Fatalf("tracking %d pids, want the one real backend", n)
	}
}

// TestAdmissionsExpireAfterMinInterval: the limiter remembers a pid for
// min_interval and no longer, however many pids pass.
func TestAdmissionsExpireAfterMinInterval(t *testing.T) {
	l := newPIDLimiter(10 * time.Second)
	start := time.Now()
	for i := range 100_000 {
		now := start.Add(time.Duration(i) * time.Millisecond)
		if err := l.admit(int64(i+1), now); err != nil {
			t.Fatalf("pid %d: %v", i+1, err)
		}
		l.release(int64(i + 1))
		if n := l.tracked(); n > 10_001 {
			t.Fatalf("after %d admissions %d pids tracked, more than 10 s of them", i+1, n)
		}
	}
	if err := l.admit(100_000, start.Add(100*time.Second)); err == nil {
		t.Fatal("the last pid again within min_interval was admitted")
	}
	if err := l.admit(1, start.Add(100*time.Second)); err != nil {
		t.Fatalf("the first pid long after: %v", err)
	}
}

// TestMemoryContextRequestsAreRateLimited: every request that would signal a
// backend (and so write a block into the server log) takes a token from
// the host's bucket, whoever asks and for whichever backend: max_burst at
// once, then max_rate a second. A refusal signals nothing.
func TestMemoryContextRequestsAreRateLimited(t *testing.T) {
	backends := make([]int, DefaultMaxBurst+2)
	for i := range backends {
		backends[i] = 5000 + i
	}
	s := fixtureService(t, backends...)
	now := time.Now()
	s.now = func() time.Time { return now }
	ask := func(pid int) error {
		_, err := s.GetMemoryContexts(context.Background(), &gpotelv1.GetMemoryContextsRequest{Pid: int64(pid)})
		return err
	}
	for _, pid := range backends[:DefaultMaxBurst] {
		if err := ask(pid); status.Code(err) != codes.Unavailable {
			t.Fatalf("pid %d within the burst: %v, want admitted (then Unavailable: no server listens)", pid, err)
		}
	}
	err := ask(backends[DefaultMaxBurst])
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "at most 32 memory-context requests at once and then one every 10s") ||
		!strings.Contains(err.Error(), "try again in 10s") {
		t.Fatalf("a backend past the burst: %v, want ResourceExhausted naming the bucket", err)
	}
	if n := s.limit.tracked(); n != DefaultMaxBurst {
		t.Errorf("the refused request left the pid limiter tracking %d pids, want the %d admitted", n, DefaultMaxBurst)
	}

	// One token comes back every 10 s, and goes to one request.
	now = now.Add(10 * time.Second)
	if err := ask(backends[DefaultMaxBurst]); status.Code(err) != codes.Unavailable {
		t.Fatalf("10 s later: %v, want admitted", err)
	}
	if err := ask(backends[DefaultMaxBurst+1]); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a second request on the same token: %v, want ResourceExhausted", err)
	}
}
