// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// A parent is a postmaster only when the postmaster.pid in its working
// directory is owned by the parent's own user: a file another user wrote
// (in a directory a hostile process was started in) proves nothing.
func TestAPidFileOfAnotherUserMakesNoPostmaster(t *testing.T) {
	root := t.TempDir()
	me := int64(os.Geteuid())
	for _, c := range []struct {
		pid, uid int64
		want     bool
	}{
		{pid: 500, uid: me, want: true},      // the file is its own user's
		{pid: 501, uid: me + 1, want: false}, // the file is another user's
	} {
		dir := filepath.Join(root, strconv.FormatInt(c.pid, 10))
		if err := os.MkdirAll(filepath.Join(dir, "cwd"), 0o755); err != nil {
			t.Fatal(err)
		}
		status := fmt.Sprintf("Name:\tpostgres\nTgid:\t%[1]d\nPPid:\t1\nUid:\t%[2]d\t%[2]d\t%[2]d\t%[2]d\nThreads:\t1\n"+
			"voluntary_ctxt_switches:\t1\nnonvoluntary_ctxt_switches:\t1\n", c.pid, c.uid)
		if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cwd", "postmaster.pid"), fmt.Appendf(nil, "%d\n/data\n", c.pid), 0o600); err != nil {
			t.Fatal(err)
		}
		p := newPostmasters(root, nil, func(int64) bool { return true })
		if got := p.check(c.pid); got != c.want {
			t.Errorf("pid %d of uid %d, its postmaster.pid owned by uid %d: postmaster %v, want %v", c.pid, c.uid, me, got, c.want)
		}
	}
}

// Only a regular file is read as a postmaster.pid: a FIFO or a device in
// its place is refused, whatever it would give to read.
func TestAPidFileThatIsNotARegularFileIsNotRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "postmaster.pid")
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	// Open for reading and writing, which never blocks on a FIFO, and leave
	// a pid in it for the reader to find.
	fifo, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = fifo.Close() }()
	if _, err := fifo.WriteString("900\n"); err != nil {
		t.Fatal(err)
	}
	if pid, _, err := readPidFile(path); err == nil {
		t.Errorf("a FIFO read as a postmaster.pid naming %d, want refused", pid)
	}
}

// A postmaster is one of an allowed user, whether a configured pid file or
// its working directory's names it: a server another user runs is not ours.
func TestAPostmasterOfAUserNotAllowedIsNone(t *testing.T) {
	root := t.TempDir()
	me := int64(os.Geteuid())
	const pid = 600
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(filepath.Join(dir, "cwd"), 0o755); err != nil {
		t.Fatal(err)
	}
	status := fmt.Sprintf("Name:\tpostgres\nTgid:\t%[1]d\nPPid:\t1\nUid:\t%[2]d\t%[2]d\t%[2]d\t%[2]d\nThreads:\t1\n"+
		"voluntary_ctxt_switches:\t1\nnonvoluntary_ctxt_switches:\t1\n", pid, me)
	if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(dir, "cwd", "postmaster.pid")
	if err := os.WriteFile(pidFile, fmt.Appendf(nil, "%d\n/data\n", pid), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, pidFiles := range [][]string{nil, {pidFile}} {
		for _, allowed := range []bool{true, false} {
			p := newPostmasters(root, pidFiles, func(uid int64) bool { return allowed && uid == me })
			if got := p.check(pid); got != allowed {
				t.Errorf("pid files %v, its uid allowed %v: postmaster %v, want %v", pidFiles, allowed, got, allowed)
			}
		}
	}
}
