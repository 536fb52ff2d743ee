// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"testing"
)

// Every mutation of the list applies to the tree as it is: its file exists
// and its text occurs there once. A line left behind by a change (a moved
// or rewritten line) would otherwise guard nothing until the next
// make mutate reported it invalid.
func TestEveryMutationAppliesToTheTree(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	list, err := readList(filepath.Join(root, "scripts", "mutate", "mutations.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 {
		t.Fatal("the list holds no mutation")
	}
	for _, m := range list {
		src, err := os.ReadFile(filepath.Join(root, m.file))
		if err != nil {
			t.Errorf("line %d %q: %v", m.line, m.name, err)
			continue
		}
		if err := m.appliesTo(src); err != nil {
			t.Errorf("line %d %q in %s: %v", m.line, m.name, m.file, err)
		}
	}
}
