// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memctx

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readRecords splits and parses a whole log file.
func readRecords(t *testing.T, path string, f LogFormat) []Record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []Record
	for len(b) > 0 {
		entry, n := f.Next(b)
		if n == 0 {
			t.Fatalf("%s: %d bytes left without a complete entry", path, len(b))
		}
		r, ok := f.Parse(entry)
		if !ok {
			t.Fatalf("%s: entry %q does not parse", path, clip(string(entry)))
		}
		out = append(out, r)
		b = b[n:]
	}
	return out
}

// TestTheReaderReadsARealGreenplum6Log: two log files written by Greenplum
// 6.24.3 (a coordinator's and a segment's) read record by record: every
// record's process, a multi-line statement with quotes and commas, a
// message with a tab, and a user's record forged inside a comment that
// stays inside its statement.
func TestTheReaderReadsARealGreenplum6Log(t *testing.T) {
	coord := readRecords(t, "testdata/gp6-coordinator.csv", GreenplumCSVLog{})
	seg := readRecords(t, "testdata/gp6-seg0.csv", GreenplumCSVLog{})
	if len(coord) != 20 || len(seg) != 9 {
		t.Fatalf("%d coordinator and %d segment records, want 20 and 9", len(coord), len(seg))
	}
	pids := map[int64]int{}
	for _, r := range append(coord, seg...) {
		pids[r.PID]++
	}
	if pids[1] != 0 || pids[21373] != 7 || pids[20936] != 2 || pids[21451] != 1 {
		t.Fatalf("records per pid %v: the forged p1 must not be one; 21373 logged seven", pids)
	}
	want := map[string]bool{
		"a log line from a user: tab\there": false,
		"statement: select 1 as \"a, \"\"quoted\"\" column\",\n  'multi\nline, with ''quotes'' and , commas' as b;": false,
	}
	for _, r := range coord {
		if _, ok := want[r.Message]; ok {
			want[r.Message] = true
		}
	}
	for m, seen := range want {
		if !seen {
			t.Errorf("no record with message %q", m)
		}
	}
	last := coord[len(coord)-1]
	if last.PID != 21451 || !strings.HasPrefix(last.Message, "statement: select 1 /*\n2026-11-24") || !strings.HasSuffix(last.Message, "*/;") {
		t.Errorf("the last record should hold the forgery inside its statement: %+v", last)
	}
}

// TestTheGreenplumReaderRefusesOtherLayouts: a PostgreSQL csvlog record
// is not read as Greenplum's, nor the other way round.
func TestTheGreenplumReaderRefusesOtherLayouts(t *testing.T) {
	pg, _ := CSVLog{}.Next([]byte("2026-11-23 09:05:44.303 UTC,\"gpadmin\",\"postgres\",19547,\"[local]\",6b.4c,1,\"SELECT\",2026-11-23 09:05:44 " +
		"UTC,3/2,0,LOG,00000,\"x\",,,,,,,,,\"psql\",\"client backend\",,0\n"))
	if r, ok := (GreenplumCSVLog{}).Parse(pg); ok {
		t.Errorf("a csvlog record read as Greenplum's: %+v", r)
	}
	gp, _ := GreenplumCSVLog{}.Next([]byte("2026-11-24 05:43:00.643088 " +
		"UTC,,,p20981,th-1242572416,,,,0,,,seg-1,,,,,\"LOG\",\"00000\",\"ready\",,,,,,,0,,\"xlog.c\",6532,\n"))
	if r, ok := (CSVLog{}).Parse(gp); ok && r.PID != 0 {
		t.Errorf("a Greenplum record read as csvlog: %+v", r)
	}
}

// TestGreenplumLogNamesFollowLogFilename: the names Greenplum gives its CSV
// files, from log_filename, and nothing else in the directory.
func TestGreenplumLogNamesFollowLogFilename(t *testing.T) {
	tests := []struct {
		pattern   string
		match     []string
		dontMatch []string
	}{
		{"gpdb-%Y-%m-%d_%H%M%S.csv", []string{"gpdb-2026-11-24_054300.csv"},
			[]string{"gpdb-2026-11-24_054300.csv.csv", "gpdb-alert-2026-11-24_054300.csv", "gpdb-2026-11-24_054300.log", "x.csv"}},
		{"postgresql-%Y-%m-%d_%H%M%S.log", []string{"postgresql-2026-11-24_054300.csv"}, []string{"postgresql-2026-11-24_054300.log"}},
		{"gp-%a.log", []string{"gp-Mon.csv"}, []string{"gp-Mon.log", "gp-.csv"}},
	}
	for _, tt := range tests {
		re, err := greenplumLogName(tt.pattern)
		if err != nil {
			t.Fatalf("%q: %v", tt.pattern, err)
		}
		for _, n := range tt.match {
			if !re.MatchString(n) {
				t.Errorf("%q does not match %q", tt.pattern, n)
			}
		}
		for _, n := range tt.dontMatch {
			if re.MatchString(n) {
				t.Errorf("%q matches %q", tt.pattern, n)
			}
		}
	}
	if _, err := greenplumLogName("gpdb-%a"); err == nil || !strings.Contains(err.Error(), "log_filename") {
		t.Errorf("a pattern whose end is an escape: %v, want an error naming log_filename", err)
	}
}

// TestTheGreenplumLogIsTheNewestFileOrTheOneCurrentLogfilesNames: Greenplum
// 7 and Cloudberry name the file in current_logfiles (as stderr); Greenplum
// 6 does not, and the newest file named after log_filename is the current one.
func TestTheGreenplumLogIsTheNewestFileOrTheOneCurrentLogfilesNames(t *testing.T) {
	dataDir := t.TempDir()
	dir := filepath.Join(dataDir, "pg_log")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	name, err := greenplumLogName("gpdb-%Y-%m-%d_%H%M%S.csv")
	if err != nil {
		t.Fatal(err)
	}
	src := greenplumLog{dataDir: dataDir, dir: dir, name: name}
	base := time.Now().Add(-time.Hour)
	for i, n := range []string{"gpdb-2026-11-24_000000.csv", "gpdb-2026-11-24_010000.csv", "gpdb-2026-11-24_020000.csv.csv", "gpdb-alert-2026-11-24_030000.csv"} {
		p := filepath.Join(dir, n)
		appendTo(t, p, "x")
		mtime := base.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	current := func() string {
		t.Helper()
		f, path, err := src.Current()
		if err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		return filepath.Base(path)
	}
	if got := current(); got != "gpdb-2026-11-24_010000.csv" {
		t.Errorf("without current_logfiles: %s, want the newest Greenplum file", got)
	}
	appendTo(t, filepath.Join(dataDir, "current_logfiles"), "stderr pg_log/gpdb-2026-11-24_000000.csv\n")
	if got := current(); got != "gpdb-2026-11-24_000000.csv" {
		t.Errorf("with current_logfiles: %s, want the file it names", got)
	}
}
