// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsql

import "time"

// Target is where a statement is sent.
type Target string

// The targets.
const (
	// Coordinator: the collector's connection to the coordinator (or the
	// PostgreSQL server).
	Coordinator Target = "coordinator"
	// Instance: an agent's local connection to one instance of its host, in
	// utility mode on a Greenplum segment.
	Instance Target = "instance"
	// History: the history exporter's connection, with its own role, to
	// the database it writes the history tables into (the cluster's own,
	// or any PostgreSQL). Its statements depend on one another and run in
	// the table's order.
	History Target = "history"
)

// Statement is one entry of the table of everything gpotel sends.
type Statement struct {
	// Name is how docs/compatibility.md names it.
	Name   string
	Sender string // the component that sends it
	Target Target
	// Text is the statement for a server of that shape; "" where it is never sent.
	Text func(Shape) string
	// Args are arguments of the right types for a conformance run; an error
	// the statement's own function raises on them (not a catalog's
	// rejection, SQLSTATE class 42) passes.
	Args []any
	// Guard is the Name of a statement that answers one boolean; this one is
	// sent only where the guard answers true.
	Guard string
}

func always(text string) func(Shape) string { return func(Shape) string { return text } }

func greenplumOnly(text string) func(Shape) string {
	return func(s Shape) string {
		if s.Dialect.Greenplum() {
			return text
		}
		return ""
	}
}

