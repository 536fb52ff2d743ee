// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsql

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpotel/gpotel/internal/dialect"
)

// The history exporter's statements: it writes the finished-work events
// into day-partitioned tables of a database of its own choosing, with its
// own role. Greenplum 6 has its own partitioning syntax (PARTITION BY
// RANGE with named partitions, ADD/DROP PARTITION) and lacks IF NOT EXISTS
// on ALTER TABLE ADD COLUMN and CREATE INDEX, so the exporter reads the
// catalog first and sends only what is missing, on every dialect alike.

// HistoryApplicationName is the history exporter's connection.
const HistoryApplicationName = "gpotel-history"

// HistoryColumn is one column of a history table; Type is spelled as
// format_type() prints it, so the catalog's answer compares equal.
type HistoryColumn struct {
	Name string
	Type string
}

// HistoryTable is one history table: its columns, the columns of an
// event's key, the end time it is partitioned by (one partition per UTC
// day) and, on the Greenplum family, the columns it is distributed by.
type HistoryTable struct {
	Schema, Name string
	Columns      []HistoryColumn
	Key          []string
	// NullableKey are the key columns that may be NULL (a field absent
	// where the server has none, as ccnt on PostgreSQL).
	NullableKey  []string
	End          string
	DistributeBy []string
}

// The history's statements name every function and operator with its
// schema, pg_catalog: its connection pins search_path too, but a
// statement should not lean on that alone (a pooler may reset it).

// Statements that read what the history role may do and what exists.
const (
	// HistoryServerVersion is server_version_num (a PostgreSQL history
	// database needs 11 or later: indexes on partitioned tables).
	HistoryServerVersion = `SELECT pg_catalog.current_setting('server_version_num')::integer`
	// HistoryRights reads the role, whether it is a superuser, the
	// database, the role's CREATE and TEMPORARY rights on it, and its
	// CREATE and USAGE rights on schema $1 (NULL when the schema does not
	// exist).
	HistoryRights = `SELECT current_user::text, pg_catalog.current_setting('is_superuser') OPERATOR(pg_catalog.=) 'on',
  pg_catalog.current_database()::text,
  pg_catalog.has_database_privilege(pg_catalog.current_database()::text, 'CREATE'),
  pg_catalog.has_database_privilege(pg_catalog.current_database()::text, 'TEMPORARY'),
  (SELECT pg_catalog.has_schema_privilege(n.oid, 'CREATE') FROM pg_catalog.pg_namespace n WHERE n.nspname OPERATOR(pg_catalog.=) $1::name),
  (SELECT pg_catalog.has_schema_privilege(n.oid, 'USAGE') FROM pg_catalog.pg_namespace n WHERE n.nspname OPERATOR(pg_catalog.=) $1::name)`
	// HistoryRelationOwner reads the owner of relation $2 (a table or an
	// index) in schema $1 and whether the role has the owner's rights (it
	// is the owner or a member); no row: it does not exist.
	HistoryRelationOwner = `SELECT pg_catalog.pg_get_userbyid(c.relowner)::text, pg_catalog.pg_has_role(c.relowner, 'USAGE')
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
WHERE n.nspname OPERATOR(pg_catalog.=) $1::name AND c.relname OPERATOR(pg_catalog.=) $2::name`
	// HistoryTableColumns lists the columns of table $2 in schema $1 with
	// their types, in order.
	HistoryTableColumns = `SELECT a.attname::text, pg_catalog.format_type(a.atttypid, a.atttypmod)
FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) a.attrelid
JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
WHERE n.nspname OPERATOR(pg_catalog.=) $1::name AND c.relname OPERATOR(pg_catalog.=) $2::name AND a.attnum OPERATOR(pg_catalog.>) 0
  AND NOT a.attisdropped ORDER BY a.attnum`
)

// HistoryPartitions lists the partitions of table $2 in schema $1 by
// name: Greenplum 6's own partition names (pg_partitions), else the
// partitions' relation names (pg_inherits).
func HistoryPartitions(d dialect.Dialect) string {
	if d.Facts().LegacyPartitions {
		return `SELECT partitionname::text FROM pg_catalog.pg_partitions
WHERE schemaname OPERATOR(pg_catalog.=) $1::name AND tablename OPERATOR(pg_catalog.=) $2::name AND partitionname IS NOT NULL`
	}
	return `SELECT c.relname::text FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid
JOIN pg_catalog.pg_class p ON p.oid OPERATOR(pg_catalog.=) i.inhparent JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.relnamespace
WHERE n.nspname OPERATOR(pg_catalog.=) $1::name AND p.relname OPERATOR(pg_catalog.=) $2::name`
}

