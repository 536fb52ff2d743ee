// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"os"
	"path/filepath"
	"testing"
)

const fixtureRoot = "testdata/proc"

// fixture reads one kernel file of the committed fixture tree.
func fixture(t testing.TB, pid, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureRoot, pid, file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixtureSeeds lists every regular file of one name in the fixture tree, for fuzz seeds.
func fixtureSeeds(f *testing.F, file string) {
	matches, err := filepath.Glob(filepath.Join(fixtureRoot, "*", file))
	if err != nil {
		f.Fatal(err)
	}
	for _, m := range matches {
		if b, err := os.ReadFile(m); err == nil {
			f.Add(b)
		}
	}
}