// Statements is every statement gpotel sends.
var Statements = []Statement{
	{Name: "postmaster start (tm_id)", Sender: "receiver, exporter (actions, history)", Target: Coordinator, Text: always(PostmasterStart)},
	{Name: "version", Sender: "receiver, exporter (actions, history)", Target: Coordinator, Text: always(Version)},
	{Name: "pg_stat_activity columns", Sender: "receiver", Target: Coordinator, Text: always(ActivityColumns)},
	{Name: "backends (discovery)", Sender: "receiver", Target: Coordinator, Text: Backends},
	{Name: "sessions", Sender: "receiver", Target: Coordinator, Text: Sessions},
	{Name: "segment configuration", Sender: "receiver", Target: Coordinator, Text: greenplumOnly(SegmentConfiguration)},
	{Name: "resource groups", Sender: "receiver", Target: Coordinator, Text: greenplumOnly(ResourceGroups)},
	{Name: "role resource queues", Sender: "receiver", Target: Coordinator, Text: greenplumOnly(RoleResourceQueues)},
	{Name: "has gp_resource_group_bypass", Sender: "receiver", Target: Coordinator, Text: always(HasResourceGroupBypass)},
	{Name: "set gp_resource_group_bypass", Sender: "receiver", Target: Coordinator, Text: always(SetResourceGroupBypass), Guard: "has gp_resource_group_bypass"},
	{Name: "has workfiles", Sender: "receiver", Target: Coordinator, Text: HasWorkfiles},
	{Name: "workfiles (spill)", Sender: "receiver", Target: Coordinator, Text: Workfiles, Guard: "has workfiles"},
	{Name: "lock waits", Sender: "receiver", Target: Coordinator, Text: LockWaits},
	{Name: "has session memory", Sender: "receiver", Target: Coordinator, Text: HasSessionMemory},
	{Name: "session memory", Sender: "receiver", Target: Coordinator, Text: SessionMemory, Guard: "has session memory"},
	{Name: "cancel query", Sender: "exporter", Target: Coordinator, Text: CancelQuery, Args: []any{0, time.Unix(0, 0), 0, time.Unix(0, 0)}},
	{Name: "terminate session", Sender: "exporter", Target: Coordinator, Text: TerminateSession, Args: []any{0, time.Unix(0, 0), 0}},
	{Name: "move to resource group", Sender: "exporter", Target: Coordinator, Text: MoveToResourceGroup, Args: []any{0, time.Unix(0, 0), 0, "default_group"}},
	{Name: "server log settings", Sender: "agent", Target: Instance, Text: always(ServerLogSettings)},
	{Name: "has pg_log_backend_memory_contexts", Sender: "agent", Target: Instance, Text: always(HasLogFunction)},
	{Name: "has pg_get_process_memory_contexts", Sender: "agent", Target: Instance, Text: always(HasContextsFunction)},
	{Name: "log location", Sender: "agent", Target: Instance, Text: always(LogLocation)},
	{Name: "log mark", Sender: "agent", Target: Instance, Text: always(LogMark("gpotel-agent conformance mark"))},
	{Name: "signal backend", Sender: "agent", Target: Instance, Text: always(SignalBackend), Args: []any{0},
		Guard: "has pg_log_backend_memory_contexts"},
	{Name: "process memory contexts", Sender: "agent", Target: Instance, Text: always(ProcessMemoryContexts), Args: []any{0, true, 1.0},
		Guard: "has pg_get_process_memory_contexts"},
	{Name: "history: server version", Sender: "history", Target: History, Text: always(HistoryServerVersion)},
	{Name: "history: rights", Sender: "history", Target: History, Text: always(HistoryRights), Args: []any{sampleHistoryTable.Schema}},
	{Name: "history: create schema", Sender: "history", Target: History, Text: always(CreateHistorySchema(sampleHistoryTable.Schema))},
	{Name: "history: relation owner", Sender: "history", Target: History, Text: always(HistoryRelationOwner),
		Args: []any{sampleHistoryTable.Schema, sampleHistoryTable.Name}},
	{Name: "history: create table", Sender: "history", Target: History, Text: func(s Shape) string {
		return CreateHistoryTable(s.Dialect, sampleHistoryTable, sampleHistoryDay)
	}},
	{Name: "history: table columns", Sender: "history", Target: History, Text: always(HistoryTableColumns),
		Args: []any{sampleHistoryTable.Schema, sampleHistoryTable.Name}},
	{Name: "history: add column", Sender: "history", Target: History,
		Text: always(AddHistoryColumn(sampleHistoryTable, HistoryColumn{Name: "added_later", Type: "bigint"}))},
	{Name: "history: create index", Sender: "history", Target: History,
		Text: always(CreateHistoryIndex(sampleHistoryTable, "sample_key", sampleHistoryTable.Key))},
	{Name: "history: partitions", Sender: "history", Target: History, Text: func(s Shape) string { return HistoryPartitions(s.Dialect) },
		Args: []any{sampleHistoryTable.Schema, sampleHistoryTable.Name}},
	{Name: "history: add partition", Sender: "history", Target: History, Text: func(s Shape) string {
		return AddHistoryPartition(s.Dialect, sampleHistoryTable, sampleHistoryDay.AddDate(0, 0, 1))
	}},
	{Name: "history: create stage", Sender: "history", Target: History, Text: func(s Shape) string {
		return CreateHistoryStage(s.Dialect, sampleHistoryTable)
	}},
	{Name: "history: rows ending between", Sender: "history", Target: History, Text: always(HistoryRowsEndBetween(sampleHistoryTable)),
		Args: []any{sampleHistoryDay, sampleHistoryDay.AddDate(0, 0, 2)}},
	{Name: "history: copy into table", Sender: "history", Target: History, Text: always(CopyHistoryRows(sampleHistoryTable, sampleHistoryTable.columnNames()))},
	{Name: "history: copy into stage", Sender: "history", Target: History, Text: always(CopyHistoryStage(sampleHistoryTable, sampleHistoryTable.columnNames()))},
	{Name: "history: insert staged rows", Sender: "history", Target: History, Text: always(InsertHistoryRows(sampleHistoryTable)),
		Args: []any{sampleHistoryDay, sampleHistoryDay.AddDate(0, 0, 2)}},
	{Name: "history: drop partition", Sender: "history", Target: History, Text: func(s Shape) string {
		return DropHistoryPartition(s.Dialect, sampleHistoryTable, sampleHistoryDay.AddDate(0, 0, 1))
	}},
}

// The history statements' conformance run creates this table (one
// column of each type the events have) and partitions of these days.
var (
	sampleHistoryTable = HistoryTable{
		Schema: "gpotel_history_conformance", Name: "queries",
		Columns: []HistoryColumn{
			{"tm_id", "bigint"}, {"sess_id", "bigint"}, {"query_start", "timestamp with time zone"}, {"ccnt", "bigint"},
			{"query_end", "timestamp with time zone"}, {"username", "text"}, {"duration", "double precision"},
			{"partial", "boolean"}, {"segments", "json"}, {"predicates", "text[]"}, {"predicate_values", "double precision[]"},
		},
		Key: []string{"tm_id", "sess_id", "query_start", "ccnt"}, NullableKey: []string{"ccnt"}, End: "query_end", DistributeBy: []string{"tm_id", "sess_id"},
	}
	sampleHistoryDay = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)
