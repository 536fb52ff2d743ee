// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed" // the title extension's source
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// titleExtensionSource is the server extension that gives the Greenplum
// dialects' backends Greenplum's process titles (con<N> [seg<k>] cmd<M>),
// testbed/README.md "Query identity".
//
//go:embed pgext/gpotel_testbed_title.c
var titleExtensionSource []byte

// DispatchCommandCountSetting is the setting a testbed dispatcher sets on a
// segment backend before each statement it dispatches there: the command
// count the executor shows, as Greenplum's dispatcher sends its own with
// each statement. Emulation only; no Greenplum has it.
const DispatchCommandCountSetting = "gpotel_testbed.dispatch_command_count"

// CommandCountSetting reports a coordinator backend's command count to its
// client (a GUC_REPORT parameter status after every statement), which the
// testbed's dispatchers read. Emulation only.
const CommandCountSetting = "gpotel_testbed.command_count"

// ErrNoCompiler says the title extension cannot be built.
var ErrNoCompiler = errors.New("the Greenplum dialects need a C compiler and PostgreSQL's server headers " +
	"to build the testbed's title extension (run `make testbed-deps`: gcc, postgresql-server-dev-15)")

// buildTitleExtension compiles the title extension for the server in
// c.PGBinDir into the testbed cache (outside the source tree) once per
// source and server build, and returns the library's absolute path.
func (c *Cluster) buildTitleExtension(ctx context.Context) (string, error) {
	pgConfig := filepath.Join(c.PGBinDir, "pg_config")
	if !isExecutable(pgConfig) {
		p, err := exec.LookPath("pg_config")
		if err != nil {
			return "", fmt.Errorf("no pg_config beside %s or on PATH: %w", c.PGBinDir, ErrNoCompiler)
		}
		pgConfig = p
	}
	out, err := exec.CommandContext(ctx, pgConfig, "--includedir-server", "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w", pgConfig, err)
	}
	includeDir, pgVersion, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if _, err := os.Stat(filepath.Join(includeDir, "postgres.h")); err != nil {
		return "", fmt.Errorf("no postgres.h in %s: %w", includeDir, ErrNoCompiler)
	}
	compiler, err := exec.LookPath("cc")
	if err != nil {
		return "", fmt.Errorf("no cc on PATH: %w", ErrNoCompiler)
	}
	server, err := exec.CommandContext(ctx, filepath.Join(c.PGBinDir, "postgres"), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("postgres --version: %w", err)
	}
	if !strings.Contains(string(server), strings.TrimPrefix(pgVersion, "PostgreSQL ")) {
		return "", fmt.Errorf("the server headers in %s are of %s, the server is %s: %w",
			includeDir, pgVersion, strings.TrimSpace(string(server)), ErrNoCompiler)
	}
	sum := sha256.Sum256(bytes.Join([][]byte{titleExtensionSource, []byte(includeDir), server}, []byte{0}))
	cacheRoot := filepath.Join(os.TempDir(), fmt.Sprintf("gpotel-testbed-cache-%d", c.account.uid))
	lib := filepath.Join(cacheRoot, "gpotel_testbed_title-"+hex.EncodeToString(sum[:8])+".so")
	if _, err := os.Stat(lib); err == nil {
		return lib, nil
	}
	if err := os.MkdirAll(cacheRoot, 0o755); err != nil {
		return "", err
	}
	build, err := os.MkdirTemp(cacheRoot, "pgext-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(build) }()
	src := filepath.Join(build, "gpotel_testbed_title.c")
	if err := os.WriteFile(src, titleExtensionSource, 0o644); err != nil {
		return "", err
	}
	obj := filepath.Join(build, "gpotel_testbed_title.so")
	cmd := exec.CommandContext(ctx, compiler, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-I"+includeDir, "-o", obj, src)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the title extension: %w: %s", err, bytes.TrimSpace(msg))
	}
	if err := os.Chmod(obj, 0o755); err != nil {
		return "", err
	}
	// Rename: a concurrent Up finds either no library or a whole one.
	if err := os.Rename(obj, lib); err != nil {
		return "", err
	}
	return lib, nil
}
