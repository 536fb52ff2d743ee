package gpsql

import "fmt"

// What the agent sends, on a local connection to one instance (utility mode
// on a Greenplum segment), to read a backend's memory contexts.

// LogFunction makes a backend write its contexts into the server log
// (PostgreSQL 14+, Greenplum 7, Cloudberry); ContextsFunction returns them
// as rows (the PostgreSQL 18 proposal).
const (
	LogFunction      = "pg_log_backend_memory_contexts"
	ContextsFunction = "pg_get_process_memory_contexts"
)

const (
	// ServerLogSettings reads what the server logs where. Greenplum 6 lists
	// gp_log_format in pg_settings, not log_destination.
	ServerLogSettings = `SELECT version(), current_setting('server_version_num'), current_setting('logging_collector'),
		current_setting('log_destination'), current_setting('log_line_prefix'), current_user::text,
		(SELECT setting FROM pg_catalog.pg_settings WHERE name = 'gp_log_format')`
	// LogLocation reads where the logging collector writes.
	LogLocation = `SELECT current_setting('log_directory'), current_setting('log_filename')`
	// HasLogFunction guards SignalBackend.
	HasLogFunction = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_proc WHERE proname = '` + LogFunction + `')`
	// SignalBackend has backend $1 log its memory contexts.
	SignalBackend = `SELECT pg_catalog.` + LogFunction + `($1::int)`
	// HasContextsFunction guards ProcessMemoryContexts.
	HasContextsFunction = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_proc WHERE proname = '` + ContextsFunction + `')`
	// ProcessMemoryContexts reads backend $1's contexts ($2 summary, $3 timeout in seconds).
	ProcessMemoryContexts = `SELECT name, ident, type, level, path, total_bytes, total_nblocks,
		free_bytes, free_chunks, used_bytes, num_agg_contexts FROM pg_catalog.` + ContextsFunction + `($1::int, $2, $3)`
)

// LogMark has the server log message at LOG, the level of a memory-context
// block, so it reaches the log exactly when a block would. message is the
// agent's own (a pid and random hex digits), never a client's.
func LogMark(message string) string {
	return fmt.Sprintf("DO $gpotel$ BEGIN RAISE LOG '%s'; END $gpotel$", message)
}
