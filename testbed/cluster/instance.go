// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
)

// settingsFile is included from postgresql.conf and rewritten on every start attempt.
const settingsFile = "gpotel.conf"

// templateVersion changes whenever what template puts into the template changes.
const templateVersion = "2"

// bringUpInstances makes every instance's data dir from the template, starts
// it and installs its part of the compat catalog; instances go in parallel.
// A copy is used instead of initdb per instance: initdb costs seconds of CPU
// (far more on a loaded machine), a copy a fraction of one.
func (c *Cluster) bringUpInstances(ctx context.Context) error {
	template, err := c.template(ctx)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	bringUp := func(in *Instance) error {
		if err := c.account.run(gctx, "/bin/cp", "-a", template, in.DataDir); err != nil {
			return err
		}
		if err := c.account.mkdirOwned(c.diskLocation(*in), 0o700); err != nil {
			return err
		}
		if err := c.start(gctx, in, true); err != nil {
			return err
		}
		return c.installInstanceCatalog(gctx, *in)
	}
	g.Go(func() error { return bringUp(&c.Coordinator) })
	for i := range c.Segments {
		g.Go(func() error { return bringUp(&c.Segments[i]) })
	}
	return g.Wait()
}

// template returns the cached initdb result, building it when missing.
func (c *Cluster) template(ctx context.Context) (string, error) {
	version, err := exec.CommandContext(ctx, filepath.Join(c.PGBinDir, "postgres"), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("postgres --version: %w", err)
	}
	sum := sha256.Sum256([]byte(templateVersion + "\x00" + c.PGBinDir + "\x00" + string(version)))
	cacheRoot := filepath.Join(os.TempDir(), fmt.Sprintf("gpotel-testbed-cache-%d", c.account.uid))
	dir := filepath.Join(cacheRoot, hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, templateReadyFile)); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(cacheRoot, 0o755); err != nil {
		return "", err
	}
	if err := c.account.checkReachable(cacheRoot); err != nil {
		return "", err
	}
	// Build beside the final place and rename: a concurrent Up either finds
	// a complete template or builds its own and loses the rename.
	build, err := os.MkdirTemp(cacheRoot, "build-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(build) }()
	if err := c.account.mkdirOwned(build, 0o755); err != nil {
		return "", err
	}
	data := filepath.Join(build, "data")
	err = c.account.run(ctx, filepath.Join(c.PGBinDir, "initdb"),
		"--pgdata", data, "--username", AdminRole, "--auth", "trust",
		"--encoding", "UTF8", "--locale", "C", "--no-sync", "--no-instructions")
	if err != nil {
		return "", err
	}
	if err := dropRebuildableForks(data); err != nil {
		return "", err
	}
	include := fmt.Sprintf("\n# gpotel testbed: per-instance settings\ninclude_if_exists = '%s'\n", settingsFile)
	if err := appendFile(filepath.Join(data, "postgresql.conf"), include); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(data, templateReadyFile), version, 0o644); err != nil {
		return "", err
	}
	removeStaleTemplates(cacheRoot, dir)
	if err := os.Rename(data, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, templateReadyFile)); statErr == nil {
			return dir, nil // another Up finished first
		}
		return "", err
	}
	return dir, nil
}

// dropRebuildableForks deletes the free space and visibility map forks that
// initdb's VACUUM left: PostgreSQL rebuilds them on demand, and they are a
// quarter of the files every copy has to create.
func dropRebuildableForks(dataDir string) error {
	return filepath.WalkDir(filepath.Join(dataDir, "base"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name := d.Name(); !d.IsDir() && (strings.HasSuffix(name, "_fsm") || strings.HasSuffix(name, "_vm")) {
			return os.Remove(path)
		}
		return nil
	})
}

// removeStaleTemplates deletes templates of other PostgreSQL builds or
// template versions made more than an hour ago.
func removeStaleTemplates(cacheRoot, keep string) {
	entries, _ := os.ReadDir(cacheRoot)
	for _, e := range entries {
		path := filepath.Join(cacheRoot, e.Name())
		info, err := e.Info()
		if err != nil || path == keep || strings.HasPrefix(e.Name(), "build-") || time.Since(info.ModTime()) < time.Hour {
			continue
		}
		_ = os.RemoveAll(path)
	}
}

// templateReadyFile marks a complete template; PostgreSQL ignores unknown files in a data dir.
const templateReadyFile = "gpotel-template-ready"

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// settings are the same for every instance except port, name and content id.
func (c *Cluster) settings(in Instance) string {
	return fmt.Sprintf(`port = %d
listen_addresses = '127.0.0.1'
unix_socket_directories = '%s'
cluster_name = '%s'
gpotel.content_id = %d
shared_buffers = 16MB
temp_buffers = 8MB
wal_buffers = 1MB
max_connections = 40
max_worker_processes = 8
max_parallel_workers = 4
max_wal_senders = 0
max_logical_replication_workers = 0
wal_level = minimal
fsync = on
max_wal_size = 64MB
min_wal_size = 32MB
autovacuum = off
jit = off
huge_pages = off
# mmap keeps DSM segments in the data dir: a killed postmaster leaves none in /dev/shm
dynamic_shared_memory_type = mmap
log_min_messages = warning
%s%s`, in.Port, c.SocketDir, c.processTag(in), in.Content, c.logSettings(), c.preloadSettings())
}

