// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsql

import (
	"strings"
	"testing"

	"github.com/gpotel/gpotel/internal/dialect"
)

func TestBackendsPerDialect(t *testing.T) {
	gp7 := Backends(Shape{Dialect: dialect.GP7, ActivityColumns: map[string]bool{"backend_type": true, "sess_id": true}})
	if !strings.Contains(gp7, "gp_execution_segment()::bigint, pid::bigint") || !strings.Contains(gp7, "FROM gp_dist_random('pg_stat_activity') UNION "+
		"ALL") || !strings.Contains(gp7, "backend_type::text") {
		t.Errorf("gp7: %s", gp7)
	}
	gp6 := Backends(Shape{Dialect: dialect.GP6, ActivityColumns: map[string]bool{"sess_id": true}})
	if !strings.Contains(gp6, "NULL::text") || !strings.Contains(gp6, "gp_dist_random") {
		t.Errorf("gp6 without backend_type: %s", gp6)
	}
	pg := Backends(Shape{Dialect: dialect.PostgreSQL, ActivityColumns: map[string]bool{"leader_pid": true, "backend_type": true}})
	if strings.Contains(pg, "gp_dist_random") || !strings.Contains(pg, "coalesce(leader_pid, pid)") || !strings.Contains(pg, "SELECT -1::bigint") {
		t.Errorf("postgresql: %s", pg)
	}
}

func TestSessionsSelectsMissingColumnsAsNull(t *testing.T) {
	q := Sessions(Shape{ActivityColumns: map[string]bool{"pid": true, "query": true, "waiting": true}, QueryMaxLength: 100})
	for _, want := range []string{"pid::bigint", "NULL::bigint", "waiting::boolean", "NULL::timestamptz", "left(query, 101)"} {
		if !strings.Contains(q, want) {
			t.Errorf("session query lacks %q: %s", want, q)
		}
	}
	if q := Sessions(Shape{ActivityColumns: map[string]bool{"query": true}}); strings.Contains(q, "left(") {
		t.Errorf("query_max_length 0 still reads the text: %s", q)
	}
}
