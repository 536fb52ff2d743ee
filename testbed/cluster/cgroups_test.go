// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/hostcaps"
	"github.com/gpotel/gpotel/segmentagent/cgroup"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// TestInstancesRunInTheirResourceGroupCgroups: every postmaster and the
// backends it forks run in <root>/<host>/gpdb/<oid>, the catalog names each
// oid, and Down removes the groups (assertGone).
func TestInstancesRunInTheirResourceGroupCgroups(t *testing.T) {
	ctx := context.Background()
	c, err := cluster.Up(ctx, cluster.Options{Hosts: 1, SegmentsPerHost: 2, Dialect: dialect.GP7})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Down(ctx); err != nil {
			t.Error(err)
		}
		assertGone(t, c)
	}()
	if c.Cgroups.Root == "" {
		t.Skipf("instances are not placed in cgroups here: %s", c.Cgroups.Unavailable)
	}
	inspector := cgroup.NewInspector(cgroup.InspectorConfig{})
	for _, in := range c.Instances() {
		want := cluster.ResourceGroupOf(in.Content)
		conn := connect(t, in.DSN, nil)
		for what, pid := range map[string]int{"postmaster": in.PostmasterPID, "backend": backendPID(t, conn)} {
			g, err := inspector.GroupOf(int64(pid))
			if err != nil {
				t.Fatalf("gpseg%d %s %d: %v", in.Content, what, pid, err)
			}
			if g.Version != 2 || g.ResourceGroupOID != want.OID {
				t.Errorf("gpseg%d %s %d is in %+v, want resource group %d on cgroup v2", in.Content, what, pid, g, want.OID)
			}
			dir, err := inspector.Layout().Dir(g)
			if err != nil || dir != c.InstanceCgroup(in) {
				t.Errorf("gpseg%d %s: group dir %q (%v), want %q", in.Content, what, dir, err, c.InstanceCgroup(in))
			}
		}
		if _, err := os.Stat(filepath.Join(c.InstanceCgroup(in), "cpu.pressure")); err != nil && hostcaps.PSI() == nil {
			t.Errorf("gpseg%d group has no cpu.pressure: %v", in.Content, err)
		}
	}

	coord := connect(t, c.CoordinatorDSN, nil)
	for _, g := range cluster.ResourceGroups {
		for _, q := range []string{
			"SELECT rsgname::text FROM pg_resgroup WHERE oid = $1",
			"SELECT groupname::text FROM gp_toolkit.gp_resgroup_config WHERE groupid = $1",
		} {
			var name string
			if err := coord.QueryRow(ctx, q, g.OID).Scan(&name); err != nil || name != g.Name {
				t.Errorf("%s [%d]: %q, %v; want %q", q, g.OID, name, err, g.Name)
			}
		}
	}
}
