// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memctx

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParseMessageReadsEveryLineShape(t *testing.T) {
	tests := []struct {
		name string
		msg  string
		want Line
	}{
		{"start", "logging memory contexts of PID 4242", Line{Kind: LineStart, PID: 4242}},
		{"allocset", "level: 1; CacheMemoryContext: 524288 total in 7 blocks; 8120 free (0 chunks); 516168 used",
			Line{Kind: LineContext, Level: 1, Name: "CacheMemoryContext", Counters: Counters{524288, 7, 8120, 0, 516168}}},
		{"ident", "level: 2; index info: 2048 total in 2 blocks; 496 free (1 chunks); 1552 used: pg_db_role_setting_databaseid_rol_index",
			Line{Kind: LineContext, Level: 2, Name: "index info", Ident: "pg_db_role_setting_databaseid_rol_index", Counters: Counters{2048, 2, 496, 1, 1552}}},
		{"ident with colons", "level: 3; CachedPlanSource: 4096 total in 3 blocks; 1496 free (0 chunks); 2600 used: SELECT a::text: x",
			Line{Kind: LineContext, Level: 3, Name: "CachedPlanSource", Ident: "SELECT a::text: x", Counters: Counters{4096, 3, 1496, 0, 2600}}},
		{"generation", "level: 2; ReorderBufferByXid: 8192 total in 1 blocks (12 chunks); 1000 free (3 chunks); 7192 used",
			Line{Kind: LineContext, Level: 2, Name: "ReorderBufferByXid", Counters: Counters{8192, 1, 1000, 3, 7192}}},
		{"slab", "level: 2; Change: 8192 total in 1 blocks; 2 empty blocks; 8000 free (50 chunks); 192 used",
			Line{Kind: LineContext, Level: 2, Name: "Change", Counters: Counters{8192, 1, 8000, 50, 192}}},
		{"more children", "level: 1; 4 more child contexts containing 8192 total in 4 blocks; 3456 free (3 chunks); 4736 used",
			Line{Kind: LineMoreChildren, Level: 1, Children: 4, Counters: Counters{8192, 4, 3456, 3, 4736}}},
		{"grand total", "Grand total: 1649824 bytes in 181 blocks; 614208 free (80 chunks); 1035616 used",
			Line{Kind: LineGrandTotal, Counters: Counters{1649824, 181, 614208, 80, 1035616}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := ParseMessage(tt.msg)
			if !ok || err != nil {
				t.Fatalf("ok %v, err %v", ok, err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseMessageTellsForeignFromBroken(t *testing.T) {
	if _, ok, err := ParseMessage("database system is ready to accept connections"); ok || err != nil {
		t.Fatalf("a foreign message: ok %v err %v, want ignored", ok, err)
	}
	for _, msg := range []string{
		"level: x; TopMemoryContext: 1 total in 1 blocks; 0 free (0 chunks); 1 used",
		"level: 1; TopMemoryContext: lots",
		"level: 1; X: 99999999999999999999 total in 1 blocks; 0 free (0 chunks); 1 used",
		"Grand total: many",
	} {
		if _, ok, err := ParseMessage(msg); !ok || err == nil {
			t.Errorf("%q: ok %v err %v, want an error", msg, ok, err)
		}
	}
}

// readFixture feeds a real PostgreSQL 15 log through a format and collects pid's block.
func readFixture(t *testing.T, path string, f LogFormat, pid int64) *blockBuilder {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bc := &blockCollector{pid: pid}
	for len(b) > 0 {
		entry, n := f.Next(b)
		if n == 0 {
			t.Fatalf("%s: %d bytes left without a complete entry", path, len(b))
		}
		if r, ok := f.Parse(entry); ok {
			bc.add(r)
		}
		b = b[n:]
	}
	if bc.err != nil || !bc.complete() {
		t.Fatalf("%s: block of pid %d: err %v, complete %v", path, pid, bc.err, bc.complete())
	}
	return bc.block
}

func TestEveryLogFormatGivesTheSameBlock(t *testing.T) {
	stderr, err := NewStderrLog("%m [%p] %q%u@%d ")
	if err != nil {
		t.Fatal(err)
	}
	const pid = 19547 // the fixtures' backend that logged its contexts
	blocks := map[string]*blockBuilder{
		"jsonlog": readFixture(t, "testdata/pg15.json", JSONLog{}, pid),
		"csvlog":  readFixture(t, "testdata/pg15.csv", CSVLog{}, pid),
		"stderr":  readFixture(t, "testdata/pg15.log", stderr, pid),
		// pg15.csv in Greenplum's layout, as the testbed's converter writes it.
		"gpcsv": readFixture(t, "testdata/pg15-gplayout.csv", GreenplumCSVLog{}, pid),
	}
	ref := blocks["jsonlog"]
	if len(ref.contexts) != 110 {
		t.Fatalf("jsonlog: %d contexts, want the 110 level lines of the fixture", len(ref.contexts))
	}
	if ref.grand != (Counters{1649824, 181, 614208, 80, 1035616}) {
		t.Fatalf("grand total %+v", ref.grand)
	}
	var sum Counters
	for _, c := range ref.contexts {
		sum.add(c.Counters)
	}
	if sum.TotalBytes != ref.grand.TotalBytes || sum.FreeBytes != ref.grand.FreeBytes {
		t.Fatalf("contexts sum to %d total / %d free, the server's grand total says %d / %d",
			sum.TotalBytes, sum.FreeBytes, ref.grand.TotalBytes, ref.grand.FreeBytes)
	}
	for name, b := range blocks {
		if len(b.contexts) != len(ref.contexts) || b.grand != ref.grand {
			t.Fatalf("%s: %d contexts, grand %+v; jsonlog: %d, %+v", name, len(b.contexts), b.grand, len(ref.contexts), ref.grand)
		}
		for i := range b.contexts {
			if b.contexts[i].Name != ref.contexts[i].Name || pathOf(b.contexts, i) != pathOf(ref.contexts, i) ||
				b.contexts[i].Counters != ref.contexts[i].Counters || b.contexts[i].Ident != ref.contexts[i].Ident {
				t.Fatalf("%s row %d = %+v, jsonlog %+v", name, i, b.contexts[i], ref.contexts[i])
			}
		}
	}
	// The fixture's PortalContext (level 2 in the log) sits under TopPortalContext.
	for i, c := range ref.contexts {
		if c.Name == "ExecutorState" {
			if got := pathOf(ref.contexts, i); got != "TopMemoryContext/TopPortalContext/PortalContext" || c.Level != 4 {
				t.Fatalf("ExecutorState: level %d path %s", c.Level, got)
			}
		}
	}
}

// pathOf names the ancestors of context i, root first, joined by "/".
func pathOf(cs []Context, i int) string {
	var names []string
	for p := cs[i].Parent; p >= 0; p = cs[p].Parent {
		names = append([]string{cs[p].Name}, names...)
	}
	return strings.Join(names, "/")
}

func linesOf(t *testing.T, msgs ...string) []Line {
	t.Helper()
	out := make([]Line, len(msgs))
	for i, m := range msgs {
		l, ok, err := ParseMessage(m)
		if !ok || err != nil {
			t.Fatalf("%q: %v %v", m, ok, err)
		}
		out[i] = l
	}
	return out
}

const stats = ": 100 total in 1 blocks; 10 free (1 chunks); 90 used"

func TestPathsFollowTheDepthFirstOrderAndMoreChildrenBelongToTheParent(t *testing.T) {
	var b blockBuilder
	for _, l := range linesOf(t,
		"level: 0; TopMemoryContext"+stats,
		"level: 1; A"+stats,
		"level: 2; A1"+stats,
		"level: 1; 7 more child contexts containing 700 total in 7 blocks; 70 free (7 chunks); 630 used",
		"level: 1; B"+stats,
		"level: 0; 3 more child contexts containing 300 total in 3 blocks; 30 free (3 chunks); 270 used",
		"Grand total: 1400 bytes in 14 blocks; 140 free (14 chunks); 1260 used",
	) {
		if err := b.add(l); err != nil {
			t.Fatal(err)
		}
	}
	want := []struct {
		name  string
		level int
		path  string
		agg   int
	}{
		{"TopMemoryContext", 1, "", 0}, {"A", 2, "TopMemoryContext", 0}, {"A1", 3, "TopMemoryContext/A", 0},
		{MoreChildrenName, 3, "TopMemoryContext/A", 7}, {"B", 2, "TopMemoryContext", 0}, {MoreChildrenName, 2, "TopMemoryContext", 3},
	}
	if len(b.contexts) != len(want) || !b.done {
		t.Fatalf("%d rows, done %v", len(b.contexts), b.done)
	}
	for i, w := range want {
		c := b.contexts[i]
		if c.Name != w.name || c.Level != w.level || pathOf(b.contexts, i) != w.path || c.Aggregated != w.agg {
			t.Errorf("row %d = %s level %d path %q agg %d, want %+v", i, c.Name, c.Level, pathOf(b.contexts, i), c.Aggregated, w)
		}
	}
	sum := Summarize(b.contexts)
	if len(sum) != 4 || sum[1].Name != "A" || sum[1].TotalBytes != 100+100+700 || sum[1].Aggregated != 1+1+7 || sum[2].Name != "B" || sum[2].Aggregated != 0 {
		t.Fatalf("summary %+v", sum)
	}
}

func TestServerLevelsFromOneAreTheSameTree(t *testing.T) {
	// PostgreSQL 17+ logs TopMemoryContext at level 1.
	var b blockBuilder
	for _, l := range linesOf(t, "level: 1; TopMemoryContext"+stats, "level: 2; A"+stats, "level: 3; A1"+stats) {
		if err := b.add(l); err != nil {
			t.Fatal(err)
		}
	}
	if b.contexts[2].Level != 3 || pathOf(b.contexts, 2) != "TopMemoryContext/A" {
		t.Fatalf("%+v", b.contexts[2])
	}
}

func TestABlockWithAGapInItsLevelsIsAnError(t *testing.T) {
	var b blockBuilder
	ls := linesOf(t, "level: 0; TopMemoryContext"+stats, "level: 2; Orphan"+stats)
	if err := b.add(ls[0]); err != nil {
		t.Fatal(err)
	}
	if err := b.add(ls[1]); err == nil {
		t.Fatal("a context two levels below its predecessor was accepted")
	}
}

func TestALaterBlockStartReplacesAnUnfinishedOne(t *testing.T) {
	bc := &blockCollector{pid: 7}
	for _, m := range []string{
		"level: 0; TopMemoryContext" + stats, "level: 1; Old" + stats,
		"logging memory contexts of PID 7", "level: 0; TopMemoryContext" + stats, "level: 1; New" + stats,
		"Grand total: 200 bytes in 2 blocks; 20 free (2 chunks); 180 used",
	} {
		bc.add(Record{PID: 7, Message: m})
		bc.add(Record{PID: 8, Message: "level: 5; Elsewhere" + stats}) // another backend's line in between
	}
	if bc.err != nil || !bc.complete() || len(bc.block.contexts) != 2 || bc.block.contexts[1].Name != "New" {
		t.Fatalf("err %v, block %+v", bc.err, bc.block)
	}
}

func TestCSVRecordsMaySpanLines(t *testing.T) {
	log := "2026-11-23 09:05:44.303 UTC,\"gpadmin\",\"postgres\",42,\"[local]\",6b.4c,1,\"SELECT\",2026-11-23 09:05:44 " +
		"UTC,3/2,0,LOG,00000,\"two\nlines \"\"quoted\"\"\",,,,,,,,,\"psql\",\"client backend\",,0\n" +
		"2026-11-23 09:05:44.303 UTC,,,43,,6b.4d,1,,2026-11-23 09:05:44 UTC,,0,LOG,00000,\"level: 0; TopMemoryContext" + stats +
		"\",,,,,,,,,\"\",\"client backend\",,0\n"
	var got []Record
	b := []byte(log)
	for {
		entry, n := CSVLog{}.Next(b)
		if n == 0 {
			break
		}
		if r, ok := (CSVLog{}).Parse(entry); ok {
			got = append(got, r)
		}
		b = b[n:]
	}
	if len(got) != 2 || got[0].PID != 42 || got[0].Message != "two\nlines \"quoted\"" || got[1].PID != 43 {
		t.Fatalf("%+v", got)
	}
}

func TestStderrPrefixes(t *testing.T) {
	tests := []struct {
		prefix, line string
		pid          int64
		msg          string
	}{
		{"%m [%p] ", "2026-11-23 09:05:44.303 UTC [19547] LOG:  level: 0; x", 19547, "level: 0; x"},
		{"%m [%p] %q%u@%d ", "2026-11-23 09:05:43.880 UTC [19534] LOG:  starting", 19534, "starting"},
		{"%m [%p] %q%u@%d ", "2026-11-23 09:05:44.303 UTC [19547] gpadmin@postgres LOG:  Grand total: 1", 19547, "Grand total: 1"},
		{"%t:[%-8p]:%r:%u@%d:", "2026-11-23 09:05:44 UTC:[19547   ]:[local]:gp@db:LOG:  level: 1; y", 19547, "level: 1; y"},
		{"%p ", "77 FATAL:  nope", 77, "nope"},
		{"<%p %a> ", "<55 my app: x> LOG:  z", 55, "z"},
		{"%n %l %c %v %x %e %b [%p] ", "1795246391.303 3 6b0401e8.4c5b 3/2 0 00000 client backend [19547] LOG:  z", 19547, "z"},
	}
	for _, tt := range tests {
		f, err := NewStderrLog(tt.prefix)
		if err != nil {
			t.Fatalf("%q: %v", tt.prefix, err)
		}
		r, ok := f.Parse([]byte(tt.line))
		if !ok || r.PID != tt.pid || r.Message != tt.msg {
			t.Errorf("prefix %q line %q: ok %v %+v, want pid %d msg %q", tt.prefix, tt.line, ok, r, tt.pid, tt.msg)
		}
	}
	if _, ok := mustStderr(t, "%m [%p] ").Parse([]byte("\tcontinuation of a statement")); ok {
		t.Error("a continuation line was read as an entry")
	}
}

func mustStderr(t *testing.T, prefix string) *StderrLog {
	t.Helper()
	f, err := NewStderrLog(prefix)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestAPrefixWithoutPIDIsAClearError(t *testing.T) {
	_, err := NewStderrLog("%m [%c] %u@%d ")
	if !errors.Is(err, ErrPrefixWithoutPID) || !strings.Contains(err.Error(), "%p") {
		t.Fatalf("got %v", err)
	}
}
