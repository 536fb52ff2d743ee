// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsql

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The application_name of gpotel's own connections, for a DBA reading
// pg_stat_activity. Any user may take these names too: the collector knows
// its own sessions by their backend pid (internal/ownbackends).
const (
	// ApplicationName is the gpsession receiver's monitoring connection.
	ApplicationName = "gpotel"
	// ActionsApplicationName is the sessionstate exporter's action connection.
	ActionsApplicationName = "gpotel-actions"
)

// SearchPath is the search_path of every gpotel connection, set when it
// connects: gpotel's statements name only the catalog's objects, so no
// schema a database user can create objects in (public, or one a role's
// own search_path puts first) may shadow a view, function or operator they
// name. pg_temp last: a temporary object never shadows one either.
const SearchPath = "pg_catalog, pg_temp"

var greenplumVersion = regexp.MustCompile(`Greenplum Database (\d+)\.`)

// DetectDialect names the server's flavour from its version() string.
func DetectDialect(version string) (string, error) {
	switch {
	case strings.Contains(version, "Cloudberry"):
		return Cloudberry, nil
	case strings.Contains(version, "Greenplum"):
		m := greenplumVersion.FindStringSubmatch(version)
		if m == nil {
			return "", fmt.Errorf("version() %q names Greenplum without a recognisable version", version)
		}
		major, _ := strconv.Atoi(m[1])
		switch {
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
