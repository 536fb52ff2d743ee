// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package dialect names the database flavours gpotel speaks and declares,
// once, what gpotel knows of each: how version() names it, how a direct
// connection to a segment asks for utility mode, where and how its server
// logs, and which of the views and functions gpotel reads it has. The
// receiver, the exporters, the agent's memory-context path and the testbed
// all branch on these facts, never on a dialect's name.
package dialect

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Dialect is a database flavour gpotel speaks. In configuration it is its
// name, one of All's, or Auto.
type Dialect string

// The dialects.
const (
	GP6        Dialect = "gp6"
	GP7        Dialect = "gp7"
	Cloudberry Dialect = "cloudberry" // Apache Cloudberry: Greenplum 7's catalog shape, its own version()
	PostgreSQL Dialect = "postgresql"
)

// Auto is the setting that asks for the dialect the server's version()
// names (Detect). It is no dialect: it has no facts.
const Auto Dialect = "auto"

// All lists every dialect, in the order docs and errors name them.
var All = []Dialect{GP6, GP7, Cloudberry, PostgreSQL}

// The server log layouts a dialect writes by default.
const (
	// LogStderr is text lines, with the server's log_line_prefix.
	LogStderr = "stderr"
	// LogGreenplumCSV is the CSV Greenplum's logging collector writes with
	// gp_log_format=csv (its default): 30 columns, log_destination defunct.
	LogGreenplumCSV = "gpcsv"
)

// Facts are what gpotel's code branches on for a dialect.
type Facts struct {
	// Greenplum: the server has segments, pg_stat_activity.sess_id and
	// gp_dist_random (Greenplum 6, 7 and Cloudberry).
	Greenplum bool
	// UtilityMode is the startup option that lets a direct connection to
	// a segment instance in; "" where there are no segments.
	UtilityMode string
	// ServerLog is how and where the server logs by default.
	ServerLog ServerLog
	// SessionMemoryView is the server's per-session, per-segment vmem
	// view, which SessionMemoryExtension creates; "" where there is none.
	SessionMemoryView      string
	SessionMemoryExtension string
	// MoveQuerySchema holds pg_resgroup_move_query; "" where there are no
	// resource groups.
	MoveQuerySchema string
	// LegacyPartitions: tables are partitioned Greenplum 6's way
	// (PARTITION BY RANGE (…) (PARTITION …), pg_partitions, ADD and DROP
	// PARTITION), not with PostgreSQL's declarative partitions.
	LegacyPartitions bool
}

// ServerLog is a server's default log: its layout (LogStderr or
// LogGreenplumCSV), and, for a log the logging collector writes, its
// log_directory (relative to the data directory) and log_filename.
type ServerLog struct {
	Layout, Directory, Filename string
}

// greenplumLogFilename is Greenplum's default log_filename.
const greenplumLogFilename = "gpdb-%Y-%m-%d_%H%M%S.csv"

// greenplum7 are Greenplum 7's facts (gpdb-archive's 7.x line).
var greenplum7 = Facts{
	Greenplum:              true,
	UtilityMode:            "-c gp_role=utility",
	ServerLog:              ServerLog{Layout: LogGreenplumCSV, Directory: "log", Filename: greenplumLogFilename},
	SessionMemoryView:      "gp_toolkit.resgroup_session_level_memory_consumption",
	SessionMemoryExtension: "gp_toolkit",
	MoveQuerySchema:        "pg_catalog",
}

// facts is each dialect's, read from the server's source (and, for
// Greenplum 6, checked on a real 6.24.3: docs/compatibility.md).
var facts = map[Dialect]Facts{
	GP6: {
		Greenplum:              true,
		UtilityMode:            "-c gp_session_role=utility",
		ServerLog:              ServerLog{Layout: LogGreenplumCSV, Directory: "pg_log", Filename: greenplumLogFilename},
		SessionMemoryView:      "session_state.session_level_memory_consumption",
		SessionMemoryExtension: "gp_internal_tools",
		MoveQuerySchema:        "gp_toolkit",
		LegacyPartitions:       true,
	},
	GP7: greenplum7,
	// Cloudberry is Greenplum 7's fork: what gpotel reads is the same.
	Cloudberry: greenplum7,
	PostgreSQL: {
		ServerLog: ServerLog{Layout: LogStderr},
	},
}

// Facts are the dialect's; the zero Facts for Auto or an unknown name.
func (d Dialect) Facts() Facts { return facts[d] }

// Greenplum tells whether the dialect has segments, sess_id and gp_dist_random.
func (d Dialect) Greenplum() bool { return facts[d].Greenplum }

// Known tells whether d is one of All.
func (d Dialect) Known() bool {
	_, ok := facts[d]
	return ok
}

// UnmarshalText reads a dialect's name, or "auto", from configuration or
// a testbed's description. An empty text is the zero Dialect, no dialect,
// which whoever needs one refuses (a config's Validate) or ignores.
func (d *Dialect) UnmarshalText(text []byte) error {
	v := Dialect(text)
	if v != "" && v != Auto && !v.Known() {
		return fmt.Errorf("dialect %q: want %s", text, Names(true))
	}
	*d = v
	return nil
}

// Names lists the dialects' names for a message ("gp6, gp7, cloudberry or
// postgresql"), with auto first when withAuto.
func Names(withAuto bool) string {
	names := make([]string, 0, len(All)+1)
	if withAuto {
		names = append(names, string(Auto))
	}
	for _, d := range All {
		names = append(names, string(d))
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// greenplumMajor reads Greenplum's major version out of version().
var greenplumMajor = regexp.MustCompile(`Greenplum Database (\d+)\.`)

// Detect names the dialect of the server whose version() this is.
func Detect(version string) (Dialect, error) {
	switch {
	case strings.Contains(version, "Cloudberry"):
		return Cloudberry, nil
	case strings.Contains(version, "Greenplum"):
		m := greenplumMajor.FindStringSubmatch(version)
		if m == nil {
			return "", fmt.Errorf("version() %q names Greenplum without a recognisable version", version)
		}
		major, err := strconv.Atoi(m[1])
		switch {
		case err != nil:
			return "", fmt.Errorf("version() %q: Greenplum's major version %s does not fit an int", version, m[1])
		case major == 6:
			return GP6, nil
		case major >= 7:
			return GP7, nil
		default:
			return "", fmt.Errorf("version() %q: Greenplum %d is not supported (6 or later)", version, major)
		}
	case strings.HasPrefix(version, "PostgreSQL "):
		return PostgreSQL, nil
	default:
		return "", fmt.Errorf("version() %q: not Greenplum, Cloudberry or PostgreSQL; set dialect explicitly", version)
	}
}
