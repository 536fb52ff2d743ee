package gpsql

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sqlStatement matches a string that starts like a SQL statement.
var sqlStatement = regexp.MustCompile(`^\s*(SELECT|SET|SHOW|WITH|INSERT|UPDATE|DELETE|DO|CREATE|DROP|ALTER|LOCK|GRANT|REVOKE)\s`)

// No statement gpotel sends is written outside this package: the
// conformance run covers only the table, so SQL elsewhere would escape it.
// The testbed (which builds the emulated catalog) and tests may write SQL.
func TestNoSQLOutsideThisPackage(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	skip := map[string]bool{"testbed": true, "build": true, "bin": true, "internal/gpsql": true, ".git": true}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if skip[filepath.ToSlash(rel)] {
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
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && sqlStatement.MatchString(s) {
				t.Errorf("%s: SQL outside internal/gpsql: %.60q", fset.Position(lit.Pos()), s)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
