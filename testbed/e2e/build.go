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

// Build brings build/ up to date: ocb runs when its manifest changed or its
// output is missing (minutes); otherwise the generated collector is only
// relinked against the current component sources (seconds).
func Build(ctx context.Context, root string) (Binaries, error) {
	b := Binaries{
		Collector: filepath.Join(root, "build", "otelcol-gpotel"),
		Agent:     filepath.Join(root, "build", "gpotel-agent"),
	}
	relinked := !collectorSourcesStale(root) &&
		run(ctx, filepath.Join(root, "build"), "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", b.Collector, ".") == nil
	// A component that gained a dependency needs ocb's module resolution again.
	if !relinked {
		if err := run(ctx, root, "make", "collector"); err != nil {
			return b, err
		}
	}
	if err := run(ctx, root, "go", "build", "-o", b.Agent, "./cmd/gpotel-agent"); err != nil {
		return b, err
	}
	return b, nil
}

// collectorSourcesStale says whether ocb must generate build/ again.
func collectorSourcesStale(root string) bool {
	manifest, err := os.Stat(filepath.Join(root, "builder-config.yaml"))
	if err != nil {
		return true
	}
	generated, err := os.Stat(filepath.Join(root, "build", "components.go"))
	if err != nil {
		return true
	}
	if _, err := os.Stat(filepath.Join(root, "build", "go.mod")); err != nil {
		return true
	}
	return manifest.ModTime().After(generated.ModTime())
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
