// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import "github.com/gpotel/gpotel/internal/pipeline"

// sessionTable is one row per session some process row refers to; a row
// is freed with the last process that refers to it.
type sessionTable struct {
	keys  []pipeline.SessionKey
	index map[pipeline.SessionKey]uint32
	refs  []int32 // process rows that refer to it
	free  freeRows
}

func newSessionTable() sessionTable {
	return sessionTable{index: map[pipeline.SessionKey]uint32{}}
}

// row is the session's row, added on first sight.
func (t *sessionTable) row(key pipeline.SessionKey) uint32 {
	if row, ok := t.index[key]; ok {
		return row
	}
	row, reused := t.free.take()
	if reused {
		t.keys[row] = key
	} else {
		row = uint32(len(t.keys))
		t.keys = append(t.keys, key)
		t.refs = append(t.refs, 0)
	}
	t.index[key] = row
	return row
}

// release drops one process's reference; the last frees the row.
func (t *sessionTable) release(row uint32) {
	t.refs[row]--
	if t.refs[row] > 0 {
		return
	}
	delete(t.index, t.keys[row])
	t.keys[row] = pipeline.SessionKey{}
	t.free.put(row)
}

// freeRows are the freed rows of a table, taken again before it grows.
type freeRows []uint32

// take returns a freed row, if there is one.
func (f *freeRows) take() (uint32, bool) {
	n := len(*f)
	if n == 0 {
		return 0, false
	}
	row := (*f)[n-1]
	*f = (*f)[:n-1]
	return row, true
}

func (f *freeRows) put(row uint32) { *f = append(*f, row) }
