// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memctx

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// LogSource says where an instance writes the log format being read.
type LogSource interface {
	// Current opens the file the server writes now; name is for messages.
	Current() (f *os.File, name string, err error)
}

// collectorLog is a destination written by the logging collector: the
// server names its current file in <data dir>/current_logfiles.
type collectorLog struct {
	dataDir string
	format  string
}

func (c collectorLog) Current() (*os.File, string, error) {
	path, err := currentLogFile(c.dataDir, c.format)
	if err != nil {
		return nil, "", err
	}
	f, err := os.Open(path)
	return f, path, err
}

// currentLogFile reads current_logfiles ("<format> <path>" lines; a
// relative path is relative to the data directory).
func currentLogFile(dataDir, format string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "current_logfiles"))
	if err != nil {
		return "", fmt.Errorf("reading the server's current log file name: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, path, ok := strings.Cut(sc.Text(), " ")
		if ok && name == format && path != "" {
			if !filepath.IsAbs(path) {
				path = filepath.Join(dataDir, path)
			}
			return path, nil
		}
	}
	return "", fmt.Errorf("%s/current_logfiles names no %s file", dataDir, format)
}

// postmasterStderr is the stderr of a server without the logging
// collector: whatever file its postmaster's fd 2 is (pg_ctl -l file).
type postmasterStderr struct {
	procRoot      string
	postmasterPID int64
}