// CreateHistorySchema creates the schema the tables live in.
func CreateHistorySchema(schema string) string {
	return "CREATE SCHEMA IF NOT EXISTS " + QuoteIdent(schema)
}

// CreateHistoryTable creates t partitioned by day of its end time, with
// the partition of day on Greenplum 6 (which needs one at creation).
func CreateHistoryTable(d dialect.Dialect, t HistoryTable, day time.Time) string {
	cols := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = QuoteIdent(c.Name) + " " + c.Type
	}
	create := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n  %s\n)", t.qualified(), strings.Join(cols, ",\n  "))
	switch {
	case d.Facts().LegacyPartitions:
		return fmt.Sprintf("%s\nDISTRIBUTED BY (%s)\nPARTITION BY RANGE (%s) (PARTITION %s %s)",
			create, quoteList(t.DistributeBy), QuoteIdent(t.End), QuoteIdent(HistoryPartitionName(day)), gp6Range(day))
	case d.Greenplum():
		return fmt.Sprintf("%s\nPARTITION BY RANGE (%s)\nDISTRIBUTED BY (%s)", create, QuoteIdent(t.End), quoteList(t.DistributeBy))
	}
	return fmt.Sprintf("%s\nPARTITION BY RANGE (%s)", create, QuoteIdent(t.End))
}

// HistoryIndexes are the indexes of t, by name: its end time (the day's
// queries, retention's reads) and its key (a session's queries in order,
// and the look-up that keeps a replayed event out).
func HistoryIndexes(t HistoryTable) map[string][]string {
	return map[string][]string{
		t.Name + "_end": {t.End},
		t.Name + "_key": t.Key,
	}
}

// CreateHistoryIndex creates index name on columns of t (the exporter
// sends it only when the index is missing: Greenplum 6 has no CREATE
// INDEX IF NOT EXISTS).
func CreateHistoryIndex(t HistoryTable, name string, columns []string) string {
	return fmt.Sprintf("CREATE INDEX %s ON %s (%s)", QuoteIdent(name), t.qualified(), quoteList(columns))
}

// AddHistoryColumn adds a column the table lacks: a field new to the
// events becomes a column of an existing table at the next start.
func AddHistoryColumn(t HistoryTable, c HistoryColumn) string {
	return fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s", t.qualified(), QuoteIdent(c.Name), c.Type)
}

// HistoryPartitionName is the partition of a UTC day: d20260124.
func HistoryPartitionName(day time.Time) string { return "d" + day.UTC().Format("20060102") }

// HistoryPartitionRelation is the relation name of a partition on the
// dialects with declarative partitioning: queries_d20260124.
func HistoryPartitionRelation(t HistoryTable, day time.Time) string {
	return t.Name + "_" + HistoryPartitionName(day)
}

// HistoryPartitionDay is the day of a partition HistoryPartitions
// listed; false for a partition the exporter did not name (a DBA's own).
func HistoryPartitionDay(d dialect.Dialect, t HistoryTable, name string) (time.Time, bool) {
	if !d.Facts().LegacyPartitions {
		var ok bool
		if name, ok = strings.CutPrefix(name, t.Name+"_"); !ok {
			return time.Time{}, false
		}
	}
	day, err := time.Parse("d20060102", name)
	return day, err == nil
}

// AddHistoryPartition adds the partition of day (UTC midnight to midnight).
func AddHistoryPartition(d dialect.Dialect, t HistoryTable, day time.Time) string {
	if d.Facts().LegacyPartitions {
		return fmt.Sprintf("ALTER TABLE %s ADD PARTITION %s %s", t.qualified(), QuoteIdent(HistoryPartitionName(day)), gp6Range(day))
	}
	from, to := dayBounds(day)
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')",
		QuoteIdent(t.Schema), QuoteIdent(HistoryPartitionRelation(t, day)), t.qualified(), from, to)
}

// DropHistoryPartition drops a whole day: retention never deletes rows.
func DropHistoryPartition(d dialect.Dialect, t HistoryTable, day time.Time) string {
	if d.Facts().LegacyPartitions {
		return fmt.Sprintf("ALTER TABLE %s DROP PARTITION IF EXISTS %s", t.qualified(), QuoteIdent(HistoryPartitionName(day)))
	}
	return fmt.Sprintf("DROP TABLE IF EXISTS %s.%s", QuoteIdent(t.Schema), QuoteIdent(HistoryPartitionRelation(t, day)))
}

