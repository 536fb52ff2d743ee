package cluster

import (
	"fmt"
)

// The server log layouts an instance can write (Description.LogDestination).
const (
	// LogStderr is text lines with log_line_prefix = '%m [%p] %q%u@%d ',
	// without the logging collector, into the file pg_ctl -l names.
	LogStderr = "stderr"
	// LogCSV is PostgreSQL's csvlog through the logging collector into log/.
	LogCSV = "csvlog"
	// LogJSON is PostgreSQL 15's jsonlog through the logging collector into log/.
	LogJSON = "jsonlog"
	// LogGreenplumCSV is the layout Greenplum's logging collector writes with
	// gp_log_format=csv (its default): 30 columns into
	// <log_directory>/gpdb-%Y-%m-%d_%H%M%S.csv. PostgreSQL cannot write it, so
	// the testbed converts each instance's csvlog into it (gplog.go).
	LogGreenplumCSV = "gpcsv"
)

// DefaultLogDestination is the layout the real server of a dialect writes
// by default: Greenplum 6, 7 and Cloudberry their own CSV (log_destination
// is defunct there), PostgreSQL stderr.
func DefaultLogDestination(d Dialect) string {
	if d == DialectPostgreSQL {
		return LogStderr
	}
	return LogGreenplumCSV
}

// greenplumLogDirectory is the default log_directory of a Greenplum dialect.
func greenplumLogDirectory(d Dialect) string {
	if d == DialectGP6 {
		return "pg_log"
	}
	return "log"
}

// logDestination is the layout opts ask for, checked against the dialect.
func (o Options) logDestination() (string, error) {
	switch o.LogDestination {
	case "":
		return DefaultLogDestination(o.Dialect), nil
	case LogStderr, LogCSV, LogJSON:
		return o.LogDestination, nil
	case LogGreenplumCSV:
		if o.Dialect == DialectPostgreSQL {
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
		return fmt.Sprintf("logging_collector = on\nlog_destination = 'csvlog'\nlog_directory = '%s'\nlog_filename = '%s'\n",
			greenplumLogDirectory(c.Dialect), greenplumLogFilename)
	}
	return "logging_collector = off\nlog_destination = 'stderr'\nlog_line_prefix = '%m [%p] %q%u@%d '\n"
}

// greenplumLogFilename is Greenplum's default log_filename.
const greenplumLogFilename = "gpdb-%Y-%m-%d_%H%M%S.csv"
