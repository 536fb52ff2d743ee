// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memctx

import (
	"bytes"
	"os"
	"testing"
)

// addFixtureEntries seeds a fuzz target with every entry of a real log.
func addFixtureEntries(f *testing.F, path string, format LogFormat) {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	for len(b) > 0 {
		entry, n := format.Next(b)
		if n == 0 {
			break
		}
		f.Add(append([]byte(nil), entry...))
		b = b[n:]
	}
}

// checkEntries splits data into entries and parses each: never a panic,
// never an entry longer than the input, and a parsed block line never
// yields negative figures. Resync and Skip stay within data from any start.
func checkEntries(t *testing.T, format LogFormat, data []byte) {
	if n, _ := format.Resync(data, testMark); n < 0 || n > len(data) {
		t.Fatalf("Resync took %d of %d bytes", n, len(data))
	}
	quoted := false
	if n, _ := format.Skip(data, &quoted); n < 0 || n > len(data) {
		t.Fatalf("Skip took %d of %d bytes", n, len(data))
	}
	rest := data
	for len(rest) > 0 {
		entry, n := format.Next(rest)
		if n == 0 {
			break
		}
		if n > len(rest) || len(entry) > n {
			t.Fatalf("Next took %d of %d bytes for an entry of %d", n, len(rest), len(entry))
		}
		if r, ok := format.Parse(entry); ok {
			if l, ok, err := ParseMessage(r.Message); ok && err == nil {
				if l.TotalBytes < 0 || l.FreeBytes < 0 || l.UsedBytes < 0 || l.Level < 0 || l.Children < 0 {
					t.Fatalf("negative figures from %q: %+v", r.Message, l)
				}
			}
		}
		rest = rest[n:]
	}
}

func FuzzJSONLog(f *testing.F) {
	addFixtureEntries(f, "testdata/pg15.json", JSONLog{})
	f.Add([]byte(`{"pid":1,"message":"level: 0; X: 1 total in 1 blocks; 0 free (0 chunks); 1 used"}` + "\n{\"pid\":"))
	f.Fuzz(func(t *testing.T, data []byte) { checkEntries(t, JSONLog{}, data) })
}

func FuzzCSVLog(f *testing.F) {
	addFixtureEntries(f, "testdata/pg15.csv", CSVLog{})
	f.Add([]byte("a,b,c,1,e,f,g,h,i,j,k,LOG,0,\"x\ny\"\"z\",,\n\"unterminated"))
	f.Fuzz(func(t *testing.T, data []byte) { checkEntries(t, CSVLog{}, data) })
}

func FuzzGreenplumCSVLog(f *testing.F) {
	for _, path := range []string{"testdata/gp6-coordinator.csv", "testdata/gp6-seg0.csv", "testdata/pg15-gplayout.csv"} {
		addFixtureEntries(f, path, GreenplumCSVLog{})
	}
	f.Add([]byte("2026-11-24 05:43:00.643088 UTC,,,p1,th-1,,,,0,,,seg-1,,,,,\"LOG\",\"00000\",\"x\n" + testMark + "\",,,,,,,0,,\"a.c\",1,\n\"open"))
	f.Fuzz(func(t *testing.T, data []byte) { checkEntries(t, GreenplumCSVLog{}, data) })
}

func FuzzStderrLog(f *testing.F) {
	b, err := os.ReadFile("testdata/pg15.log")
	if err != nil {
		f.Fatal(err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		f.Add("%m [%p] %q%u@%d ", line)
	}
	f.Add("%t:[%-8p]:%r:%u@%d:", []byte("2026-11-23 09:05:44 UTC:[19547   ]:[local]:gp@db:LOG:  level: 1; y"))
	f.Add("%%p %p%", []byte("%p 12% LOG:  z"))
	f.Fuzz(func(t *testing.T, prefix string, line []byte) {
		format, err := NewStderrLog(prefix)
		if err != nil {
			return
		}
		checkEntries(t, format, append(line, '\n'))
	})
}

func FuzzParseMessage(f *testing.F) {
	for _, m := range []string{
		"logging memory contexts of PID 4242",
		"level: 2; index info: 2048 total in 2 blocks; 496 free (1 chunks); 1552 used: pg_db_role_setting_databaseid_rol_index",
		"level: 2; Change: 8192 total in 1 blocks; 2 empty blocks; 8000 free (50 chunks); 192 used",
		"level: 1; 4 more child contexts containing 8192 total in 4 blocks; 3456 free (3 chunks); 4736 used",
		"Grand total: 1649824 bytes in 181 blocks; 614208 free (80 chunks); 1035616 used",
	} {
		f.Add(m)
	}
	f.Fuzz(func(_ *testing.T, msg string) {
		l, ok, err := ParseMessage(msg)
		if !ok || err != nil {
			return
		}
		var b blockBuilder
		_ = b.add(Line{Kind: LineContext, Name: "TopMemoryContext"})
		_ = b.add(l) // any parsed line is accepted or refused, never a panic
	})
}
