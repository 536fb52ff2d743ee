// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"fmt"

	"github.com/gpotel/gpotel/internal/gpsql"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
)

// The history tables.
const (
	tableQueries     = "queries"
	tableSessions    = "sessions"
	tableRuleActions = "rule_actions"
	tableCount       = 3
)

// sqlTypes is the column type of each event field type, as format_type()
// spells it.
var sqlTypes = map[events.FieldType]string{
	events.EventInt:      "bigint",
	events.EventDouble:   "double precision",
	events.EventString:   "text",
	events.EventBool:     "boolean",
	events.EventTime:     "timestamp with time zone",
	events.EventSegments: "json",
	events.EventStrings:  "text[]",
	events.EventDoubles:  "double precision[]",
}

// historyTable is one table and the event it holds: one column per field
// of the event, in the fields' order.
type historyTable struct {
	gpsql.HistoryTable
	event       string
	fields      []events.Field
	end         int // index in fields of the end time
	columnNames []string
	fieldIndex  map[string]int // attribute key → index in fields
}

// historyTables are the queries, sessions and rule_actions tables of
// schema, made from the events' field tables: a field added there is a
// column here. A rule's firing is partitioned by the time it fired.
func historyTables(schema string) [tableCount]*historyTable {
	return [tableCount]*historyTable{
		newHistoryTable(schema, tableQueries, events.EventQueryEnd, events.QueryEventFields, events.AttrQueryEnd),
		newHistoryTable(schema, tableSessions, events.EventSessionEnd, events.SessionEventFields, events.AttrSessionEnd),
		newHistoryTable(schema, tableRuleActions, events.EventRuleAction, events.RuleActionEventFields, events.AttrRuleTime),
	}
}

func newHistoryTable(schema, name, event string, fields []events.Field, endKey string) *historyTable {
	t := &historyTable{HistoryTable: gpsql.HistoryTable{Schema: schema, Name: name}, event: event, fields: fields, end: -1,
		fieldIndex: map[string]int{}}
	for i, f := range fields {
		typ, ok := sqlTypes[f.Type]
		if !ok {
			panic(fmt.Sprintf("historyexporter: event field %s has type %d, which has no column type", f.Key, f.Type))
		}
		t.Columns = append(t.Columns, gpsql.HistoryColumn{Name: f.Column, Type: typ})
		t.columnNames = append(t.columnNames, f.Column)
		t.fieldIndex[f.Key] = i
		if f.Identity {
			t.Key = append(t.Key, f.Column)
			if f.Optional {
				t.NullableKey = append(t.NullableKey, f.Column)
			}
		}
		switch f.Key {
		case endKey:
			t.End, t.end = f.Column, i
		case pipeline.AttrTmID, pipeline.AttrSessionID:
			// Greenplum keeps a session's rows on one segment, as GPCC's history does.
			t.DistributeBy = append(t.DistributeBy, f.Column)
		}
	}
	if t.end < 0 || len(t.Key) == 0 || len(t.DistributeBy) != 2 {
		panic(fmt.Sprintf("historyexporter: the %s event has no end time %s, no key or no session", event, endKey))
	}
	return t
}
