// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Command figuregen writes what follows from internal/pipeline's
// declarations into the files that need a copy of it: the metric tables of
// docs/pipeline.md, every metric, attribute and resource attribute of the
// receiver's metadata.yaml, and the agent's list of optional
// /proc/<pid>/status lines. `make generate` runs it (then mdatagen); a test
// fails while a copy is stale.
//
// Usage: figuregen [repository root]
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	if err := run(root); err != nil {
		fmt.Fprintln(os.Stderr, "figuregen:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	outputs, err := generate(root)
	if err != nil {
		return err
	}
	for _, o := range outputs {
		//nolint:gosec // a source file the repository commits: readable by all, as git checks it out
		if err := os.WriteFile(filepath.Join(root, o.path), o.content, 0o644); err != nil {
			return err
		}
	}
	return nil
}