func (p postmasterStderr) Current() (*os.File, string, error) {
	fd := filepath.Join(p.procRoot, fmt.Sprint(p.postmasterPID), "fd", "2")
	target, err := os.Readlink(fd)
	if err != nil {
		return nil, "", fmt.Errorf("finding the postmaster's stderr: %w", err)
	}
	f, err := os.Open(fd)
	if err != nil {
		return nil, "", fmt.Errorf("opening the postmaster's stderr %s: %w", target, err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		_ = f.Close()
		return nil, "", fmt.Errorf("the server's stderr goes to %s, which is not a file: turn on logging_collector or start it with pg_ctl -l <file>", target)
	}
	return f, target, nil
}

// greenplumLog is the CSV log Greenplum's logging collector writes: the
// file current_logfiles names for stderr (Greenplum 7, Cloudberry), or,
// where there is no such file (Greenplum 6), the newest in log_directory
// named after log_filename.
type greenplumLog struct {
	dataDir string
	dir     string
	name    *regexp.Regexp
}

func (g greenplumLog) Current() (*os.File, string, error) {
	if path, err := currentLogFile(g.dataDir, "stderr"); err == nil && g.name.MatchString(filepath.Base(path)) {
		f, err := os.Open(path)
		return f, path, err
	}
	entries, err := os.ReadDir(g.dir)
	if err != nil {
		return nil, "", fmt.Errorf("listing log_directory: %w", err)
	}
	var newest string
	var newestTime time.Time
	for _, e := range entries {
		if !e.Type().IsRegular() || !g.name.MatchString(e.Name()) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		if t := info.ModTime(); newest == "" || t.After(newestTime) || (t.Equal(newestTime) && e.Name() > newest) {
			newest, newestTime = e.Name(), t
		}
	}
	if newest == "" {
		return nil, "", fmt.Errorf("%s holds no file named like log_filename (%s)", g.dir, g.name)
	}
	path := filepath.Join(g.dir, newest)
	f, err := os.Open(path)
	return f, path, err
}

// greenplumLogName matches the names Greenplum gives log files from a
// log_filename strftime pattern: with gp_log_format=csv the name's last
// four characters become ".csv".
func greenplumLogName(pattern string) (*regexp.Regexp, error) {
	if !strings.HasSuffix(pattern, ".csv") {
		n := len(pattern)
		if n < 5 || strings.Contains(pattern[n-5:], "%") {
			return nil, fmt.Errorf("log_filename %q: cannot tell which files hold Greenplum's CSV log (it should end in .csv)", pattern)
		}
		pattern = pattern[:n-4] + ".csv"
	}
	var re strings.Builder
	re.WriteString(`^`)
	for i := 0; i < len(pattern); i++ {
		if pattern[i] != '%' || i+1 == len(pattern) {
			re.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
			continue
		}
		i++
		switch pattern[i] {
		case 'Y', 'G':
			re.WriteString(`\d{4}`)
		case 'm', 'd', 'H', 'M', 'S', 'y', 'I', 'U', 'W', 'V', 'C', 'g':
			re.WriteString(`\d{2}`)
		case 'j':
			re.WriteString(`\d{3}`)
		case 'a', 'A', 'b', 'B', 'h', 'p', 'Z':
			re.WriteString(`[A-Za-z]+`)
		case '%':
			re.WriteString(`%`)
		default:
			re.WriteString(`.+?`)
		}
	}
	re.WriteString(`$`)
	return regexp.Compile(re.String())
}

// maxEntryBytes bounds one log entry kept while waiting for its end.
const maxEntryBytes = 1 << 20

// tail reads a server log forward from a position taken before the request,
// following the server to a new file when it rotates. It holds the only
// position: a new request takes a new one, so nothing half-read is ever
// left for the next.
//
// The position may fall anywhere in an entry, even inside a quoted field of
// a client's statement, so nothing is trusted until the agent's own mark:
// a message with a random word that the agent has the server log before it
// signals the backend. Every entry after the mark's was logged after it.
type tail struct {
	src    LogSource
	format LogFormat
	mark   string
	f      *os.File
	name   string
	off    int64
	buf    []byte
	read   int64 // bytes read, for the per-request bound
	synced bool  // the mark's entry has been passed
	// skipping: the entry being read is too long to keep and is passed over;
	// skipState is what the format needs to find its end.
	skipping  bool
	skipState bool
}

// openTail opens the current file at its end; entries count only after
// the one carrying mark.
func openTail(src LogSource, format LogFormat, mark string) (*tail, error) {
	f, name, err := src.Current()
	if err != nil {
		return nil, err
	}
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return &tail{src: src, format: format, mark: mark, f: f, name: name, off: end}, nil
}

func (t *tail) close() {
	if t.f != nil {
		_ = t.f.Close()
		t.f = nil
	}
}

// errReadLimit: the log grew by more than a request may read.
var errReadLimit = errors.New("read limit reached")

// poll reads what was appended since the last call and hands every
// complete entry after the mark to fn; when nothing was appended and the
// server has moved on to another file (rotation) or truncated this one, it
// continues there.
func (t *tail) poll(limit int64, fn func(Record)) error {
	n, err := t.drain(limit, fn)
	if err != nil || n > 0 {
		return err
	}
	st, err := t.f.Stat()
	if err != nil {
		return err
	}
	if st.Size() < t.off { // truncated in place (log_truncate_on_rotation, copytruncate)
		t.off, t.buf = 0, t.buf[:0]
		return nil
	}
	f, name, curErr := t.src.Current()
	if curErr != nil {
		return nil //nolint:nilerr // between rotations current_logfiles may be missing: look again at the next poll
	}
	if sameFile(f, t.f) {
		_ = f.Close()
		return nil
	}
	// Rotated: the old file is complete (nothing was appended to it since
	// the drain above emptied it); a half entry left in it is dropped, and
	// the new file begins with an entry.
	if _, err := t.drain(limit, fn); err != nil {
		_ = f.Close()
		return err
	}
	_ = t.f.Close()
	t.f, t.name, t.off, t.buf, t.skipping = f, name, 0, t.buf[:0], false
	return nil
}

// drain reads to the end of the current file.
func (t *tail) drain(limit int64, fn func(Record)) (int64, error) {
	var total int64
	chunk := make([]byte, 64<<10)
	for {
		n, err := t.f.ReadAt(chunk, t.off)
		if n > 0 {
			total += int64(n)
			t.read += int64(n)
			t.off += int64(n)
			t.buf = append(t.buf, chunk[:n]...)
			t.consume(fn)
			if t.read > limit {
				return total, errReadLimit
			}
		}
		if errors.Is(err, io.EOF) || n == 0 {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// consume hands every complete entry in buf to fn and keeps the rest.
func (t *tail) consume(fn func(Record)) {
	rest := t.buf
	for len(rest) > 0 {
		if !t.synced {
			n, ok := t.format.Resync(rest, t.mark)
			rest = rest[n:]
			if !ok {
				break
			}
			t.synced = true
			continue
		}
		if t.skipping {
			n, done := t.format.Skip(rest, &t.skipState)
			rest = rest[n:]
			t.skipping = !done
			continue
		}
		entry, n := t.format.Next(rest)
		if n == 0 {
			if len(rest) > maxEntryBytes { // an entry this long is not one of ours
				t.skipping, t.skipState = true, false
				continue
			}
			break
		}
		if r, ok := t.format.Parse(entry); ok {
			fn(r)
		}
		rest = rest[n:]
	}
	if !t.synced && len(rest) > maxEntryBytes {
		rest = rest[len(rest)-len(t.mark):]
	}
	t.buf = append(t.buf[:0], rest...)
}

func sameFile(a, b *os.File) bool {
	sa, err1 := a.Stat()
	sb, err2 := b.Stat()
	if err1 != nil || err2 != nil {
		return false
	}
	x, ok1 := sa.Sys().(*syscall.Stat_t)
	y, ok2 := sb.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && x.Dev == y.Dev && x.Ino == y.Ino
}