// preloadSettings loads the title extension on the Greenplum dialects.
func (c *Cluster) preloadSettings() string {
	if c.TitleLibrary == "" {
		return ""
	}
	return fmt.Sprintf("shared_preload_libraries = %s\n", quoteLiteral(c.TitleLibrary))
}

// processTag is the cluster_name: it shows in every process title of the
// instance, which is how Down finds stragglers.
func (c *Cluster) processTag(in Instance) string {
	return fmt.Sprintf("gpotel-%s-seg%d", c.ID, in.Content)
}

func (c *Cluster) logFile(in Instance) string {
	return filepath.Join(c.Dir, "logs", fmt.Sprintf("gpseg%d.log", in.Content))
}

// start launches one instance; with newPort it picks a free port and retries
// when another process grabbed it first.
func (c *Cluster) start(ctx context.Context, in *Instance, newPort bool) error {
	const attempts = 4
	var lastErr error
	for attempt := 0; attempt < attempts; attempt++ {
		if newPort || in.Port == 0 {
			port, err := freePort()
			if err != nil {
				return err
			}
			in.Port = port
		}
		if err := os.WriteFile(filepath.Join(in.DataDir, settingsFile), []byte(c.settings(*in)), 0o644); err != nil {
			return err
		}
		if err := os.Chown(filepath.Join(in.DataDir, settingsFile), c.account.uid, c.account.gid); err != nil {
			return err
		}
		logFile := c.logFile(*in)
		before := fileSize(logFile)
		lastErr = c.startPostmaster(ctx, *in, logFile)
		if lastErr == nil {
			pid, err := postmasterPID(in.DataDir)
			if err != nil {
				return err
			}
			in.PostmasterPID = pid
			in.DSN = fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", AdminRole, in.Port, Database)
			return nil
		}
		tail := c.startFailure(*in, logFile, before)
		lastErr = fmt.Errorf("start gpseg%d on port %d: %w; log: %s", in.Content, in.Port, lastErr, tail)
		if !newPort || !portTaken(tail) {
			return lastErr
		}
	}
	return lastErr
}

// startPostmaster runs pg_ctl start in the instance's resource group cgroup,
// when the testbed places instances in groups.
func (c *Cluster) startPostmaster(ctx context.Context, in Instance, logFile string) error {
	fd, err := c.openInstanceCgroup(in)
	if err != nil {
		return err
	}
	if fd >= 0 {
		defer syscall.Close(fd) //nolint:errcheck // read-only directory descriptor
	}
	return c.account.runInCgroup(ctx, fd, filepath.Join(c.PGBinDir, "pg_ctl"), "start", "--wait", "--timeout", "60",
		"--silent", "--pgdata", in.DataDir, "--log", logFile)
}

// portTaken tells a start that failed because another process bound the
// port between freePort and the postmaster's bind.
func portTaken(log string) bool {
	return strings.Contains(log, "could not bind") || strings.Contains(log, "in use")
}

// startFailure is what the server wrote about a failed start: pg_ctl's
// --log from offset on, and the logging collector's file.
func (c *Cluster) startFailure(in Instance, logFile string, offset int64) string {
	return readFrom(logFile, offset) + c.collectorLogTail(in)
}

// collectorLogTail is the end of the newest file in the instance's log
// directory when its server log goes through the logging collector: the
// postmaster reports a failed bind there, after --log's file has said only
// that output is redirected.
func (c *Cluster) collectorLogTail(in Instance) string {
	if c.LogDestination == LogStderr || c.LogDestination == "" {
		return ""
	}
	dir := "log"
	if c.LogDestination == LogGreenplumCSV {
		dir = c.Dialect.Facts().ServerLog.Directory
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(in.DataDir, dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	var newest string
	var newestAt time.Time
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() && info.ModTime().After(newestAt) {
			newest, newestAt = filepath.Join(dir, e.Name()), info.ModTime()
		}
	}
	if newest == "" {
		return ""
	}
	return "\n" + readFrom(newest, 0)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

func readFrom(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return ""
	}
	b = b[offset:]
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// postmasterPID reads the first line of postmaster.pid.
func postmasterPID(dataDir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(line)))
	if err != nil {
		return 0, fmt.Errorf("%s/postmaster.pid: %w", dataDir, err)
	}
	return pid, nil
}

