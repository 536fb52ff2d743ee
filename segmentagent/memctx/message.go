// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memctx

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// LineKind tells the messages of one pg_log_backend_memory_contexts block apart.
type LineKind int

// The messages a backend writes when asked to log its memory contexts.
const (
	// LineStart is "logging memory contexts of PID n" (translated with lc_messages; optional).
	LineStart LineKind = iota + 1
	// LineContext is "level: n; name: <stats>[: ident]".
	LineContext
	// LineMoreChildren is "level: n; k more child contexts containing <stats>":
	// the children of the last context at level n beyond the 100 the server prints.
	LineMoreChildren
	// LineGrandTotal is "Grand total: ..." and ends the block.
	LineGrandTotal
)

// Counters are one context's (or aggregate's) figures, in bytes and counts.
type Counters struct {
	TotalBytes  int64
	TotalBlocks int64
	FreeBytes   int64
	FreeChunks  int64
	UsedBytes   int64
}

func (c *Counters) add(o Counters) {
	c.TotalBytes += o.TotalBytes
	c.TotalBlocks += o.TotalBlocks
	c.FreeBytes += o.FreeBytes
	c.FreeChunks += o.FreeChunks
	c.UsedBytes += o.UsedBytes
}

// Line is one parsed message of a block.
type Line struct {
	Kind LineKind
	// Level is the server's own level (0-based before PostgreSQL 17, 1-based after).
	Level int
	Name  string
	Ident string
	// Children is k of a LineMoreChildren.
	Children int
	// PID is the backend of a LineStart.
	PID int64
	Counters
}

// The server's message formats (mcxt.c; the stats part from aset.c,
// generation.c, slab.c and bump.c). Only the start line is translated.
var (
	startRe   = regexp.MustCompile(`^logging memory contexts of PID (\d+)$`)
	levelRe   = regexp.MustCompile(`^level: (-?\d+); (.*)$`)
	moreRe    = regexp.MustCompile(`^(\d+) more child contexts containing (\d+) total in (\d+) blocks; (\d+) free \((\d+) chunks\); (\d+) used$`)
	contextRe = regexp.MustCompile(`^(.*?): (\d+) total in (\d+) blocks(?: \(\d+ chunks\))?;(?: \d+ empty blocks;)? ` +
		`(\d+) free \((\d+) chunks\); (\d+) used(?:: (.*))?$`)
	grandRe = regexp.MustCompile(`^Grand total: (\d+) bytes in (\d+) blocks; (\d+) free \((\d+) chunks\); (\d+) used$`)
)

// maxLineBytes bounds one block message: the server clips an ident to 100
// bytes, and context names are short.
const maxLineBytes = 1024

// ParseMessage reads one log message. ok is false for a message that is
// not part of a memory-context block; err is set for one that starts like
// a block line but does not parse or is beyond what the server writes.
func ParseMessage(msg string) (line Line, ok bool, err error) {
	msg = strings.TrimRight(msg, "\r\n")
	block := strings.HasPrefix(msg, "level: ") || strings.HasPrefix(msg, "Grand total: ")
	if block && len(msg) > maxLineBytes {
		return Line{}, true, fmt.Errorf("%w: a memory context line of %d bytes (at most %d): %q", errBeyondBounds, len(msg), maxLineBytes, clip(msg))
	}
	switch {
	case strings.HasPrefix(msg, "level: "):
		m := levelRe.FindStringSubmatch(msg)
		if m == nil {
			return Line{}, true, fmt.Errorf("memory context line without a level: %q", clip(msg))
		}
		level, err := strconv.Atoi(m[1])
		if err != nil || level < 0 {
			return Line{}, true, fmt.Errorf("memory context line with level %q", clip(m[1]))
		}
		if level > MaxLevel {
			return Line{}, true, fmt.Errorf("%w: a memory context at level %d (the server logs levels 0 to %d, MaxLevel)", errBeyondBounds, level, MaxLevel)
		}
		if mm := moreRe.FindStringSubmatch(m[2]); mm != nil {
			n, err := atoiAll(mm[1:7])
			if err != nil {
				return Line{}, true, fmt.Errorf("%w in %q", err, clip(msg))
			}
			return Line{Kind: LineMoreChildren, Level: level, Children: int(min(n[0], 1<<30)),
				Counters: Counters{n[1], n[2], n[3], n[4], n[5]}}, true, nil
		}
		cm := contextRe.FindStringSubmatch(m[2])
		if cm == nil {
			return Line{}, true, fmt.Errorf("memory context line of unknown shape: %q", clip(msg))
		}
		n, err := atoiAll(cm[2:7])
		if err != nil {
			return Line{}, true, fmt.Errorf("%w in %q", err, clip(msg))
		}
		return Line{Kind: LineContext, Level: level, Name: cm[1], Ident: cm[7],
			Counters: Counters{n[0], n[1], n[2], n[3], n[4]}}, true, nil
	case strings.HasPrefix(msg, "Grand total: "):
		m := grandRe.FindStringSubmatch(msg)
		if m == nil {
			return Line{}, true, fmt.Errorf("grand total line of unknown shape: %q", clip(msg))
		}
		n, err := atoiAll(m[1:6])
		if err != nil {
			return Line{}, true, fmt.Errorf("%w in %q", err, clip(msg))
		}
		return Line{Kind: LineGrandTotal, Counters: Counters{n[0], n[1], n[2], n[3], n[4]}}, true, nil
	}
	if m := startRe.FindStringSubmatch(msg); m != nil {
		pid, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			return Line{}, true, fmt.Errorf("start line with pid %q", m[1])
		}
		return Line{Kind: LineStart, PID: pid}, true, nil
	}
	return Line{}, false, nil
}

// atoiAll parses decimal counters; the server prints size_t, so anything
// beyond int64 is a corrupt line rather than a real figure.
func atoiAll(ss []string) ([]int64, error) {
	out := make([]int64, len(ss))
	for i, s := range ss {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("counter %q out of range", s)
		}
		out[i] = v
	}
	return out, nil
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
