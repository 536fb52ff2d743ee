// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/testbed/cluster"
)

func TestUpStatusDownRoundTrip(t *testing.T) {
	parent, err := os.MkdirTemp("", "gpotel-testbed-cli-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "tb")
	ctx := context.Background()
	if err := runUp(ctx, []string{"--dir", dir, "--dialect", "gp6", "--hosts", "1", "--segments-per-host", "1"}); err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Down(context.Background()) })
	if len(c.Segments) != 1 || c.Dialect != dialect.GP6 || c.Owner != nil {
		t.Errorf("description: %d segments, dialect %s, owner %v", len(c.Segments), c.Dialect, c.Owner)
	}
	if err := runStatus(ctx, []string{"--dir", dir}); err != nil {
		t.Errorf("status of a running cluster: %v", err)
	}
	if err := runUp(ctx, []string{"--dir", dir}); err == nil {
		t.Error("up over a running cluster: no error")
	}
	if err := runDown(ctx, []string{"--dir", dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after down", dir)
	}
	if err := runDown(ctx, []string{"--dir", dir}); err != nil {
		t.Errorf("second down: %v", err)
	}
	if err := runStatus(ctx, []string{"--dir", dir}); err == nil {
		t.Error("status without a cluster: no error")
	}
}

func TestUnknownDialectIsRejected(t *testing.T) {
	if err := runUp(context.Background(), []string{"--dialect", "oracle"}); err == nil {
		t.Error("no error for dialect oracle")
	}
}

// The demo's rules write their firings into the history: without it they
// are refused before anything starts.
func TestDemoRulesNeedTheHistory(t *testing.T) {
	if err := runDemo(context.Background(), []string{"--rules"}); err == nil || !strings.Contains(err.Error(), "--history") {
		t.Errorf("demo --rules without --history: %v, want an error naming --history", err)
	}
}

func TestSubcommandsNeedDir(t *testing.T) {
	ctx := context.Background()
	for name, run := range map[string]func(context.Context, []string) error{"down": runDown, "status": runStatus, "psql": runPsql} {
		if err := run(ctx, nil); err == nil || err.Error() != "--dir is required" {
			t.Errorf("%s without --dir: %v, want --dir is required", name, err)
		}
	}
}

func TestDownRefusesAnUnreadableDescription(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cluster.json"), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runDown(context.Background(), []string{"--dir", dir}); err == nil {
		t.Error("down over a corrupt cluster.json: no error, as if there were no testbed")
	}
}
