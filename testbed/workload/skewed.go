// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/gpotel/gpotel/testbed/cluster"
)

// SkewedCPU is a query whose rows all live on one segment, run as
// dispatched queries of Spec.QueryDuration one after another: the
// coordinator backend is active in each query while the backend of
// Spec.HotContent burns CPU, and the session's other segment backends hold
// their connections and wait, as the executors of the segments without rows do.
const SkewedCPU Kind = "skewed_cpu"

// dispatch runs the session's work the way Greenplum runs a query: one
// statement on the coordinator backend for as long as the query lasts (its
// dispatcher waits for the executors), one on each segment backend that
// works, all ending together; the others stay idle. The coordinator's
// query_start is then the query's start, as on Greenplum, and the
// processor's query timeline (docs/pipeline.md) covers the segments' work.
func (s *Session) dispatch(ctx context.Context, g gang, works func(*backend) bool) error {
	for time.Now().Before(s.until) {
		end := time.Now().Add(s.spec.QueryDuration)
		if end.After(s.until) {
			end = s.until
		}
		dispatched := s.dispatchSQL(g)
		err := eachBackend(ctx, g, func(ctx context.Context, b *backend) error {
			var sql string
			switch {
			case works(b):
				sql = cpuUntil(end)
			case b.content == cluster.CoordinatorContent:
				sql = fmt.Sprintf("SELECT pg_sleep_until('%s')", pgTime(end))
			default:
				return nil
			}
			if b.content != cluster.CoordinatorContent {
				sql = dispatched + sql
			}
			_, err := b.conn.Exec(ctx, sql)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// maybeDispatched runs work on every backend, or, with Spec.Dispatched and
// segments to work on, on the segment backends while the coordinator
// backend waits in one statement until the end. The statement says what
// the session does, as its query text.
func (s *Session) maybeDispatched(ctx context.Context, g gang, work func(context.Context, *backend) error) error {
	if !s.spec.Dispatched || len(g) == 1 {
		return eachBackend(ctx, g, work)
	}
	dispatched := s.dispatchSQL(g)
	return eachBackend(ctx, g, func(ctx context.Context, b *backend) error {
		if b.content != cluster.CoordinatorContent {
			if dispatched != "" {
				if _, err := b.conn.Exec(ctx, dispatched); err != nil {
					return err
				}
			}
			return work(ctx, b)
		}
		_, err := b.conn.Exec(ctx, fmt.Sprintf("/* gpotel workload %s: %s on every segment */ SELECT pg_sleep_until('%s')", s.Name, s.Kind, pgTime(s.until)))
		return err
	})
}

// dispatchSQL is the statement that hands the segment backends the command
// count of the coordinator's next statement, as Greenplum's dispatcher
// sends its count with each statement it dispatches (testbed/README.md,
// query identity); "" on PostgreSQL, which counts no commands. The
// coordinator's statement is sent as a simple query: it counts one at its
// start and one when its plan starts, and dispatches the second.
func (s *Session) dispatchSQL(g gang) string {
	if !s.cluster.Dialect.Greenplum() {
		return ""
	}
	idle, _ := strconv.ParseInt(g[0].conn.PgConn().ParameterStatus(cluster.CommandCountSetting), 10, 32)
	return fmt.Sprintf("SET %s = %d; ", cluster.DispatchCommandCountSetting, idle+2)
}

// cpuUntil is one statement that burns CPU until end (the instances share the host's clock).
func cpuUntil(end time.Time) string {
	return fmt.Sprintf(`DO $$ BEGIN
  WHILE clock_timestamp() < '%s' LOOP
    PERFORM sum(sqrt(g::float8)) FROM generate_series(1, 20000) g;
  END LOOP;
END $$`, pgTime(end))
}

// pgTime is t as a timestamptz literal.
func pgTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.999999") + "+00" }
