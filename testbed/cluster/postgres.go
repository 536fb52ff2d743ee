// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// ErrPostgresMissing says the PostgreSQL server binaries are not installed.
var ErrPostgresMissing = errors.New("PostgreSQL server binaries not found (run `make testbed-deps`, or set GPOTEL_PG_BINDIR)")

// serverUser is the unprivileged OS account the instances run as when we are root:
// PostgreSQL refuses to start as root.
const serverUser = "postgres"

// postgresBin locates the directory holding initdb, pg_ctl and postgres.
func postgresBin() (string, error) {
	if dir := os.Getenv("GPOTEL_PG_BINDIR"); dir != "" {
		if isExecutable(filepath.Join(dir, "pg_ctl")) {
			return dir, nil
		}
		return "", fmt.Errorf("GPOTEL_PG_BINDIR=%s has no pg_ctl: %w", dir, ErrPostgresMissing)
	}
	// Debian installs each major version side by side; take the newest.
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, dir := range dirs {
		if isExecutable(filepath.Join(dir, "pg_ctl")) && isExecutable(filepath.Join(dir, "initdb")) {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", ErrPostgresMissing
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// serverAccount is who the PostgreSQL processes run as.
type serverAccount struct {
	uid, gid int
	// credential is nil when we already run unprivileged (then the instances run as us).
	credential *syscall.Credential
}

func lookupServerAccount() (serverAccount, error) {
	if os.Geteuid() != 0 {
		return serverAccount{uid: os.Getuid(), gid: os.Getgid()}, nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		return serverAccount{}, fmt.Errorf("running as root needs the unprivileged OS user %q to run PostgreSQL: %w", serverUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return serverAccount{uid: uid, gid: gid, credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}, nil
}

// command builds a PostgreSQL tool invocation running as the server account.
func (a serverAccount) command(ctx context.Context, path string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: a.credential, Setpgid: true}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C", "LANG=C", "TZ=UTC", "HOME=/tmp"}
	cmd.Dir = "/"
	return cmd
}

// run executes a tool and folds its output into the error.
func (a serverAccount) run(ctx context.Context, path string, args ...string) error {
	return a.runInCgroup(ctx, -1, path, args...)
}

// runInCgroup is run with the tool started in the cgroup v2 group open at
// cgroupFD (and so every process it forks); -1 leaves it in ours.
func (a serverAccount) runInCgroup(ctx context.Context, cgroupFD int, path string, args ...string) error {
	cmd := a.command(ctx, path, args...)
	if cgroupFD >= 0 {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cgroupFD
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", filepath.Base(path), strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// mkdirOwned makes dir owned by the server account, readable by everyone.
func (a serverAccount) mkdirOwned(dir string, perm os.FileMode) error {
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	if err := os.Chmod(dir, perm); err != nil {
		return err
	}
	return os.Chown(dir, a.uid, a.gid)
}

// checkReachable fails when the server account cannot traverse into dir.
func (a serverAccount) checkReachable(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := abs; ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		mode := st.Mode().Perm()
		if ok {
			switch {
			case int(sys.Uid) == a.uid && mode&0o100 != 0:
			case int(sys.Gid) == a.gid && mode&0o010 != 0:
			case mode&0o001 != 0:
			default:
				return fmt.Errorf("directory %s is not searchable by OS user %d (mode %v); the PostgreSQL instances cannot reach %s: pick a --dir under /tmp or "+
					"chmod o+x", p, a.uid, mode, abs)
			}
		}
		if p == "/" {
			return nil
		}
	}
}
