// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/gpotel/gpotel/"

// boundaryEnds are, per boundary package, the packages whose production
// code may import it: the components at its ends (with their internal
// packages) and the libraries they read it with.
var boundaryEnds = map[string][]string{
	"internal/pipeline/snapshot": {
		"receiver/gpsessionreceiver", "processor/snapshotdiffprocessor", "internal/pipeline/sparse", "internal/pipeline/pipelinetest",
		// The processor passes the closing batch on: its consumers read it with the same decoders.
		"exporter/sessionstateexporter", "connector/workloadrulesconnector",
	},
	"internal/pipeline/sparse": {"receiver/gpsessionreceiver", "processor/snapshotdiffprocessor", "internal/pipeline/pipelinetest"},
	"internal/pipeline/output": {
		"processor/snapshotdiffprocessor", "exporter/sessionstateexporter", "connector/workloadrulesconnector",
	},
	"internal/pipeline/events": {
		"processor/snapshotdiffprocessor", "connector/finishedworkconnector", "exporter/historyexporter",
		"exporter/sessionstateexporter", "connector/workloadrulesconnector", "internal/rulefirings", "internal/sessionaction",
		"internal/pipeline/pipelinetest",
	},
	// Test helpers: imported by tests only.
	"internal/pipeline/pipelinetest": {},
}

// productionImports maps each package directory of the repository to the
// module packages its non-test files import.
func productionImports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "../.." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel("../..", filepath.Dir(path))
		dir = filepath.ToSlash(dir)
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if pkg, ok := strings.CutPrefix(p, module); ok && !slices.Contains(out[dir], pkg) {
				out[dir] = append(out[dir], pkg)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// within tells a package that is dir or one of its subpackages.
func within(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// Each boundary package is imported, outside tests, only by the components
// at its two ends (docs/pipeline.md) and the libraries they read it with.
func TestEachBoundaryIsImportedOnlyByItsEnds(t *testing.T) {
	imports := productionImports(t)
	if len(imports) == 0 {
		t.Fatal("no package found")
	}
	for dir, pkgs := range imports {
		for _, pkg := range pkgs {
			ends, boundary := boundaryEnds[pkg]
			if !boundary || dir == pkg {
				continue
			}
			if !slices.ContainsFunc(ends, func(end string) bool { return within(dir, end) }) {
				t.Errorf("%s imports %s, whose ends are %v", dir, pkg, ends)
			}
		}
	}
}
