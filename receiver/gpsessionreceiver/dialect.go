package gpsessionreceiver

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gpotel/gpotel/internal/gpsql"
)

var greenplumVersion = regexp.MustCompile(`Greenplum Database (\d+)\.`)

// detectDialect names the server's flavour from its version() string.
func detectDialect(version string) (string, error) {
	switch {
	case strings.Contains(version, "Cloudberry"):
		return DialectCloudberry, nil
	case strings.Contains(version, "Greenplum"):
		m := greenplumVersion.FindStringSubmatch(version)
		if m == nil {
			return "", fmt.Errorf("version() %q names Greenplum without a recognisable version", version)
		}
		major, _ := strconv.Atoi(m[1])
		switch {
		case major == 6:
			return DialectGP6, nil
		case major >= 7:
			return DialectGP7, nil
		default:
			return "", fmt.Errorf("version() %q: Greenplum %d is not supported (6 or later)", version, major)
		}
	case strings.HasPrefix(version, "PostgreSQL "):
		return DialectPostgreSQL, nil
	default:
		return "", fmt.Errorf("version() %q: not Greenplum, Cloudberry or PostgreSQL; set dialect explicitly", version)
	}
}

// isGreenplumFamily tells whether the dialect has segments and gp_dist_random.
func isGreenplumFamily(dialect string) bool { return gpsql.IsGreenplumFamily(dialect) }

// clientBackendTypes are the backend_type values of processes that work for a client session.
var clientBackendTypes = map[string]bool{"client backend": true, "parallel worker": true}

// isSystemProcess marks a process that does not work for a client session.
func isSystemProcess(sessionID int64, backendType string) bool {
	if sessionID <= 0 {
		return true
	}
	return backendType != "" && !clientBackendTypes[backendType]
}
