// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memctx

import (
	"errors"
	"fmt"
)

// MoreChildrenName names the aggregate row of a "k more child contexts" line.
const MoreChildrenName = "more child contexts"

// Context is one memory context of a backend, or an aggregate of several.
type Context struct {
	Name  string
	Ident string
	// Type is AllocSet, Generation, Slab or Bump where the source says so (the log does not).
	Type string
	// Level is 1 for TopMemoryContext.
	Level int
	// Parent is the index of the parent context in the same list, -1 for the root.
	Parent int
	Counters
	// Aggregated is how many contexts the row sums; 0 = just this one.
	Aggregated int
}

// The bounds of one block. The server prints at most 100 levels (from
// PostgreSQL 17; earlier ones have no limit but no real tree comes near)
// and 100 children per parent, summing the rest in one line; a real block
// has hundreds to a few thousand contexts.
const (
	MaxLevel    = 100
	MaxContexts = 10000
)

// blockBuilder rebuilds the context tree from the depth-first order in which
// the server logs it: a context's parent is the last context logged one level up.
type blockBuilder struct {
	base     int   // the server's level of TopMemoryContext
	haveBase bool  // a first context line was seen
	stack    []int // indices of the contexts on the current path, root first
	contexts []Context
	grand    Counters
	done     bool
}

var errBlockDone = errors.New("block already complete")

// errBeyondBounds marks a block larger or deeper than any server writes.
var errBeyondBounds = errors.New("beyond what the server writes")

// add takes the next line of the block.
func (b *blockBuilder) add(l Line) error {
	if b.done {
		return errBlockDone
	}
	switch l.Kind {
	case LineStart:
		return nil
	case LineGrandTotal:
		if !b.haveBase {
			return errors.New("grand total before any context")
		}
		b.grand, b.done = l.Counters, true
		return nil
	case LineContext, LineMoreChildren:
	default:
		return fmt.Errorf("unknown line kind %d", l.Kind)
	}
	if len(b.contexts) >= MaxContexts {
		return fmt.Errorf("%w: more than %d memory contexts in one block (MaxContexts)", errBeyondBounds, MaxContexts)
	}
	if !b.haveBase {
		if l.Kind != LineContext {
			return fmt.Errorf("block starts with %q, not a context", MoreChildrenName)
		}
		b.base, b.haveBase = l.Level, true
	}
	depth := l.Level - b.base + 1 // 1 = TopMemoryContext
	if l.Kind == LineMoreChildren {
		depth++ // the server gives the parent's level
	}
	if depth < 1 || depth > len(b.stack)+1 || (depth == 1 && len(b.contexts) > 0) {
		return fmt.Errorf("level %d does not follow the previous contexts (depth %d after %d)", l.Level, depth, len(b.stack))
	}
	c := Context{Level: depth, Parent: -1, Counters: l.Counters}
	if depth > 1 {
		c.Parent = b.stack[depth-2]
	}
	if l.Kind == LineMoreChildren {
		c.Name, c.Aggregated = MoreChildrenName, l.Children
		b.stack = b.stack[:depth-1]
	} else {
		c.Name, c.Ident = l.Name, l.Ident
		b.stack = append(b.stack[:depth-1], len(b.contexts))
	}
	b.contexts = append(b.contexts, c)
	return nil
}

// Summarize keeps levels 1 and 2 and adds every deeper context into its
// level-2 ancestor, as the PostgreSQL 18 proposal's summary did.
func Summarize(contexts []Context) []Context {
	out := make([]Context, 0, len(contexts))
	at := make([]int, len(contexts)) // where each context went in out: itself or its level-2 ancestor
	for i, c := range contexts {
		if c.Level <= 2 || c.Parent < 0 || c.Parent >= i {
			if c.Parent >= 0 && c.Parent < i {
				c.Parent = at[c.Parent]
			} else {
				c.Parent = -1
			}
			at[i] = len(out)
			out = append(out, c)
			continue
		}
		at[i] = at[c.Parent]
		agg := &out[at[i]]
		if agg.Aggregated == 0 {
			agg.Aggregated = 1
		}
		agg.add(c.Counters)
		agg.Aggregated += max(c.Aggregated, 1)
	}
	return out
}

// blockCollector picks one backend's block out of the log's records.
type blockCollector struct {
	pid   int64
	block *blockBuilder
	err   error
}

// add takes the next log record. A block begins at its start line (which
// is translated, so it may not be recognised) or at TopMemoryContext; a new
// beginning drops a block begun before (the end of an older request's).
func (bc *blockCollector) add(r Record) {
	if r.PID != bc.pid || bc.err != nil || bc.complete() {
		return
	}
	line, ok, err := ParseMessage(r.Message)
	if !ok {
		return
	}
	if err != nil {
		if bc.block != nil {
			bc.err = err
		}
		return
	}
	begins := line.Kind == LineStart || (line.Kind == LineContext && line.Name == "TopMemoryContext")
	if begins && (bc.block == nil || len(bc.block.contexts) > 0) {
		bc.block = &blockBuilder{}
	}
	if bc.block == nil {
		return
	}
	bc.err = bc.block.add(line)
}

func (bc *blockCollector) complete() bool { return bc.block != nil && bc.block.done }
