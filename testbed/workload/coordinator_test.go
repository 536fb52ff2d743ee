// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workload_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/workload"
)

// On Greenplum a session's executors end with its dispatcher: once its
// coordinator backend is terminated, its segment backends exit too, also
// while the session sits idle in a transaction; the workload run ends as
// one the server ended.
func TestAnEndedCoordinatorEndsItsExecutors(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Hosts: 1, SegmentsPerHost: 2, Dialect: dialect.GP6})
	conn, err := pgx.Connect(context.Background(), c.CoordinatorDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	// backends counts the session's backends, in state if it is given, on
	// the coordinator and on the segments.
	backends := func(t *testing.T, sessID int, state string) (coordinator, segments int) {
		if err := conn.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM pg_stat_activity WHERE sess_id = $1 AND ($2 = '' OR state = $2)),
			(SELECT count(*) FROM gp_dist_random('pg_stat_activity') WHERE sess_id = $1 AND ($2 = '' OR state = $2))`,
			sessID, state).Scan(&coordinator, &segments); err != nil {
			t.Fatal(err)
		}
		return coordinator, segments
	}

	for _, kind := range []workload.Kind{workload.IdleInTransaction, workload.HeldSort} {
		t.Run(string(kind), func(t *testing.T) {
			ctx := await.Context(t)
			s := start(t, c, workload.Spec{Name: "qd-" + string(kind), Kind: kind, Duration: untilStopped, MemoryBytes: 4 << 20})
			sessID := s.SessID()
			await.Until(t, "every backend of the session idle in its transaction", func() bool {
				mustRun(t, s)
				coordinator, segments := backends(t, sessID, "idle in transaction")
				return coordinator == 1 && segments == len(c.Segments)
			})
			if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend($1)", s.CoordinatorPID()); err != nil {
				t.Fatal(err)
			}
			await.Until(t, "no segment backend of the session left on any segment", func() bool {
				_, segments := backends(t, sessID, "")
				return segments == 0
			})
			select {
			case <-s.Done():
			case <-ctx.Done():
				t.Fatalf("the workload still runs without its coordinator backend: pids %v", s.Pids())
			}
			if err := s.Wait(); !workload.EndedByServer(err) {
				t.Errorf("the workload ended with %v, want it ended by the server", err)
			}
			assertExited(t, s.History())
		})
	}
}
