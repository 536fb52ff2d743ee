// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"maps"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// TestDiscoveryNamesEachSessionRolesResourceQueue: one discovery reads the
// resource queue of every role with a session, and of no other role; a
// queue name no server could write does not reach the map.
func TestDiscoveryNamesEachSessionRolesResourceQueue(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Hosts: 1, SegmentsPerHost: 1, Dialect: dialect.GP6})
	ctx := await.Context(t)
	admin, err := pgx.Connect(ctx, c.CoordinatorDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	if _, err := admin.Exec(ctx, "CREATE ROLE hostile LOGIN; CREATE ROLE sessionless LOGIN"); err != nil {
		t.Fatal(err)
	}
	for role, queue := range map[string]string{cluster.UserRole: "etl_queue", "hostile": "bad\x1b[31mqueue", "sessionless": "other_queue"} {
		if err := c.AssignResourceQueue(ctx, role, queue); err != nil {
			t.Fatal(err)
		}
	}
	for _, role := range []string{cluster.UserRole, "hostile"} {
		cfg, err := pgx.ParseConfig(c.CoordinatorDSN)
		if err != nil {
			t.Fatal(err)
		}
		cfg.User = role
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
	}

	src := newPGSource(testbedConfig(c))
	t.Cleanup(src.Close)
	st, err := src.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ResourceQueuesErr != nil {
		t.Fatalf("resource queues: %v", st.ResourceQueuesErr)
	}
	want := map[string]string{cluster.UserRole: "etl_queue", cluster.AdminRole: "pg_default"}
	if !maps.Equal(st.ResourceQueues, want) {
		t.Errorf("queues %v, want %v (hostile's name left out, sessionless not read)", st.ResourceQueues, want)
	}
}
