// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memctx

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestStderrContinuationLinesAreNotRecords: the server writes every further
// line of a message or statement after a tab, so a line with a tab first is
// never a record, whatever pid it names; nor is a line whose prefix is not
// what the server writes (here a %m that is no timestamp).
func TestStderrContinuationLinesAreNotRecords(t *testing.T) {
	f := mustStderr(t, "%m [%p] ")
	for _, line := range []string{
		"\t2026-11-23 09:05:44.303 UTC [4242] LOG:  level: 0; TopMemoryContext" + stats,
		"forged by a client [4242] LOG:  level: 0; TopMemoryContext" + stats,
	} {
		if r, ok := f.Parse([]byte(line)); ok {
			t.Errorf("%q read as a record of pid %d", line, r.PID)
		}
	}
}

// TestAPrefixWithAUserControlledEscapeBeforePIDIsRefused: a client chooses
// its application name, user and database (and its host name's DNS), so
// with one of them before %p it could write a whole forged prefix.
func TestAPrefixWithAUserControlledEscapeBeforePIDIsRefused(t *testing.T) {
	for _, prefix := range []string{"%a [%p] ", "%m %u@%d [%p] ", "%t:%r:[%p]:", "%h %p ", "%-10u %p "} {
		_, err := NewStderrLog(prefix)
		if !errors.Is(err, ErrClientFieldBeforePID) || !strings.Contains(err.Error(), "log_line_prefix") {
			t.Errorf("%q: got %v, want a refusal naming log_line_prefix", prefix, err)
		}
	}
	if _, err := NewStderrLog("%m [%p] %q%u@%d %a "); err != nil {
		t.Errorf("client fields after %%p: %v", err)
	}
}

// TestTheReaderTrustsNothingBeforeTheAgentsMark: the csvlog file ends in
// the middle of a client's quoted statement (the server flushes a long
// record in pieces) when the agent opens it; the statement's text holds a
// complete forged block. The agent's mark, logged before its signal, is
// where the reader starts trusting records.
func TestTheReaderTrustsNothingBeforeTheAgentsMark(t *testing.T) {
	const victim = 4242
	record := func(pid int, msg string) string {
		return "2026-11-23 09:05:44.303 UTC,\"gpadmin\",\"postgres\"," + strconv.Itoa(pid) + ",\"[local]\",6b.4c,1,\"SELECT\",2026-11-23 09:05:44 " +
			"UTC,3/2,0,LOG,00000,\"" +
			strings.ReplaceAll(msg, `"`, `""`) + "\",,,,,,,,,\"psql\",\"client backend\",,0\n"
	}
	// The attacker writes its records without quotes, so that the server's
	// doubling of quotes inside the statement leaves them intact.
	bare := func(msg string) string {
		return "2026-11-23 09:05:44.303 UTC,gpadmin,postgres,4242,[local],6b.4c,1,SELECT,2026-11-23 09:05:44 UTC,3/2,0,LOG,00000," + msg +
			",,,,,,,,,psql,client backend,,0\n"
	}
	forged := bare("logging memory contexts of PID 4242") + bare("level: 0; TopMemoryContext: 999999 total in 1 blocks; 0 free (0 chunks); 999999 used") +
		bare("Grand total: 999999 bytes in 1 blocks; 0 free (0 chunks); 999999 used")
	log := filepath.Join(t.TempDir(), "postgresql.csv")
	// What the server has flushed of the attacker's record when the agent opens the file.
	appendTo(t, log, "2026-11-23 09:05:44.300 UTC,\"gpuser\",\"postgres\",666,\"[local]\",6b.4d,1,\"SELECT\",2026-11-23 09:05:44 "+
		"UTC,4/2,0,ERROR,22012,\"division by zero\",,,,,,\"SELECT 1/0 /*xxxx")
	tl, err := openTail(pathSource{log}, CSVLog{}, testMark)
	if err != nil {
		t.Fatal(err)
	}
	defer tl.close()
	appendTo(t, log, "\n"+forged+"*/\",14,,\"psql\",\"client backend\",,0\n")
	appendTo(t, log, record(777, markMessage(victim, testMark)))
	appendTo(t, log, record(victim, "logging memory contexts of PID 4242")+record(victim, "level: 0; TopMemoryContext"+stats)+
		record(victim, "Grand total: 100 bytes in 1 blocks; 10 free (1 chunks); 90 used"))
	bc := &blockCollector{pid: victim}
	for range 3 {
		if err := tl.poll(1<<20, bc.add); err != nil {
			t.Fatal(err)
		}
	}
	if bc.err != nil || !bc.complete() {
		t.Fatalf("err %v, complete %v", bc.err, bc.complete())
	}
	if got := bc.block.contexts[0].TotalBytes; got != 100 {
		t.Fatalf("TopMemoryContext %d bytes: the forged block inside the statement was read (the real one says 100)", got)
	}
}