// stop shuts one instance down: fast first, immediate if that stalls.
func (c *Cluster) stop(ctx context.Context, in Instance, mode string) error {
	pid, err := postmasterPID(in.DataDir)
	if err != nil || syscall.Kill(pid, 0) == syscall.ESRCH {
		return nil //nolint:nilerr // not running, or killed and its pid file left behind
	}
	pgctl := filepath.Join(c.PGBinDir, "pg_ctl")
	err = c.account.run(ctx, pgctl, "stop", "--wait", "--timeout", "20", "--silent", "--pgdata", in.DataDir, "--mode", mode)
	if err != nil && mode != "immediate" {
		err = c.account.run(ctx, pgctl, "stop", "--wait", "--timeout", "20", "--silent", "--pgdata", in.DataDir, "--mode", "immediate")
	}
	return err
}

// RestartCoordinator stops and starts the coordinator on the same port: its
// postmaster start time (and so the tm_id) changes, the catalog stays.
func (c *Cluster) RestartCoordinator(ctx context.Context) error {
	if err := c.StopCoordinator(ctx); err != nil {
		return err
	}
	return c.StartCoordinator(ctx)
}

// StopCoordinator stops the coordinator (an outage of the database
// itself); StartCoordinator starts it again on the same port.
func (c *Cluster) StopCoordinator(ctx context.Context) error {
	return c.stop(ctx, c.Coordinator, "fast")
}

// StartCoordinator starts the coordinator StopCoordinator stopped.
func (c *Cluster) StartCoordinator(ctx context.Context) error {
	if err := c.start(ctx, &c.Coordinator, false); err != nil {
		return err
	}
	return c.save()
}

// StopSegment stops a segment instance and marks its primary down in
// gp_segment_configuration, as Greenplum's fault prober would, so that
// gp_dist_random leaves it out. StartSegment undoes both.
func (c *Cluster) StopSegment(ctx context.Context, content int) error {
	in, err := c.segment(content)
	if err != nil {
		return err
	}
	if err := c.stop(ctx, *in, "fast"); err != nil {
		return err
	}
	in.Stopped = true
	if err := c.setSegmentStatus(ctx, content, "d"); err != nil {
		return err
	}
	return c.save()
}

// StartSegment starts a segment that StopSegment stopped, on the same port.
func (c *Cluster) StartSegment(ctx context.Context, content int) error {
	in, err := c.segment(content)
	if err != nil {
		return err
	}
	if err := c.start(ctx, in, false); err != nil {
		return err
	}
	in.Stopped = false
	if err := c.setSegmentStatus(ctx, content, "u"); err != nil {
		return err
	}
	return c.save()
}

func (c *Cluster) segment(content int) (*Instance, error) {
	for i := range c.Segments {
		if c.Segments[i].Content == content {
			return &c.Segments[i], nil
		}
	}
	return nil, fmt.Errorf("testbed %s has no segment with content %d", c.ID, content)
}

func (c *Cluster) setSegmentStatus(ctx context.Context, content int, status string) error {
	if !c.Dialect.Greenplum() {
		return nil
	}
	return execScript(ctx, c.Coordinator, fmt.Sprintf(
		"UPDATE pg_catalog.gp_segment_configuration SET status = '%s' WHERE content = %d AND role = 'p'", status, content))
}

// Down stops every instance, kills any process still tagged with this
// cluster's name, and removes Dir. Calling it again is harmless.
func (c *Cluster) Down(ctx context.Context) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	if c.PGBinDir != "" {
		for _, in := range c.Instances() {
			if in.DataDir == "" {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.stop(ctx, in, "fast"); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("stop gpseg%d: %w", in.Content, err))
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	if left := c.killStragglers(); len(left) > 0 {
		errs = append(errs, fmt.Errorf("processes of testbed %s still alive after SIGKILL: %v", c.ID, left))
	} else {
		errs = nil // a failed clean stop does not matter once nothing is left
	}
	if len(errs) == 0 {
		if err := c.removeCgroups(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, dir := range []string{c.DiskDir, c.Dir} {
		if dir == "" {
			continue
		}
		if err := os.RemoveAll(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Processes lists the pids of this cluster: postmasters (by their -D data
// dir) and every child (by the cluster_name in its process title).
func (c *Cluster) Processes() []int {
	dataDirs := map[string]bool{}
	for _, in := range c.Instances() {
		if in.DataDir != "" {
			dataDirs[in.DataDir] = true
		}
	}
	tag := []byte("gpotel-" + c.ID + "-seg")
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		match := c.ID != "" && bytes.Contains(cmdline, tag)
		for _, arg := range bytes.Split(cmdline, []byte{0}) {
			if dataDirs[string(arg)] {
				match = true
			}
		}
		if match {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killStragglers SIGKILLs what a clean stop left behind and reports survivors.
func (c *Cluster) killStragglers() []int {
	pids := c.Processes()
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(pids) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		pids = c.Processes()
	}
	return pids
}
