// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memctx

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestSocketIsReachedThroughThePostmastersRoot: the socket directory
// postmaster.pid names is taken through <proc>/<pid>/root, which shows the
// postmaster's own file system however the agent's /tmp is made; without a
// socket there, the directory as named.
func TestSocketIsReachedThroughThePostmastersRoot(t *testing.T) {
	procRoot := t.TempDir()
	hostRoot := t.TempDir() // the file system as the postmaster sees it
	if err := os.MkdirAll(filepath.Join(hostRoot, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("unix", filepath.Join(hostRoot, "tmp", ".s.PGSQL.6000"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lis.Close() }()
	if err := os.MkdirAll(filepath.Join(procRoot, "4242"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hostRoot, filepath.Join(procRoot, "4242", "root")); err != nil {
		t.Fatal(err)
	}
	in := instance{postmasterPID: 4242, port: 6000, socketDir: "/tmp"}
	if got, want := socketDir(procRoot, in), filepath.Join(procRoot, "4242", "root", "tmp"); got != want {
		t.Errorf("socket directory %q, want %q", got, want)
	}
	in.port = 6001 // no socket of that port there
	if got := socketDir(procRoot, in); got != "/tmp" {
		t.Errorf("socket directory %q, want /tmp as named", got)
	}
	in.socketDir = ""
	if got := socketDir(procRoot, in); got != "" {
		t.Errorf("socket directory %q for an instance without one", got)
	}
}
