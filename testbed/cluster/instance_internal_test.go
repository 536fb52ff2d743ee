// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpotel/gpotel/internal/dialect"
)

// An instance whose server log goes through the logging collector reports
// a port another process took between freePort and its bind in the
// collector's file, not in pg_ctl's --log (which says only that output is
// redirected): start must see it there to retry on another port (a gp7
// testbed once failed to come up so, in make test).
func TestAPortTakenIsSeenInTheLoggingCollectorsFile(t *testing.T) {
	taken := `2026-11-29 00:06:23.481 UTC,,,18635,,1,,,,,,FATAL,XX000,"could not create any TCP/IP sockets",,,,,,,,,"","postmaster"` + "\n" +
		`2026-11-29 00:06:23.480 UTC,,,18635,,2,,,,,,LOG,XX000,"could not bind IPv4 address ""127.0.0.1"": Address already in use",,,,,,,,,"","postmaster"`
	for _, tc := range []struct {
		name string
		c    Cluster
		dir  func(dataDir string) string
	}{
		{"csvlog", Cluster{Description: Description{LogDestination: LogCSV}}, func(d string) string { return filepath.Join(d, "log") }},
		{"greenplum's layout", Cluster{Description: Description{LogDestination: LogGreenplumCSV, Dialect: dialect.GP7}}, func(d string) string {
			if dir := dialect.GP7.Facts().ServerLog.Directory; filepath.IsAbs(dir) {
				return dir
			}
			return filepath.Join(d, dialect.GP7.Facts().ServerLog.Directory)
		}},
	} {
		dataDir := t.TempDir()
		dir := tc.dir(dataDir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "server.csv"), []byte(taken), 0o644); err != nil {
			t.Fatal(err)
		}
		redirected := filepath.Join(dataDir, "pg_ctl.log")
		if err := os.WriteFile(redirected, []byte("LOG:  redirecting log output to logging collector process\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if tail := tc.c.startFailure(Instance{DataDir: dataDir}, redirected, 0); !portTaken(tail) {
			t.Errorf("%s: the collector's file %q not seen as a port taken", tc.name, tail)
		}
	}
	if tail := (&Cluster{Description: Description{LogDestination: LogStderr}}).collectorLogTail(Instance{DataDir: t.TempDir()}); tail != "" {
		t.Errorf("stderr logging has no collector's file, read %q", tail)
	}
}
