// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsql

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// eachSourceFile parses every Go file of the module that is not a test,
// outside the folders skip names (relative to the module's root), and
// hands it to visit.
func eachSourceFile(t *testing.T, skip []string, visit func(fset *token.FileSet, f *ast.File)) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	skipped := map[string]bool{"build": true, "bin": true, ".git": true}
	for _, s := range skip {
		skipped[s] = true
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if skipped[filepath.ToSlash(rel)] {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		visit(fset, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
