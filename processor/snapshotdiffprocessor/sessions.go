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
	row, grown := place(&t.free, &t.keys, key)
	if grown {
		t.refs = append(t.refs, 0)
	}
	t.index[key] = row
	return row
}

// hold adds one process's reference.
func (t *sessionTable) hold(row uint32) { t.refs[row]++ }

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

func (f *freeRows) put(row uint32) { *f = append(*f, row) }

// place puts key in the last freed row of keys, or else in a new row at
// the end; grown tells the latter, when the table's other columns must
// grow too.
func place[K any](f *freeRows, keys *[]K, key K) (row uint32, grown bool) {
	if n := len(*f); n > 0 {
		row = (*f)[n-1]
		*f = (*f)[:n-1]
		(*keys)[row] = key
		return row, false
	}
	*keys = append(*keys, key)
	return uint32(len(*keys) - 1), true
}
