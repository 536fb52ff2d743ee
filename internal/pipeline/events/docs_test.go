// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package events

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// eventDocTables reads docs/pipeline.md's event tables: per table, its
// rows' cells.
func eventDocTables(t *testing.T) [][][]string {
	t.Helper()
	b, err := os.ReadFile("../../../docs/pipeline.md")
	if err != nil {
		t.Fatal(err)
	}
	var tables [][][]string
	var cur [][]string
	inTable := false
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				tables = append(tables, cur)
			}
			inTable, cur = false, nil
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case cells[0] == "event field":
			inTable = true
		case inTable && !strings.HasPrefix(cells[0], "---"):
			cur = append(cur, cells)
		}
	}
	if inTable {
		tables = append(tables, cur)
	}
	return tables
}

// eventDocRows are the rows docs/pipeline.md's event tables hold, one per
// field, as the tables parse.
func eventDocRows(fields []Field) [][]string {
	var rows [][]string
	for _, f := range fields {
		unit := ""
		if f.Unit != "" {
			unit = "`" + f.Unit + "`"
		}
		mark := ""
		if f.Identity {
			mark += " (key)"
		}
		if f.Optional {
			mark += " (when known)"
		}
		rows = append(rows, []string{"`" + f.Key + "`", "`" + f.Column + "`", f.Type.docName(), unit, strings.TrimSuffix(f.Brief, ".") + mark})
	}
	return rows
}

// docs/pipeline.md's two event tables are QueryEventFields and
// SessionEventFields, row for row.
func TestPipelineDocListsEveryEventField(t *testing.T) {
	got := eventDocTables(t)
	for i, fields := range [][]Field{QueryEventFields, SessionEventFields} {
		want := eventDocRows(fields)
		if i >= len(got) || !slices.EqualFunc(got[i], want, slices.Equal) {
			var b strings.Builder
			for _, r := range want {
				b.WriteString("| " + strings.Join(r, " | ") + " |\n")
			}
			t.Errorf("docs/pipeline.md's event table %d is not the fields' table; it should read:\n| event field | column | type | unit | meaning |\n| --- | "+
				"--- | --- | --- | --- |\n%s", i+1, b.String())
		}
	}
}

// docName is the type as docs/pipeline.md writes it.
func (t FieldType) docName() string {
	switch t {
	case EventTime:
		return "time"
	case EventSegments:
		return "segments"
	}
	return t.String()
}
