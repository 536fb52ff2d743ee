// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memctx

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// pathSource is a log whose current file is whatever path names now.
type pathSource struct{ path string }

func (p pathSource) Current() (*os.File, string, error) {
	f, err := os.Open(p.path)
	return f, p.path, err
}

func appendTo(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func jsonEntry(pid int, msg string) string {
	return fmt.Sprintf("{\"pid\":%d,\"message\":%q}\n", pid, msg)
}

// markEntry is the agent's mark as the server logs it in jsonlog.
var markEntry = jsonEntry(2, markMessage(1, testMark))

func TestTailStartsAtTheEndAndFollowsRotation(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "current.json")
	appendTo(t, log, jsonEntry(1, "before the request"))
	tl, err := openTail(pathSource{log}, JSONLog{}, testMark)
	if err != nil {
		t.Fatal(err)
	}
	defer tl.close()
	var got []string
	collect := func(r Record) { got = append(got, r.Message) }

	appendTo(t, log, markEntry+jsonEntry(1, "a")+`{"pid":1,"mess`) // an entry still being written
	if err := tl.poll(1<<20, collect); err != nil {
		t.Fatal(err)
	}
	appendTo(t, log, `age":"b"}`+"\n")
	// Rotation: the server renames nothing but starts a new file; here the
	// old one moves aside and a new one takes the name.
	if err := os.Rename(log, filepath.Join(dir, "old.json")); err != nil {
		t.Fatal(err)
	}
	appendTo(t, log, jsonEntry(1, "c"))
	for range 3 {
		if err := tl.poll(1<<20, collect); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(got) != "[a b c]" {
		t.Fatalf("read %q, want [a b c]: the entry before the request left out, the half entry completed, the new file followed", got)
	}
}

func TestTailRestartsAFileTruncatedInPlace(t *testing.T) {
	log := filepath.Join(t.TempDir(), "current.json")
	appendTo(t, log, jsonEntry(1, "old old old old old"))
	tl, err := openTail(pathSource{log}, JSONLog{}, testMark)
	if err != nil {
		t.Fatal(err)
	}
	defer tl.close()
	if err := os.Truncate(log, 0); err != nil {
		t.Fatal(err)
	}
	appendTo(t, log, markEntry+jsonEntry(1, "new"))
	var got []string
	for range 3 {
		if err := tl.poll(1<<20, func(r Record) { got = append(got, r.Message) }); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(got) != "[new]" {
		t.Fatalf("read %q after truncation, want [new]", got)
	}
}

func TestTailStopsAtItsReadLimit(t *testing.T) {
	log := filepath.Join(t.TempDir(), "current.json")
	appendTo(t, log, "")
	tl, err := openTail(pathSource{log}, JSONLog{}, testMark)
	if err != nil {
		t.Fatal(err)
	}
	defer tl.close()
	appendTo(t, log, markEntry)
	for i := range 100 {
		appendTo(t, log, jsonEntry(i, "noise noise noise"))
	}
	if err := tl.poll(1000, func(Record) {}); err != errReadLimit {
		t.Fatalf("got %v, want the read limit", err)
	}
}
