// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// deadOwner is the owner of a cluster whose test process has exited.
func deadOwner(t *testing.T) *Owner {
	t.Helper()
	p := exec.Command("true")
	if err := p.Run(); err != nil {
		t.Fatal(err)
	}
	return &Owner{PID: p.Process.Pid, StartTicks: 1}
}

// canary is a directory the reaper must never remove.
func canary(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "canary")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "keep"), []byte("still here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// plantDescription writes an orphan's cluster.json naming target as every
// directory Down removes, in a new gpotel-testbed-* directory of the default
// location, and returns that directory.
func plantDescription(t *testing.T, target string) string {
	t.Helper()
	dir, err := os.MkdirTemp(os.TempDir(), "gpotel-testbed-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	d := Description{ID: "0badc0de", Dir: target, DiskDir: target, SocketDir: target, Owner: deadOwner(t),
		Coordinator: Instance{Content: CoordinatorContent, DataDir: target}}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, descriptionFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func assertSurvives(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "keep")); err != nil {
		t.Errorf("the reaper removed %s: %v", dir, err)
	}
}

// TestReaperIgnoresForeignDescriptions plants orphan descriptions the reaper
// of a later Up finds (a dead owner process, in /tmp/gpotel-testbed-*) but
// must not act on, each naming a canary directory as what Down removes: a
// description and directory owned by another user (nobody), a description
// that is a symlink to a file elsewhere, and one of our own whose paths lie
// outside its own directory. Every canary survives.
func TestReaperIgnoresForeignDescriptions(t *testing.T) {
	t.Run("owned by another user", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("planting a description owned by nobody needs root")
		}
		// A description that passes every other rule (its paths are its
		// own directory's, as in "our own orphan is reaped" below), so only
		// the owner stands between the reaper and the directory.
		dir := ownOrphanDescription(t)
		if err := os.WriteFile(filepath.Join(dir, "keep"), []byte("still here\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{filepath.Join(dir, descriptionFile), dir} {
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		reapOrphans()
		assertSurvives(t, dir)
	})
	t.Run("a symlink to a description elsewhere", func(t *testing.T) {
		target := canary(t)
		elsewhere := plantDescription(t, target)
		dir, err := os.MkdirTemp(os.TempDir(), "gpotel-testbed-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		// The planted one is renamed out of the glob's reach first.
		hidden := filepath.Join(t.TempDir(), descriptionFile)
		if err := os.Rename(filepath.Join(elsewhere, descriptionFile), hidden); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(hidden, filepath.Join(dir, descriptionFile)); err != nil {
			t.Fatal(err)
		}
		reapOrphans()
		assertSurvives(t, target)
	})
	t.Run("paths outside its own directory", func(t *testing.T) {
		target := canary(t)
		plantDescription(t, target)
		reapOrphans()
		assertSurvives(t, target)
	})
	// The rules must leave the reaper its job: our own orphan still goes.
	t.Run("our own orphan is reaped", func(t *testing.T) {
		dir := ownOrphanDescription(t)
		reapOrphans()
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("our own orphan %s was left: %v", dir, err)
		}
	})
}

// ownOrphanDescription writes, in a new gpotel-testbed-* directory, the
// description of an orphan of ours whose every path is its own directory's,
// and returns that directory.
func ownOrphanDescription(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(os.TempDir(), "gpotel-testbed-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	d := Description{ID: "0badf00d", Dir: dir, DiskDir: filepath.Join(dir, "disk"), SocketDir: filepath.Join(dir, "sock"), Owner: deadOwner(t),
		Coordinator: Instance{Content: CoordinatorContent, DataDir: filepath.Join(dir, CoordinatorHost, "gpseg-1")}}
	if err := os.WriteFile(filepath.Join(dir, descriptionFile), d.JSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
