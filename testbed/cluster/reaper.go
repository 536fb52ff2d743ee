// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxDescriptionSize bounds a cluster.json the reaper reads (a 200-host one is under 100 KiB).
const maxDescriptionSize = 1 << 20

// clusterID is the shape newID gives: it is part of every process tag Down kills by.
var clusterID = regexp.MustCompile(`^[0-9a-f]{8}$`)

// reapOrphans takes down ephemeral clusters in the default locations whose
// owner process has exited without calling Down. The directories are
// shared, and Down runs pg_ctl, kills processes and removes directories, as
// root under make test: it acts only on a description it could have
// written itself (ownOrphan).
func reapOrphans() {
	var found []string
	for _, base := range []string{"/dev/shm", os.TempDir()} {
		m, _ := filepath.Glob(filepath.Join(base, "gpotel-testbed-*", descriptionFile))
		found = append(found, m...)
	}
	for _, file := range found {
		c, err := ownOrphan(filepath.Dir(file))
		if err != nil || ownerAlive(*c.Owner) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = c.Down(ctx)
		cancel()
	}
}

func ownerAlive(o Owner) bool {
	return o.PID > 0 && processStartTicks(o.PID) == o.StartTicks
}

// ownOrphan loads the ephemeral cluster described in dir when the
// directory and its cluster.json are ours (the effective uid's, not
// symlinks, writable by no one else) and every path the description names
// lies where Up puts it: data, socket and disk directories under dir (or
// the disk directory in the temp dir, named as diskDir names it), the
// cgroup root under the cgroup v2 mount named after the cluster, pg_ctl
// from the PostgreSQL installation this process would use.
func ownOrphan(dir string) (*Cluster, error) {
	if err := checkOwn(dir, true); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, descriptionFile), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkOwnInfo(f.Name(), fi, false); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxDescriptionSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxDescriptionSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", f.Name(), maxDescriptionSize)
	}
	c := &Cluster{}
	if err := json.Unmarshal(b, &c.Description); err != nil {
		return nil, err
	}
	if err := c.checkPaths(dir); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	if c.account, err = lookupServerAccount(); err != nil {
		return nil, err
	}
	return c, nil
}

// checkPaths holds the description to the places Up uses.
func (c *Cluster) checkPaths(dir string) error {
	var errs []error
	if c.Owner == nil {
		errs = append(errs, errors.New("not ephemeral (no owner)"))
	}
	if !clusterID.MatchString(c.ID) {
		errs = append(errs, fmt.Errorf("id %q is not one Up makes", c.ID))
	}
	if c.Dir != dir {
		errs = append(errs, fmt.Errorf("dir %q is not the description's own directory %s", c.Dir, dir))
	}
	for _, in := range c.Instances() {
		if in.DataDir != "" && !within(dir, in.DataDir) {
			errs = append(errs, fmt.Errorf("data_dir %q is outside %s", in.DataDir, dir))
		}
	}
	if c.SocketDir != "" && !within(dir, c.SocketDir) {
		errs = append(errs, fmt.Errorf("socket_dir %q is outside %s", c.SocketDir, dir))
	}
	if c.DiskDir != "" && !within(dir, c.DiskDir) {
		if filepath.Dir(c.DiskDir) != filepath.Clean(os.TempDir()) || !strings.HasPrefix(filepath.Base(c.DiskDir), "gpotel-testbed-disk-") {
			errs = append(errs, fmt.Errorf("disk_dir %q is neither under %s nor a gpotel-testbed-disk-* of %s", c.DiskDir, dir, os.TempDir()))
		} else if fi, err := os.Lstat(c.DiskDir); err == nil && !fi.IsDir() {
			// Up hands it to the server account, so only its kind is ours to check.
			errs = append(errs, fmt.Errorf("disk_dir %q is not a directory", c.DiskDir))
		}
	}
	if c.PGBinDir != "" {
		if bin, err := postgresBin(); err != nil || filepath.Clean(c.PGBinDir) != bin {
			errs = append(errs, fmt.Errorf("pg_bin_dir %q is not this host's PostgreSQL (%s)", c.PGBinDir, bin))
		}
	}
	if c.Cgroups.Root != "" {
		if want := cgroupRootOf(c.ID); want == "" || c.Cgroups.Root != want {
			errs = append(errs, fmt.Errorf("cgroups.root %q is not %q", c.Cgroups.Root, want))
		}
	}
	return errors.Join(errs...)
}

// within reports whether path is dir or below it, lexically and absolute.
func within(dir, path string) bool {
	if !filepath.IsAbs(path) {
		return false
	}
	rel, err := filepath.Rel(dir, filepath.Clean(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// checkOwn fails unless path is the effective uid's and not a symlink.
func checkOwn(path string, wantDir bool) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	return checkOwnInfo(path, fi, wantDir)
}

func checkOwnInfo(path string, fi os.FileInfo, wantDir bool) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !ok:
		return fmt.Errorf("%s: no owner", path)
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%s is a symlink", path)
	case wantDir && !fi.IsDir(), !wantDir && !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a %s", path, map[bool]string{true: "directory", false: "regular file"}[wantDir])
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s belongs to uid %d, not to us (%d)", path, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by others (%v)", path, fi.Mode().Perm())
	}
	return nil
}
