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
	// Path names the ancestors, TopMemoryContext first.
	Path []string
	Counters
	// Aggregated is how many contexts the row sums; 0 = just this one.
	Aggregated int
}

// maxContexts bounds one block: the server prints at most 100 children per
// parent and 100 levels, but a corrupt log must not grow without end.
const maxContexts = 1 << 20

// blockBuilder rebuilds the context tree from the depth-first order in which
// the server logs it: a context's parent is the last context logged one level up.
type blockBuilder struct {
	base     int  // the server's level of TopMemoryContext
	haveBase bool // a first context line was seen
	stack    []string
	contexts []Context
	grand    Counters
	done     bool
}

var errBlockDone = errors.New("block already complete")

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
	if len(b.contexts) >= maxContexts {
		return fmt.Errorf("more than %d memory contexts in one block", maxContexts)
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
	c := Context{Level: depth, Path: append([]string(nil), b.stack[:depth-1]...), Counters: l.Counters}
	if l.Kind == LineMoreChildren {
		c.Name, c.Aggregated = MoreChildrenName, l.Children
		b.stack = b.stack[:depth-1]
	} else {
		c.Name, c.Ident = l.Name, l.Ident
		b.stack = append(b.stack[:depth-1], l.Name)
	}
	b.contexts = append(b.contexts, c)
	return nil
}

// Summarize keeps levels 1 and 2 and adds every deeper context into its
// level-2 ancestor, as the PostgreSQL 18 proposal's summary did.
func Summarize(contexts []Context) []Context {
	out := make([]Context, 0, len(contexts))
	cur := -1 // index in out of the current level-2 context
	for _, c := range contexts {
		switch {
		case c.Level <= 2:
			c.Path = append([]string(nil), c.Path...)
			out = append(out, c)
			cur = -1
			if c.Level == 2 {
				cur = len(out) - 1
			}
		case cur >= 0:
			agg := &out[cur]
			if agg.Aggregated == 0 {
				agg.Aggregated = 1
			}
			agg.add(c.Counters)
			agg.Aggregated += max(c.Aggregated, 1)
		}
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
