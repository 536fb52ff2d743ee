// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"testing"
)

// Every copy of the figures' table in the repository is what figuregen
// writes from pipeline.Figures now: a row added or changed without `make
// generate` fails here.
func TestGeneratedCopiesAreCurrent(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	outputs, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outputs {
		have, err := os.ReadFile(filepath.Join(root, o.path))
		if err != nil {
			t.Fatal(err)
		}
		if string(have) != string(o.content) {
			t.Errorf("%s is stale: run make generate and commit it", o.path)
		}
	}
}

// Generating twice writes the same: figuregen's merge keeps what it does not own.
func TestGenerateIsStable(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join("..", "..", "..")
	for _, p := range []string{docPath, metadataPath} {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(statusLinesPath)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := run(dir); err != nil {
		t.Fatal(err)
	}
	first, err := generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range first {
		have, _ := os.ReadFile(filepath.Join(dir, o.path))
		if string(have) != string(o.content) {
			t.Errorf("%s changes when generated again", o.path)
		}
	}
}
