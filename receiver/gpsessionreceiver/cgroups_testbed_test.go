// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"testing"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/hostcaps"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// TestResourceGroupsNamedWithPressure: the testbed runs each instance in a
// cgroup v2 group <host>/gpdb/<oid>; a scrape reports every host's pressure,
// each group with its catalog name, pressure and task states, and on the
// workload's session the pressure of the groups its processes run in, by name.
func TestResourceGroupsNamedWithPressure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testbed")
	}
	if err := hostcaps.PSI(); err != nil {
		t.Skip(err)
	}
	c := cluster.Start(t, cluster.Options{Hosts: 1, SegmentsPerHost: 2, Dialect: dialect.GP7})
	if c.Cgroups.Root == "" {
		t.Skipf("the testbed places no instance in a cgroup here: %s", c.Cgroups.Unavailable)
	}
	agents := startAgents(t, c)
	w := startSession(t, c)
	cfg := testbedConfig(c)
	cfg.Agents = agentEndpoints(agents)
	md, err := scrapeOnce(t, startScraper(t, cfg))
	if err != nil {
		t.Fatal(err)
	}

	hosts := map[string]bool{}
	for _, rm := range resourcesOfKind(md, pipeline.KindHost) {
		hosts[attrStr(rm.Resource().Attributes(), pipeline.AttrHostName)] = true
		if _, ok := metricNamed(rm, pipeline.MetricPressureStallTime); !ok {
			t.Errorf("host resource %v has no pressure", rm.Resource().Attributes().AsRaw())
		}
	}
	for _, h := range c.Hosts {
		if !hosts[h.Name] {
			t.Errorf("no host resource for %s (got %v)", h.Name, hosts)
		}
	}

	want := map[string]bool{}
	for _, in := range c.Instances() {
		want[in.Host+" "+cluster.ResourceGroupOf(in.Content).Name] = true
	}
	got := map[string]bool{}
	for _, rm := range resourcesOfKind(md, pipeline.KindCgroup) {
		a := rm.Resource().Attributes()
		got[attrStr(a, pipeline.AttrHostName)+" "+attrStr(a, pipeline.AttrResourceGroupName)] = true
		if _, ok := metricNamed(rm, pipeline.MetricPressureStallRatio); !ok {
			t.Errorf("cgroup %v has no pressure", a.AsRaw())
		}
		if _, ok := metricNamed(rm, pipeline.MetricCgroupTasks); !ok {
			t.Errorf("cgroup %v has no task states", a.AsRaw())
		}
	}
	for k := range want {
		if !got[k] {
			t.Errorf("no cgroup resource for %q; got %v", k, got)
		}
	}

	names := map[string]bool{}
	for _, rm := range resourcesOfKind(md, pipeline.KindSession) {
		if v, _ := rm.Resource().Attributes().Get(pipeline.AttrSessionID); v.Int() != int64(w.SessID()) {
			continue
		}
		m, ok := metricNamed(rm, pipeline.MetricSessionCgroupPress)
		if !ok {
			t.Fatalf("session %d has no %s", w.SessID(), pipeline.MetricSessionCgroupPress)
		}
		for i := range m.Gauge().DataPoints().Len() {
			names[attrStr(m.Gauge().DataPoints().At(i).Attributes(), pipeline.AttrCgroupName)] = true
		}
	}
	for _, g := range cluster.ResourceGroups {
		if !names[g.Name] {
			t.Errorf("session %d's group pressure does not name %s: %v", w.SessID(), g.Name, names)
		}
	}
	t.Logf("hosts %v, groups %v, session %d runs in %v", hosts, got, w.SessID(), names)
}
