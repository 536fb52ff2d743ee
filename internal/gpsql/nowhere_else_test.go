// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsql

import (
	"go/ast"
	"go/token"
	"regexp"
	"strconv"
	"testing"
)

// sqlStatement matches a string that starts like a SQL statement.
var sqlStatement = regexp.MustCompile(`^\s*(SELECT|SET|SHOW|WITH|INSERT|UPDATE|DELETE|DO|CREATE|DROP|ALTER|LOCK|GRANT|REVOKE)\s`)

// No statement gpotel sends is written outside this package: the
// conformance run covers only the table, so SQL elsewhere would escape it.
// The testbed (which builds the emulated catalog) and tests may write SQL.
func TestNoSQLOutsideThisPackage(t *testing.T) {
	eachSourceFile(t, []string{"testbed", "internal/gpsql"}, func(fset *token.FileSet, f *ast.File) {
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
	})
}
