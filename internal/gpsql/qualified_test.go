// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsql

import (
	"regexp"
	"strings"
	"testing"

	"github.com/gpotel/gpotel/internal/dialect"
)

var (
	quotedText        = regexp.MustCompile(`'[^']*'|"[^"]*"`)
	catalogOperator   = regexp.MustCompile(`OPERATOR\(pg_catalog\.[=<>!]+\)`)
	catalogFunction   = regexp.MustCompile(`pg_catalog\.\w+\s*\(`)
	functionCall      = regexp.MustCompile(`(\w+)\s*\(`)
	bareOperator      = regexp.MustCompile(`[=<>!~+*/%|&^#@-]|(?i)\bBETWEEN\b|\bLIKE\b|\bIS\s+DISTINCT\b`)
	castsAndParameter = regexp.MustCompile(`::\w+|\$\d+`)
)

// notFunctions are the words SQL's grammar follows with a parenthesis
// that call nothing looked up on the search_path.
var notFunctions = map[string]bool{
	"EXISTS": true, "IN": true, "VALUES": true, "FROM": true, "TO": true, "RANGE": true, "BY": true,
	"START": true, "END": true, "extract": true, "AND": true, "OR": true, "NOT": true, "ON": true, "WHERE": true,
}

// Every statement the history connection sends names each function and
// operator with pg_catalog: its search_path is pinned too, but the
// statements should not lean on that alone.
func TestTheHistorysStatementsNameTheCatalogsFunctionsAndOperators(t *testing.T) {
	checked := 0
	for _, st := range Statements {
		if !strings.Contains(st.Sender, "history") {
			continue
		}
		for _, d := range dialect.All {
			text := st.Text(Shape{Dialect: d})
			if text == "" {
				continue
			}
			checked++
			rest := quotedText.ReplaceAllString(text, "''")
			rest = catalogOperator.ReplaceAllString(rest, " ")
			rest = catalogFunction.ReplaceAllString(rest, "`(")
			rest = castsAndParameter.ReplaceAllString(rest, "")
			for _, m := range functionCall.FindAllStringSubmatch(rest, -1) {
				if !notFunctions[m[1]] {
					t.Errorf("%s (%s): %s( is not named pg_catalog.%s(:\n%s", st.Name, d, m[1], m[1], text)
				}
			}
			if op := bareOperator.FindString(rest); op != "" {
				t.Errorf("%s (%s): operator %s is not OPERATOR(pg_catalog.%s):\n%s", st.Name, d, op, op, text)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no statement of the history's checked")
	}
}