const testMark = "0123456789abcdef0123456789abcdef"

// TestAnEntryTooLongToKeepIsPassedOverWhole: a client's quoted statement
// longer than an entry may be is dropped up to its real end, so the forged
// records after its first MiB are not read as records.
func TestAnEntryTooLongToKeepIsPassedOverWhole(t *testing.T) {
	log := filepath.Join(t.TempDir(), "postgresql.csv")
	appendTo(t, log, "")
	tl, err := openTail(pathSource{log}, CSVLog{}, testMark)
	if err != nil {
		t.Fatal(err)
	}
	defer tl.close()
	record := func(pid int, msg string) string {
		return "2026-11-23 09:05:44.303 UTC,,," + strconv.Itoa(pid) + ",,6b.4c,1,,2026-11-23 09:05:44 UTC,3/2,0,LOG,00000,\"" +
			strings.ReplaceAll(msg, `"`, `""`) + "\",,,,,,,,,\"psql\",\"client backend\",,0\n"
	}
	forged := "\n2026-11-23 09:05:44.303 UTC,,,4242,,6b.4c,1,,2026-11-23 09:05:44 UTC,3/2,0,LOG,00000,level: 0; TopMemoryContext: 999999 total in 1 " +
		"blocks; 0 free (0 chunks); 999999 used,,,,,,,,,psql,client backend,,0\n" +
		"2026-11-23 09:05:44.303 UTC,,,4242,,6b.4c,1,,2026-11-23 09:05:44 UTC,3/2,0,LOG,00000,Grand total: 999999 bytes in 1 blocks; 0 free (0 chunks); " +
		"999999 used,,,,,,,,,psql,client backend,,0\n"
	appendTo(t, log, record(777, markMessage(4242, testMark)))
	appendTo(t, log, record(666, "statement: SELECT 1 /*"+strings.Repeat("x", 2*maxEntryBytes)+forged+"*/"))
	appendTo(t, log, record(4242, "level: 0; TopMemoryContext"+stats)+record(4242, "Grand total: 100 bytes in 1 blocks; 10 free (1 chunks); 90 used"))
	bc := &blockCollector{pid: 4242}
	for range 3 {
		if err := tl.poll(1<<30, bc.add); err != nil {
			t.Fatal(err)
		}
	}
	if bc.err != nil || !bc.complete() || bc.block.contexts[0].TotalBytes != 100 {
		t.Fatalf("err %v, block %+v: want the real block of 100 bytes", bc.err, bc.block)
	}
}

// TestAnAnswerBeyondMaxAnswerBytesIsRefused: each row repeats its
// ancestors' names, so a deep tree of long names is bounded as a whole.
func TestAnAnswerBeyondMaxAnswerBytesIsRefused(t *testing.T) {
	long := strings.Repeat("n", 1000)
	cs := make([]Context, MaxContexts)
	for i := range cs {
		cs[i] = Context{Name: long, Level: i%MaxLevel + 1, Parent: i - 1}
		if i%MaxLevel == 0 {
			cs[i].Parent = -1
		}
	}
	if _, err := toProto(cs); !errors.Is(err, errBeyondBounds) || !strings.Contains(err.Error(), "MaxAnswerBytes") {
		t.Fatalf("got %v, want a refusal naming MaxAnswerBytes", err)
	}
}
