// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/gpsql"
	"github.com/gpotel/gpotel/internal/gpsql/gpsqltest"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// statementLog records every statement a connection sends and whether the
// server took it.
type statementLog struct {
	mu     sync.Mutex
	sent   []string
	failed map[string]error
}

type traceKey struct{}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent = append(l.sent, data.SQL)
	return context.WithValue(ctx, traceKey{}, data.SQL)
}

func (l *statementLog) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	if data.Err == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed == nil {
		l.failed = map[string]error{}
	}
	l.failed[ctx.Value(traceKey{}).(string)] = data.Err
}

// Every statement gpotel sends (internal/gpsql) runs on every dialect the
// testbed emulates, whose catalogs are as strict as the real ones
// (testbed/cluster/dialects.go); and everything the receiver sends on its
// production path is one of them, so nothing escapes the table.
func TestEveryStatementRunsOnEachDialect(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testbed per dialect")
	}
	for _, opts := range cluster.SmallClusters(2) {
		d := opts.Dialect
		t.Run(string(d), func(t *testing.T) {
			c := cluster.Start(t, opts)
			ctx := await.Context(t)

			// The production path: discovery, topology and resource groups.
			log := &statementLog{}
			src := newPGSource(testbedConfig(c))
			src.tracer = log
			t.Cleanup(src.Close)
			st, err := src.Discover(ctx)
			if err != nil {
				t.Fatalf("discovery: %v", err)
			}
			if st.Dialect.Greenplum() {
				if _, err := src.SegmentConfiguration(ctx); err != nil {
					t.Fatalf("segment configuration: %v", err)
				}
				if st.ResourceGroupsErr != nil {
					t.Fatalf("resource groups: %v", st.ResourceGroupsErr)
				}
				if st.ResourceQueuesErr != nil {
					t.Fatalf("resource queues: %v", st.ResourceQueuesErr)
				}
			}
			// The Greenplum figures' own read, on the receiver's pool.
			shape := src.shape(st.Dialect, src.columns)
			pool, err := src.getPool()
			if err != nil {
				t.Fatal(err)
			}
			pc, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			figures := readGreenplumFigures(ctx, pc.Conn(), shape)
			pc.Release()
			t.Logf("Greenplum figures: spill %v, lock waits %v, session memory %v", figures.SpillErr, figures.WaitsErr, figures.MemoryErr)
			for sql, err := range log.failed {
				t.Errorf("the server refused %q: %v", sql, err)
			}
			checkEverySegmentDiscovered(t, c, st)

			// Every statement of the table, for the shape the receiver found.
			coordinator, err := pgx.Connect(ctx, c.CoordinatorDSN)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = coordinator.Close(context.Background()) })
			// An agent's statements go to an instance of its host: a segment
			// on the Greenplum family.
			instanceDSN := c.CoordinatorDSN
			if len(c.Segments) > 0 {
				instanceDSN = c.Segments[0].DSN
			}
			instance, err := pgx.Connect(ctx, instanceDSN)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = instance.Close(context.Background()) })
			var texts []string
			for _, s := range gpsql.Statements {
				text := s.Text(shape)
				if text == "" || s.Target == gpsql.History {
					continue
				}
				texts = append(texts, text)
				conn := coordinator
				if s.Target == gpsql.Instance {
					conn = instance
				}
				if s.Guard != "" && !guardHolds(ctx, t, conn, shape, s.Guard) {
					t.Logf("%s: not sent here (%s is false)", s.Name, s.Guard)
					continue
				}
				rows, err := conn.Query(ctx, text, s.Args...)
				if err == nil {
					rows.Close()
					err = rows.Err()
				}
				if rejectedByTheCatalog(err, s) {
					t.Errorf("%s (%s): %v\n%s", s.Name, s.Sender, err, text)
				}
			}
			for _, sql := range slices.Compact(slices.Sorted(slices.Values(log.sent))) {
				if !slices.Contains(texts, sql) {
					t.Errorf("the receiver sent a statement that is not in internal/gpsql's table: %q", sql)
				}
			}
			checkHistoryStatements(ctx, t, coordinator, shape)
		})
	}
}

// checkHistoryStatements runs the history exporter's statements, in
// order, in a database of their own. The testbed's Greenplum dialects are
// PostgreSQL 15 underneath, which cannot parse Greenplum's partitioning
// and distribution clauses: there the statements are not sent, and
// docs/compatibility.md says where each Greenplum text was checked (the
// real Greenplum 6) or that it was not.
func checkHistoryStatements(ctx context.Context, t *testing.T, coordinator *pgx.Conn, shape gpsql.Shape) {
	t.Helper()
	if shape.Dialect.Greenplum() {
		t.Logf("history statements of %s: not sent (the testbed's PostgreSQL cannot parse Greenplum's DDL)", shape.Dialect)
		return
	}
	if _, err := coordinator.Exec(ctx, "CREATE DATABASE gpotel_history_conformance"); err != nil {
		t.Fatal(err)
	}
	cfg := coordinator.Config().Copy()
	cfg.Database = "gpotel_history_conformance"
	history, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = history.Close(context.Background()) }()
	for _, err := range gpsqltest.RunHistory(ctx, history, shape) {
		t.Error(err)
	}
}

// rejectedByTheCatalog tells whether err is the server refusing the
// statement itself: any error for a statement without sample arguments; for
// one with them, a syntax error or access rule violation (SQLSTATE class 42:
// no such column, function, relation or privilege), not what the function
// itself says of the sample arguments.
func rejectedByTheCatalog(err error, s gpsql.Statement) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if len(s.Args) == 0 || !errors.As(err, &pgErr) {
		return true
	}
	return strings.HasPrefix(pgErr.Code, "42")
}

func guardHolds(ctx context.Context, t *testing.T, conn *pgx.Conn, shape gpsql.Shape, name string) bool {
	t.Helper()
	i := slices.IndexFunc(gpsql.Statements, func(s gpsql.Statement) bool { return s.Name == name })
	if i < 0 {
		t.Fatalf("guard %q is not in the table", name)
	}
	var holds bool
	if err := conn.QueryRow(ctx, gpsql.Statements[i].Text(shape)).Scan(&holds); err != nil {
		t.Fatalf("guard %q: %v", name, err)
	}
	return holds
}

// checkEverySegmentDiscovered: discovery's own backend shows on every
// instance, each under its own content id.
func checkEverySegmentDiscovered(t *testing.T, c *cluster.Cluster, st *ClusterState) {
	t.Helper()
	seen := map[int64]bool{}
	for _, b := range st.Backends {
		seen[b.SegmentID] = true
	}
	for _, in := range c.Instances() {
		if !seen[int64(in.Content)] {
			t.Errorf("discovery found no backend on content %d: segments %v", in.Content, seen)
		}
	}
}
