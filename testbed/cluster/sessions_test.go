// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// Every coordinator backend of one server life has its own sess_id, from
// one counter as Greenplum 6's gp_session_id: the con<N> its title shows,
// also when its row is first read after it exited (the extension's record
// of it outlives it), and for a backend the extension holds no number of,
// a new number of that same counter.
func TestSessionIDsAreNeverReused(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Hosts: 1, SegmentsPerHost: 1, Dialect: dialect.GP6})
	ctx := await.Context(t)
	observer := connect(t, c.CoordinatorDSN, nil)
	sessionOf := func(pid int, started time.Time) int64 {
		var id int64
		if err := observer.QueryRow(ctx, "SELECT gpotel_testbed.session_of($1, $2)", pid, started).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	owners := map[int64]string{}
	var newest int64 // the last number the counter handed out
	claim := func(id int64, backend, how string) {
		t.Helper()
		if other, ok := owners[id]; ok && other != backend {
			t.Errorf("sess_id %d (%s) of %s already names %s", id, how, backend, other)
		}
		owners[id] = backend
	}
	for round := range 30 {
		conn := connect(t, c.CoordinatorDSN, nil)
		pid := backendPID(t, conn)
		var started time.Time
		if err := conn.QueryRow(ctx, "SELECT backend_start FROM gpotel_testbed.pg_stat_activity WHERE pid = pg_backend_pid()").Scan(&started); err != nil {
			t.Fatal(err)
		}
		backend := fmt.Sprintf("backend %d started %s", pid, started.Format(time.RFC3339Nano))
		tl, err := readTitle(pid)
		if err != nil {
			t.Fatal(err)
		}
		claim(tl.sess, backend, "its title's")
		if tl.sess <= newest {
			t.Errorf("%s connected as con%d, not above the %d handed out before it", backend, tl.sess, newest)
		}
		newest = tl.sess
		switch round % 3 {
		case 0: // read while it runs
			got := int64(sessIDOf(t, conn))
			claim(got, backend, "read while it runs")
			if got != tl.sess {
				t.Errorf("%s: sess_id %d, its title says con%d", backend, got, tl.sess)
			}
		case 1: // first read once it has exited: the exiting backend's row, its slot forgotten
			_ = conn.Close(ctx)
			await.NoError(t, backend+" gone", func() error {
				var n int
				if err := observer.QueryRow(context.WithoutCancel(ctx), "SELECT count(*) FROM gpotel_testbed.pg_stat_activity WHERE pid = $1", pid).Scan(&n); err != nil || n == 0 {
					return err
				}
				return fmt.Errorf("%d rows", n)
			})
			got := sessionOf(pid, started)
			claim(got, backend, "read after it exited")
			if got != tl.sess {
				t.Errorf("%s read after it exited: sess_id %d, its title said con%d", backend, got, tl.sess)
			}
		case 2: // a backend the extension never numbered: this pid's holder a second earlier
			earlier := started.Add(-time.Second)
			unknown := fmt.Sprintf("backend %d started %s", pid, earlier.Format(time.RFC3339Nano))
			got := sessionOf(pid, earlier)
			claim(got, unknown, "never numbered by the extension")
			if got <= newest {
				t.Errorf("%s, never numbered: sess_id %d is not a new number (%d were handed out before)", unknown, got, newest)
			}
			newest = max(newest, got)
		}
	}
}