// HistoryStage is the name of t's staging table, a temporary table of
// the exporter's session.
func HistoryStage(t HistoryTable) string { return "gpotel_stage_" + t.Name }

// CreateHistoryStage creates t's staging table: emptied at every commit,
// distributed as t on the Greenplum family so the key look-up stays on
// each segment.
func CreateHistoryStage(d dialect.Dialect, t HistoryTable) string {
	cols := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = QuoteIdent(c.Name) + " " + c.Type
	}
	stmt := fmt.Sprintf("CREATE TEMPORARY TABLE IF NOT EXISTS %s (%s) ON COMMIT DELETE ROWS", QuoteIdent(HistoryStage(t)), strings.Join(cols, ", "))
	if d.Greenplum() {
		stmt += fmt.Sprintf(" DISTRIBUTED BY (%s)", quoteList(t.DistributeBy))
	}
	return stmt
}

// CopyHistoryStage loads rows of these columns into the staging table,
// in COPY's text format (every dialect and version reads it); a column
// not named is NULL (rows queued before a field was added).
func CopyHistoryStage(t HistoryTable, columns []string) string {
	return fmt.Sprintf("COPY %s (%s) FROM STDIN", QuoteIdent(HistoryStage(t)), quoteList(columns))
}

// HistoryRowsEndBetween tells whether t holds a row ending between $1 and
// $2: when it holds none, no event of a batch ending there can be in it
// (an event's end time is part of it), and the batch is copied straight
// into t. The end time's index answers it at the first row.
func HistoryRowsEndBetween(t HistoryTable) string {
	return fmt.Sprintf("SELECT EXISTS (SELECT 1 FROM %s WHERE %s)", t.qualified(), endBetween(QuoteIdent(t.End)))
}

// CopyHistoryRows loads rows of these columns straight into t (its
// partitions take them by end time), as CopyHistoryStage does into the
// staging table.
func CopyHistoryRows(t HistoryTable, columns []string) string {
	return fmt.Sprintf("COPY %s (%s) FROM STDIN", t.qualified(), quoteList(columns))
}

// InsertHistoryRows moves the staged rows into t, leaving out those whose
// key t already holds: a batch written again after a commit the exporter
// did not hear of adds nothing. $1 and $2 bound the end times of the
// staged rows, so only their days' partitions are looked in.
func InsertHistoryRows(t HistoryTable) string {
	cols := quoteList(t.columnNames())
	var match []string
	for _, k := range t.Key {
		if slices.Contains(t.NullableKey, k) {
			// NULL names no value: two absent ones are the same key.
			match = append(match, fmt.Sprintf("(t.%[1]s OPERATOR(pg_catalog.=) s.%[1]s OR (t.%[1]s IS NULL AND s.%[1]s IS NULL))", QuoteIdent(k)))
			continue
		}
		match = append(match, fmt.Sprintf("t.%[1]s OPERATOR(pg_catalog.=) s.%[1]s", QuoteIdent(k)))
	}
	return fmt.Sprintf(`INSERT INTO %[1]s (%[2]s)
SELECT %[2]s FROM %[3]s s
WHERE NOT EXISTS (SELECT 1 FROM %[1]s t WHERE %[4]s AND %[5]s)`,
		t.qualified(), cols, QuoteIdent(HistoryStage(t)), strings.Join(match, " AND "), endBetween("t."+QuoteIdent(t.End)))
}

// endBetween is column BETWEEN $1 AND $2 with pg_catalog's operators
// (BETWEEN looks >= and <= up on the search_path).
func endBetween(column string) string {
	return fmt.Sprintf("%[1]s OPERATOR(pg_catalog.>=) $1::timestamptz AND %[1]s OPERATOR(pg_catalog.<=) $2::timestamptz", column)
}

// QuoteIdent quotes an identifier.
func QuoteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = QuoteIdent(n)
	}
	return strings.Join(q, ", ")
}

func (t HistoryTable) qualified() string { return QuoteIdent(t.Schema) + "." + QuoteIdent(t.Name) }

func (t HistoryTable) columnNames() []string {
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Name
	}
	return names
}

// dayBounds are the day's first instant and the next day's, UTC.
func dayBounds(day time.Time) (from, to string) {
	const layout = "2006-01-02 00:00:00+00"
	d := day.UTC()
	return d.Format(layout), d.AddDate(0, 0, 1).Format(layout)
}

func gp6Range(day time.Time) string {
	from, to := dayBounds(day)
	return fmt.Sprintf("START ('%s'::timestamptz) INCLUSIVE END ('%s'::timestamptz) EXCLUSIVE", from, to)
}
