// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpotel/gpotel/segmentagent/procfs"
)

const (
	// postmasterRecheck is how long a verdict about a parent stands: a
	// postmaster that stopped is forgotten this long after, at most.
	postmasterRecheck = time.Second
	// maxPostmasterVerdicts bounds the verdicts kept (a host has a few
	// postmasters; a request naming many parents only refills the cache).
	maxPostmasterVerdicts = 4096
	// maxPidFileSize bounds a postmaster.pid read (the real one is under 200 bytes).
	maxPidFileSize = 4096
	// maxStatusSize bounds a /proc/<pid>/status read.
	maxStatusSize = 64 << 10
)

// postmasters tells database processes from the rest: a postmaster whose
// real uid is allowed, and its children. The postmasters are
// the ones postmaster_pid_files name; without that setting, a parent is a
// postmaster when its working directory (PostgreSQL runs in its data
// directory) holds a postmaster.pid that names it and is owned by its uid.
type postmasters struct {
	procRoot string
	pidFiles []string
	allowUID func(uid int64) bool

	mu       sync.Mutex
	verdicts map[int64]postmasterVerdict
}

type postmasterVerdict struct {
	postmaster bool
	at         time.Time
}

func newPostmasters(procRoot string, pidFiles []string, allowUID func(uid int64) bool) *postmasters {
	return &postmasters{procRoot: procRoot, pidFiles: pidFiles, allowUID: allowUID, verdicts: map[int64]postmasterVerdict{}}
}

// is reports whether pid is a postmaster of an allowed user now.
func (p *postmasters) is(pid int64) bool {
	if pid <= 0 {
		return false
	}
	now := time.Now()
	p.mu.Lock()
	v, ok := p.verdicts[pid]
	p.mu.Unlock()
	if ok && now.Sub(v.at) < postmasterRecheck && now.Sub(v.at) >= 0 {
		return v.postmaster
	}
	v = postmasterVerdict{postmaster: p.check(pid), at: now}
	p.mu.Lock()
	if len(p.verdicts) >= maxPostmasterVerdicts {
		clear(p.verdicts)
	}
	p.verdicts[pid] = v
	p.mu.Unlock()
	return v.postmaster
}

// check reads the pid file that should name the process, then its status.
// The pid file comes first: the kernel's exit listener asks about every
// process of an allowed uid that ends on the host, and for nearly all of
// them no pid file names it, which settles the question without reading
// and parsing their status.
func (p *postmasters) check(pid int64) bool {
	dir := filepath.Join(p.procRoot, strconv.FormatInt(pid, 10))
	owner, named := p.namedByPidFile(dir, pid)
	if !named {
		return false
	}
	b, err := readBounded(filepath.Join(dir, "status"), maxStatusSize)
	if err != nil {
		return false
	}
	status, err := procfs.ParseStatus(b)
	if err != nil || !p.allowUID(status.UIDReal) {
		return false
	}
	// A postmaster.pid found through its working directory must be owned
	// by its uid; the configured pid files are the administrator's word.
	return len(p.pidFiles) > 0 || int64(owner) == status.UIDReal
}

// namedByPidFile reports whether a postmaster.pid names pid: one of the
// configured pid files or, without them, the one in the process's working
// directory (dir is its /proc directory), with that file's owner.
func (p *postmasters) namedByPidFile(dir string, pid int64) (owner uint32, named bool) {
	if len(p.pidFiles) > 0 {
		for _, f := range p.pidFiles {
			if n, _, err := readPidFile(f); err == nil && n == pid {
				return 0, true
			}
		}
		return 0, false
	}
	// <proc>/<pid>/cwd resolves in the process's own mount namespace, so a
	// private /tmp or a container does not hide its data directory.
	n, owner, err := readPidFile(filepath.Join(dir, "cwd", "postmaster.pid"))
	return owner, err == nil && n == pid
}

// readPidFile reads the pid on the first line of a postmaster.pid and the
// file's owner. Only a regular file is read, and only its first bytes.
func readPidFile(path string) (pid int64, owner uint32, err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || !ok {
		return 0, 0, fmt.Errorf("%s is not a regular file", path)
	}
	buf := make([]byte, maxPidFileSize)
	n, err := f.Read(buf)
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := bytes.Cut(buf[:n], []byte("\n"))
	pid, err = strconv.ParseInt(string(bytes.TrimSpace(line)), 10, 64)
	if err != nil || pid <= 0 {
		return 0, 0, fmt.Errorf("%s: first line %q is not a pid", path, line)
	}
	return pid, st.Uid, nil
}

// readBounded reads a whole small file, refusing one larger than limit.
func readBounded(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	buf := make([]byte, limit+1)
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if m == 0 || err != nil {
			break
		}
	}
	if n > limit {
		return nil, errors.New(path + ": larger than expected")
	}
	return buf[:n], nil
}
