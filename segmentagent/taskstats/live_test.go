// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package taskstats

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/segmentagent/internal/proctest"
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
	var s *Stats
	// utime and stime are charged by the tick: burn CPU until one lands.
	await.NoError(t, "a tick of CPU time charged to this test binary", func() error {
		for burn := time.Now().Add(20 * time.Millisecond); time.Now().Before(burn); {
			runtime.Gosched() // still on a CPU: it yields only to this binary's goroutines
		}
		var err error
		if s, err = c.Task(os.Getpid()); err != nil || s.UserUs+s.SystemUs > 0 {
			return err
		}
		return fmt.Errorf("utime and stime still 0 after %d ns on a CPU", s.CPURunVirtualNs)
	})
	if s.PID != uint32(os.Getpid()) || s.UID != uint32(os.Getuid()) {
		t.Fatalf("pid %d uid %d, want %d %d", s.PID, s.UID, os.Getpid(), os.Getuid())
	}
	if s.CPURunVirtualNs == 0 || s.Comm == "" || s.ReadChars == 0 {
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

// sleeperPids starts n sleeping children and returns their pids.
func sleeperPids(t *testing.T, n int) []int {
	t.Helper()
	var pids []int
	for _, p := range proctest.SpawnSleepers(t, n) {
		pids = append(pids, int(p))
	}
	return pids
}

func TestTasksAnswersEveryPidOnceWithItsOwnRecord(t *testing.T) {
	c := dialOrSkip(t)
	sleepers := sleeperPids(t, 3*maxInFlight+5) // several windows, the last one short
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	pids := slices.Insert(sleepers, maxInFlight+3, gone.Process.Pid, 0)
	answers := make([]int, len(pids))
	c.Tasks(pids, func(i int, s *Stats, err error) {
		answers[i]++
		switch pid := pids[i]; {
		case pid == gone.Process.Pid:
			if !errors.Is(err, os.ErrNotExist) {
				t.Errorf("reaped pid %d: %v, want os.ErrNotExist", pid, err)
			}
		case pid == 0:
			if err == nil {
				t.Errorf("pid 0 answered %+v", s)
			}
		case err != nil:
			t.Errorf("sleeper %d: %v", pid, err)
		case int(s.PID) != pid || s.Comm != "sleep" || s.PPID != uint32(os.Getpid()):
			t.Errorf("sleeper %d answered with pid %d comm %q ppid %d", pid, s.PID, s.Comm, s.PPID)
		}
	})
	for i, n := range answers {
		if n != 1 {
			t.Errorf("pid %d answered %d times", pids[i], n)
		}
	}
}

func TestTasksWithAFullReceiveBufferNamesEachDroppedPid(t *testing.T) {
	c := dialOrSkip(t)
	pids := sleeperPids(t, maxInFlight)
	// The smallest buffer the kernel allows holds a reply or two of the window.
	if err := c.conn.SetReadBuffer(1); err != nil {
		t.Fatal(err)
	}
	answered, dropped := 0, 0
	c.Tasks(pids, func(i int, s *Stats, err error) {
		switch {
		case err == nil && int(s.PID) == pids[i]:
			answered++
		case errors.Is(err, ErrNoReply) && errors.Is(err, unix.ENOBUFS) && strings.Contains(err.Error(), strconv.Itoa(pids[i])):
			dropped++
		default:
			t.Errorf("pid %d: %+v, %v", pids[i], s, err)
		}
	})
	if answered == 0 || dropped == 0 || answered+dropped != len(pids) {
		t.Fatalf("%d answered, %d dropped of %d", answered, dropped, len(pids))
	}
	t.Logf("%d answered, %d dropped", answered, dropped)

	// With room again the same Client answers every pid: nothing was left behind.
	if err := c.conn.SetReadBuffer(maxInFlight * replyBudget); err != nil {
		t.Fatal(err)
	}
	answered = 0
	c.Tasks(pids, func(i int, s *Stats, err error) {
		if err != nil || int(s.PID) != pids[i] {
			t.Errorf("pid %d: %+v, %v", pids[i], s, err)
			return
		}
		answered++
	})
	if answered != len(pids) {
		t.Fatalf("%d of %d answered", answered, len(pids))
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
