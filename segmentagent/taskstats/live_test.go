// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package taskstats

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"

	"github.com/gpotel/gpotel/internal/await"
)

// dialOrSkip opens a Client, or skips when this machine cannot answer
// taskstats (no CAP_NET_ADMIN, no TASKSTATS family).
func dialOrSkip(t testing.TB) *Client {
	t.Helper()
	c, err := Dial()
	if err != nil {
		t.Skipf("taskstats unavailable here: %v", err)
	}
	if _, err := c.Task(os.Getpid()); errors.Is(err, ErrPermission) {
		_ = c.Close()
		t.Skipf("taskstats refused: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestTaskOfAnotherUsersProcess(t *testing.T) {
	c := dialOrSkip(t)
	if os.Getuid() != 0 {
		t.Skip("starting a process as nobody needs root")
	}
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	s, err := c.Task(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if s.UID != 65534 || s.PPID != uint32(os.Getpid()) || s.Comm != "sleep" || s.BeginTime == 0 {
		t.Fatalf("record of a nobody sleep: %+v", s)
	}
}

func TestTaskOfThisTestBinary(t *testing.T) {
	c := dialOrSkip(t)
	s, err := c.Task(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.PID != uint32(os.Getpid()) || s.UID != uint32(os.Getuid()) {
		t.Fatalf("pid %d uid %d, want %d %d", s.PID, s.UID, os.Getpid(), os.Getuid())
	}
	if s.UserUs+s.SystemUs == 0 || s.CPURunVirtualNs == 0 || s.Comm == "" || s.ReadChars == 0 {
		t.Fatalf("no CPU time for a running test binary: %+v", s)
	}
	t.Logf("version %d comm %q utime %dus stime %dus run %dns", s.Version, s.Comm, s.UserUs, s.SystemUs, s.CPURunVirtualNs)
}

func TestProcessThatDoesNotExist(t *testing.T) {
	c := dialOrSkip(t)
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	_, err := c.Task(cmd.Process.Pid)
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reaped pid: got %v, want os.ErrNotExist", err)
	}
}

func TestListenerSeesAnExitWithItsFinalTotals(t *testing.T) {
	dialOrSkip(t)
	l, err := Listen(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu     sync.Mutex
		seen   = map[uint32]*Stats{}
		runErr error
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		runErr = l.Run(ctx, func(m Message) {
			mu.Lock()
			seen[m.Process().PID] = m.Process()
			mu.Unlock()
		}, func(err error) { t.Logf("skipped: %v", err) })
	}()
	t.Cleanup(func() { cancel(); <-done; _ = l.Close() })

	// A shell that burns CPU in a busy loop, then exits.
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := uint32(cmd.Process.Pid)
	var s *Stats
	await.Until(t, fmt.Sprintf("the exit record of pid %d", pid), func() bool {
		mu.Lock()
		defer mu.Unlock()
		s = seen[pid]
		return s != nil
	})
	if !s.LastOfGroup() || s.UserUs+s.SystemUs == 0 || s.Comm != "sh" {
		t.Fatalf("exit record of %d: %+v", pid, s)
	}
	t.Logf("exit of %d: utime %dus stime %dus run %dns etime %dus ppid %d", pid, s.UserUs, s.SystemUs, s.CPURunVirtualNs, s.ElapsedUs, s.PPID)
	if s.PPID != uint32(os.Getpid()) {
		t.Fatalf("ppid %d, want the test binary %d", s.PPID, os.Getpid())
	}
	cancel()
	<-done
	if runErr != nil {
		t.Fatalf("Run after cancel: %v", runErr)
	}
}
