// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
)

// The emulated catalog offers what the real server offers and rejects what
// it rejects (dialects.go): each dialect's pg_stat_activity has exactly its
// version's columns, a view read through gp_dist_random has no
// gp_segment_id, gp_execution_segment() names the instance executing the
// row, and the functions the version lacks do not exist.
func TestCatalogIsAsStrictAsTheRealOne(t *testing.T) {
	for _, d := range []dialect.Dialect{dialect.GP6, dialect.GP7, dialect.Cloudberry} {
		t.Run(string(d), func(t *testing.T) {
			c := Start(t, Options{Hosts: 1, SegmentsPerHost: 2, Dialect: d})
			cat := dialectCatalogs[d]
			ctx := await.Context(t)
			conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close(context.Background()) })

			t.Run("ActivityHasTheVersionsColumns", func(t *testing.T) {
				rows, _ := conn.Query(ctx, `SELECT attname::text, format_type(atttypid, atttypmod) FROM pg_attribute
					WHERE attrelid = 'pg_stat_activity'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`)
				got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
					var name, typ string
					err := r.Scan(&name, &typ)
					return name + " " + typ, err
				})
				if err != nil {
					t.Fatal(err)
				}
				var want []string
				for _, cl := range cat.activity {
					want = append(want, cl.name+" "+formatType(cl.sqlType))
				}
				if !slices.Equal(got, want) {
					t.Errorf("pg_stat_activity columns\n got %v\nwant %v", got, want)
				}
			})
			t.Run("DistributedViewHasNoSegmentColumn", func(t *testing.T) {
				_, err := conn.Exec(ctx, `SELECT gp_segment_id FROM gp_dist_random('pg_stat_activity')`)
				wantSQLState(t, err, "42703") // undefined_column
			})
			t.Run("ExecutionSegmentNamesTheInstanceOfEachRow", func(t *testing.T) {
				var coordinator int
				if err := conn.QueryRow(ctx, `SELECT gp_execution_segment()`).Scan(&coordinator); err != nil {
					t.Fatal(err)
				}
				if coordinator != -1 {
					t.Errorf("gp_execution_segment() on the coordinator = %d, want -1", coordinator)
				}
				// A backend held open on each segment: the gang's own backends
				// disconnect as the scan ends, and may be gone before a row
				// is checked.
				for _, seg := range c.Segments {
					held, err := pgx.Connect(ctx, seg.DSN)
					if err != nil {
						t.Fatal(err)
					}
					defer func() { _ = held.Close(context.Background()) }()
				}
				// Every row names the instance whose postmaster started its
				// backend; after the scan the coordinator is itself again, in
				// the same statement.
				rows, _ := conn.Query(ctx, `SELECT gp_execution_segment(), pid FROM gp_dist_random('pg_stat_activity')
					UNION ALL SELECT gp_execution_segment(), pg_backend_pid()`)
				postmasters := map[int]int{}
				for _, in := range c.Instances() {
					postmasters[in.PostmasterPID] = in.Content
				}
				checked := map[int]int{}
				var segment, pid int
				if _, err := pgx.ForEachRow(rows, []any{&segment, &pid}, func() error {
					// A gang backend may have exited since: only live ones are checked.
					if parent, err := parentPID(pid); err == nil {
						if content, ok := postmasters[parent]; !ok || content != segment {
							t.Errorf("pid %d: gp_execution_segment() %d, but its postmaster %d is content %d", pid, segment, parent, content)
						}
						checked[segment]++
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if len(checked) != len(c.Instances()) {
					t.Errorf("rows checked by executing segment %v, want some on each of %d instances", checked, len(c.Instances()))
				}
			})
			t.Run("SessionIDIsACounterNotAPid", func(t *testing.T) {
				checkSessionIDs(ctx, t, c, conn)
			})
			t.Run("AbsentFunctionsDoNotExist", func(t *testing.T) {
				for _, f := range []string{"pg_log_backend_memory_contexts", "pg_blocking_pids"} {
					var n int
					if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_proc WHERE proname = $1`, f).Scan(&n); err != nil {
						t.Fatal(err)
					}
					absent := slices.ContainsFunc(cat.absentFunctions, func(s string) bool { return len(s) > len(f) && s[:len(f)+1] == f+"(" })
					if absent != (n == 0) {
						t.Errorf("%s: %d pg_proc rows, absent on %s: %v", f, n, d, absent)
					}
					if absent {
						_, err := conn.Exec(ctx, "SELECT "+f+"(pg_backend_pid())")
						wantSQLState(t, err, "42883") // undefined_function
					}
				}
			})
			t.Run("ResourceQueuesAsTheRealCatalog", func(t *testing.T) {
				checkResourceQueues(ctx, t, c, conn)
			})
			t.Run("ClusterActivityViewWhereTheVersionHasOne", func(t *testing.T) {
				var segments int
				err := conn.QueryRow(ctx, `SELECT count(DISTINCT gp_segment_id) FROM gp_stat_activity`).Scan(&segments)
				if !cat.clusterActivity {
					wantSQLState(t, err, "42P01") // undefined_table
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if segments != len(c.Instances()) {
					t.Errorf("gp_stat_activity covers %d instances, want %d", segments, len(c.Instances()))
				}
			})
		})
	}
}

// checkResourceQueues: pg_resqueue and pg_roles.rolresqueue have Greenplum
// 6's types, every role is in pg_default (6055) until assigned another
// queue, and what the types refuse there is refused here.
func checkResourceQueues(ctx context.Context, t *testing.T, c *Cluster, conn *pgx.Conn) {
	t.Helper()
	for _, col := range []struct{ relation, column, typ string }{
		{"pg_resqueue", "rsqname", "name"}, {"pg_resqueue", "rsqcountlimit", "real"}, {"pg_roles", "rolresqueue", "oid"},
	} {
		var typ string
		if err := conn.QueryRow(ctx, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = $1::regclass AND attname = $2`,
			"pg_catalog."+col.relation, col.column).Scan(&typ); err != nil || typ != col.typ {
			t.Errorf("%s.%s: type %q (%v), want %s", col.relation, col.column, typ, err, col.typ)
		}
	}
	queueOf := func(role string) (oid int64, name string) {
		t.Helper()
		if err := conn.QueryRow(ctx, `SELECT q.oid::bigint, q.rsqname::text FROM pg_roles r JOIN pg_resqueue q ON q.oid = r.rolresqueue WHERE r.rolname = $1`,
			role).Scan(&oid, &name); err != nil {
			t.Fatalf("the queue of %s: %v", role, err)
		}
		return oid, name
	}
	if oid, name := queueOf(UserRole); oid != rsqDefaultQueue || name != rsqDefaultQueueName {
		t.Errorf("%s is in queue %d %s, want %d %s", UserRole, oid, name, rsqDefaultQueue, rsqDefaultQueueName)
	}
	_, err := conn.Exec(ctx, `SELECT rolname FROM pg_roles WHERE rolresqueue = 'pg_default'`)
	wantSQLState(t, err, "22P02") // invalid_text_representation: an oid is no name
	_, err = conn.Exec(ctx, `SELECT rsqname + 1 FROM pg_resqueue`)
	wantSQLState(t, err, "42883") // undefined_function: name has no +
	if err := c.AssignResourceQueue(ctx, UserRole, "etl_queue"); err != nil {
		t.Fatal(err)
	}
	if oid, name := queueOf(UserRole); oid == rsqDefaultQueue || name != "etl_queue" {
		t.Errorf("after AssignResourceQueue, %s is in queue %d %s, want a new etl_queue", UserRole, oid, name)
	}
	if _, name := queueOf(AdminRole); name != rsqDefaultQueueName {
		t.Errorf("%s moved to %s with another role", AdminRole, name)
	}
}

// checkSessionIDs: on the coordinator a session's sess_id is a counter, as
// Greenplum's gp_session_id is: two backends connected one after the other
// get increasing numbers, each keeps its own across reads, and none is any
// backend's pid; a segment backend tagged with the session carries it.
func checkSessionIDs(ctx context.Context, t *testing.T, c *Cluster, conn *pgx.Conn) {
	t.Helper()
	var ids []int
	for range 2 {
		other, err := pgx.Connect(ctx, c.CoordinatorDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = other.Close(context.Background()) }()
		var id, again int
		if err := other.QueryRow(ctx, MySessIDSQL).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if err := other.QueryRow(ctx, MySessIDSQL).Scan(&again); err != nil {
			t.Fatal(err)
		}
		if again != id {
			t.Errorf("a backend's sess_id changed from %d to %d between two reads", id, again)
		}
		ids = append(ids, id)
	}
	if ids[1] <= ids[0] {
		t.Errorf("sess_ids %v of two backends connected one after the other: want a counter", ids)
	}
	seg := c.Segments[0]
	cfg, err := pgx.ParseConfig(seg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = SessionTagPrefix + strconv.Itoa(ids[1])
	tagged, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tagged.Close(context.Background()) }()

	rows, _ := conn.Query(ctx, `SELECT gp_execution_segment(), pid, sess_id FROM gp_dist_random('pg_stat_activity')
		UNION ALL SELECT -1, pid, sess_id FROM pg_stat_activity`)
	type row struct{ content, pid, sess int }
	var all []row
	var r row
	if _, err := pgx.ForEachRow(rows, []any{&r.content, &r.pid, &r.sess}, func() error { all = append(all, r); return nil }); err != nil {
		t.Fatal(err)
	}
	pids := map[int]bool{}
	for _, r := range all {
		pids[r.pid] = true
	}
	taggedSeen := false
	for _, r := range all {
		if r.sess > 0 && pids[r.sess] {
			t.Errorf("content %d pid %d: sess_id %d is the pid of a backend", r.content, r.pid, r.sess)
		}
		if r.pid == int(tagged.PgConn().PID()) {
			taggedSeen = true
			if r.sess != ids[1] {
				t.Errorf("the segment backend tagged with session %d has sess_id %d", ids[1], r.sess)
			}
		}
	}
	if !taggedSeen {
		t.Errorf("the tagged segment backend %d is not among the rows %v", tagged.PgConn().PID(), all)
	}
}

// parentPID reads a process's parent from /proc.
func parentPID(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command may hold spaces and parentheses: the fields follow its last ')'.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 2 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	return strconv.Atoi(fields[1])
}

// formatType is how format_type() spells the testbed's short type names.
func formatType(t string) string {
	switch t {
	case "timestamptz":
		return "timestamp with time zone"
	}
	return t
}

func wantSQLState(t *testing.T, err error, code string) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != code {
		t.Errorf("error %v, want SQLSTATE %s", err, code)
	}
}

// The views gpotel reads for spill, lock waits and session memory have the
// real columns and types. Greenplum 6's lists were read with \d on a real
// 6.24.3; the others from the sources dialects.go names.
func TestGreenplumViewsHaveTheRealColumns(t *testing.T) {
	locks := "locktype text, database oid, relation oid, page integer, tuple smallint, virtualxid text, transactionid xid, classid oid, objid oid, " +
		"objsubid smallint, virtualtransaction text, pid integer, mode text, granted boolean, fastpath boolean"
	gpLocks := ", mppsessionid integer, mppiswriter boolean, gp_segment_id integer"
	perQuery := "datname name, pid integer, sess_id integer, command_cnt integer, usename name, query text, segid integer, size numeric, numfiles bigint"
	perSegment := "segid smallint, size numeric, numfiles bigint"
	memoryHead := "datname name, sess_id integer, "
	memoryTail := "usename name, query text, segid integer, vmem_mb integer, is_runaway boolean, qe_count integer, active_qe_count integer, " +
		"dirty_qe_count integer, runaway_vmem_mb integer, runaway_command_cnt integer, idle_start timestamp with time zone"
	for _, tc := range []struct {
		dialect dialect.Dialect
		want    map[string]string
	}{
		{dialect.GP6, map[string]string{
			"pg_catalog.pg_locks":                            locks + gpLocks,
			"gp_toolkit.gp_workfile_usage_per_query":         perQuery,
			"gp_toolkit.gp_workfile_usage_per_segment":       perSegment,
			"session_state.session_level_memory_consumption": memoryHead + memoryTail,
		}},
		{dialect.GP7, map[string]string{
			"pg_catalog.pg_locks":                                  locks + gpLocks,
			"gp_toolkit.gp_workfile_usage_per_query":               perQuery,
			"gp_toolkit.resgroup_session_level_memory_consumption": memoryHead + "rsgid integer, rsgname text, " + memoryTail,
		}},
		{dialect.Cloudberry, map[string]string{
			"pg_catalog.pg_locks":                                  locks + ", waitstart timestamp with time zone" + gpLocks,
			"gp_toolkit.gp_workfile_usage_per_query":               perQuery,
			"gp_toolkit.resgroup_session_level_memory_consumption": memoryHead + "rsgid integer, rsgname text, " + memoryTail,
		}},
	} {
		t.Run(string(tc.dialect), func(t *testing.T) {
			c := Start(t, Options{Hosts: 1, SegmentsPerHost: 1, Dialect: tc.dialect})
			ctx := await.Context(t)
			conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close(context.Background()) })
			for view, want := range tc.want {
				var got string
				err := conn.QueryRow(ctx, `SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
					FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped`, view).Scan(&got)
				if err != nil {
					t.Errorf("%s: %v", view, err)
					continue
				}
				if got != want {
					t.Errorf("%s columns\n got %s\nwant %s", view, got, want)
				}
				if _, err := conn.Exec(ctx, "SELECT * FROM "+view); err != nil {
					t.Errorf("SELECT * FROM %s: %v", view, err)
				}
			}
		})
	}
}
