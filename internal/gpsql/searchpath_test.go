// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsql

import (
	"go/ast"
	"go/token"
	"testing"
)

// Every connection gpotel opens pins its search_path to SearchPath: each
// function that builds a pgx configuration it keeps (ParseConfig, or
// roleconn's ConnConfig built on it) sets SearchPath in it, and nothing
// connects with a bare connection string, which could not be pinned. A
// validation that throws the parsed configuration away opens nothing.
// The testbed and its command connect as superuser to clusters they made.
func TestEveryConnectionPinsTheSearchPath(t *testing.T) {
	builds := map[string]bool{"ParseConfig": true}
	bare := map[string]bool{"Connect": true, "New": true, "ConnectWithOptions": true}
	packages := map[string]bool{"pgx": true, "pgxpool": true, "pgconn": true}
	found := 0
	eachSourceFile(t, []string{"testbed", "cmd/gpotel-testbed"}, func(fset *token.FileSet, f *ast.File) {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			pins := false
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "SearchPath" {
					pins = true
				}
				return true
			})
			kept := keptCalls(fn.Body)
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok || !packages[pkg.Name] {
					return true
				}
				at := fset.Position(call.Pos())
				switch {
				case bare[sel.Sel.Name]:
					t.Errorf("%s: %s.%s connects with a connection string, whose search_path is not pinned: parse it, set search_path to gpsql.SearchPath, connect "+
						"with the config",
						at, pkg.Name, sel.Sel.Name)
				case builds[sel.Sel.Name] && kept[call]:
					found++
					if !pins {
						t.Errorf("%s: %s builds a connection configuration (%s.%s) without pinning search_path to gpsql.SearchPath",
							at, fn.Name.Name, pkg.Name, sel.Sel.Name)
					}
				}
				return true
			})
		}
	})
	if found == 0 {
		t.Fatal("found no connection configuration at all: the test looks for the wrong calls")
	}
}

// keptCalls are the calls in body whose first result is assigned to a
// name other than _.
func keptCalls(body *ast.BlockStmt) map[*ast.CallExpr]bool {
	kept := map[*ast.CallExpr]bool{}
	ast.Inspect(body, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Rhs) != 1 || len(as.Lhs) == 0 {
			return true
		}
		call, ok := as.Rhs[0].(*ast.CallExpr)
		if !ok {
			return true
		}
		if id, ok := as.Lhs[0].(*ast.Ident); !ok || id.Name != "_" {
			kept[call] = true
		}
		return true
	})
	return kept
}
