// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// RepoRoot walks up from the working directory to gpotel's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/gpotel/gpotel\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the gpotel module")
		}
		dir = parent
	}
}

// Binaries are the programs an end-to-end run starts.
type Binaries struct {
	Collector string // build/otelcol-gpotel, made by ocb
	Agent     string // build/gpotel-agent
}

// Build runs `make collector` (ocb when its manifest changed, else a relink
// against the current component sources) and builds the agent.
func Build(ctx context.Context, root string) (Binaries, error) {
	b := Binaries{
		Collector: filepath.Join(root, "build", "otelcol-gpotel"),
		Agent:     filepath.Join(root, "build", "gpotel-agent"),
	}
	if err := run(ctx, root, "make", "collector"); err != nil {
		return b, err
	}
	if err := run(ctx, root, "go", "build", "-o", b.Agent, "./cmd/gpotel-agent"); err != nil {
		return b, err
	}
	return b, nil
}

func run(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %v in %s: %w\n%s", name, args, dir, err, tail(out.String(), 4000))
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
