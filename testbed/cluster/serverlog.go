// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"fmt"

	"github.com/gpotel/gpotel/internal/dialect"
)

// The server log layouts an instance can write (Description.LogDestination).
const (
	// LogStderr is text lines with log_line_prefix = '%m [%p] %q%u@%d ',
	// without the logging collector, into the file pg_ctl -l names.
	LogStderr = dialect.LogStderr
	// LogCSV is PostgreSQL's csvlog through the logging collector into log/.
	LogCSV = "csvlog"
	// LogJSON is PostgreSQL 15's jsonlog through the logging collector into log/.
	LogJSON = "jsonlog"
	// LogGreenplumCSV is the layout Greenplum's logging collector writes with
	// gp_log_format=csv (its default): 30 columns into the dialect's
	// ServerLog directory and file names. PostgreSQL cannot write it, so
	// the testbed converts each instance's csvlog into it (gplog.go).
	LogGreenplumCSV = dialect.LogGreenplumCSV
)

// DefaultLogDestination is the layout the real server of a dialect writes
// by default: Greenplum 6, 7 and Cloudberry their own CSV (log_destination
// is defunct there), PostgreSQL stderr.
func DefaultLogDestination(d dialect.Dialect) string { return d.Facts().ServerLog.Layout }

// logDestination is the layout opts ask for, checked against the dialect.
func (o Options) logDestination() (string, error) {
	switch o.LogDestination {
	case "":
		return DefaultLogDestination(o.Dialect), nil
	case LogStderr, LogCSV, LogJSON:
		return o.LogDestination, nil
	case LogGreenplumCSV:
		if !o.Dialect.Greenplum() {
			return "", fmt.Errorf("log destination %s: only a Greenplum dialect writes it", LogGreenplumCSV)
		}
		return LogGreenplumCSV, nil
	}
	return "", fmt.Errorf("unknown log destination %q (want %s, %s, %s or %s)", o.LogDestination, LogStderr, LogCSV, LogJSON, LogGreenplumCSV)
}

// logSettings configure an instance's server log. For Greenplum's layout
// the server reports what Greenplum would (log_directory, log_filename)
// and writes csvlog into the same directory; PostgreSQL appends .csv to a
// log_filename that does not end in .log, so its own files (….csv.csv) do
// not take the converted files' names.
func (c *Cluster) logSettings() string {
	switch c.LogDestination {
	case LogCSV, LogJSON:
		return fmt.Sprintf("logging_collector = on\nlog_destination = '%s'\nlog_directory = 'log'\n", c.LogDestination)
	case LogGreenplumCSV:
		l := c.Dialect.Facts().ServerLog
		return fmt.Sprintf("logging_collector = on\nlog_destination = 'csvlog'\nlog_directory = '%s'\nlog_filename = '%s'\n", l.Directory, l.Filename)
	}
	return "logging_collector = off\nlog_destination = 'stderr'\nlog_line_prefix = '%m [%p] %q%u@%d '\n"
}
