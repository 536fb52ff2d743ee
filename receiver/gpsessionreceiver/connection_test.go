// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"testing"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/ownbackends"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// The monitoring pool's backends are the collector's by their pid (which
// the exporter's actions refuse), from connect until the pool closes them.
func TestMonitoringConnectionsAreKnownByTheirPid(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testbed")
	}
	c := cluster.Start(t, cluster.Options{Dialect: cluster.DialectPostgreSQL})
	src := newPGSource(testbedConfig(c))
	t.Cleanup(src.Close)
	pool, err := src.getPool()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(await.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	pid := int64(conn.Conn().PgConn().PID())
	conn.Release()
	if what, ok := ownbackends.Of(pid); !ok || what != "monitoring connection" {
		t.Errorf("backend pid %d of the monitoring pool: %q %v, want the monitoring connection", pid, what, ok)
	}
	src.Close()
	if what, ok := ownbackends.Of(pid); ok {
		t.Errorf("backend pid %d after the pool closed: still the collector's %s", pid, what)
	}
}
