// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadata"
)

func u32p(v uint32) *uint32 { return &v }

func stall(avg10 float64, totalUs int64) *gpotelv1.PressureStall {
	return &gpotelv1.PressureStall{Avg10: avg10, Avg60: avg10 / 2, Avg300: avg10 / 4, TotalUs: totalUs}
}

func cpuPressure(avg10 float64) *gpotelv1.Pressure {
	return &gpotelv1.Pressure{Cpu: &gpotelv1.ResourcePressure{Some: stall(avg10, 2_500_000)}}
}

// answerIn is an agent answer for the given pids, each in the group at the same position.
func answerIn(groups []*gpotelv1.ControlGroup, host *gpotelv1.Pressure, pidGroup map[int64]uint32) *yagpcc.GetPidProcInfoResponse {
	resp := &yagpcc.GetPidProcInfoResponse{HostPressure: host, ControlGroups: groups}
	for pid, g := range pidGroup {
		resp.PidProcData = append(resp.PidProcData, &yagpcc.GpPidProcInfo{Pid: pid, ControlGroup: u32p(g)})
	}
	return resp
}

func TestHostCgroupsKeepEachGroupOnceAndAddStatCountsOverAnswers(t *testing.T) {
	asked := map[int64]*Backend{1: {PID: 1, SessionID: 7}, 2: {PID: 2, SessionID: 8}, 3: {PID: 3, SessionID: 7}}
	group := func(sleeping int64) *gpotelv1.ControlGroup {
		return &gpotelv1.ControlGroup{Version: 2, Path: "/gpdb/6437", ResourceGroupOid: 6437, Pressure: cpuPressure(5),
			TaskStates: &gpotelv1.TaskStates{Source: gpotelv1.TaskStates_SOURCE_PROC_STAT, Sleeping: sleeping}}
	}
	other := &gpotelv1.ControlGroup{Version: 2, Path: "/system.slice"}
	var h hostCgroups
	h.add(answerIn([]*gpotelv1.ControlGroup{group(2)}, cpuPressure(1), map[int64]uint32{1: 0, 2: 0}), asked)
	h.add(answerIn([]*gpotelv1.ControlGroup{other, group(1)}, cpuPressure(3), map[int64]uint32{3: 1}), asked)

	require.Len(t, h.groups, 2)
	assert.Equal(t, int64(3), h.groups[0].GetTaskStates().GetSleeping(), "processes counted from stat in two answers add up")
	assert.Equal(t, 3.0, h.pressure.GetCpu().GetSome().GetAvg10(), "the latest host pressure wins")
	assert.Equal(t, map[int64][]int{7: {0}, 8: {0}}, h.sessions, "pid 3 of session 7 is in the same group, not a new one")
}

func TestCgroupstatsTaskStatesAreNotAddedUp(t *testing.T) {
	v1 := func(sleeping int64) *gpotelv1.ControlGroup {
		return &gpotelv1.ControlGroup{Version: 1, Hierarchy: "cpu", Path: "/gpdb/6437",
			TaskStates: &gpotelv1.TaskStates{Source: gpotelv1.TaskStates_SOURCE_CGROUPSTATS, Sleeping: sleeping}}
	}
	var h hostCgroups
	h.add(answerIn([]*gpotelv1.ControlGroup{v1(40)}, nil, nil), nil)
	h.add(answerIn([]*gpotelv1.ControlGroup{v1(41)}, nil, nil), nil)
	require.Len(t, h.groups, 1)
	assert.Equal(t, int64(41), h.groups[0].GetTaskStates().GetSleeping(), "cgroupstats counts the whole group: the latest reading")
}

func attrStr(m pcommon.Map, key string) string {
	if v, ok := m.Get(key); ok {
		return v.AsString()
	}
	return ""
}

func TestClosingBatchHasHostsCgroupsAndEachSessionsGroupPressureByName(t *testing.T) {
	sdw1, sdw2 := hostCgroups{}, hostCgroups{}
	asked := map[int64]*Backend{1: {PID: 1, SessionID: 77}, 2: {PID: 2, SessionID: 77}}
	rg := func(oid uint32, avg10 float64) *gpotelv1.ControlGroup {
		return &gpotelv1.ControlGroup{Version: 2, Path: "/gpdb/" + map[uint32]string{6437: "6437", 9999: "9999"}[oid],
			ResourceGroupOid: oid, Pressure: cpuPressure(avg10),
			TaskStates: &gpotelv1.TaskStates{Source: gpotelv1.TaskStates_SOURCE_PROC_STAT, Running: 1}}
	}
	sdw1.add(answerIn([]*gpotelv1.ControlGroup{rg(6437, 10)}, cpuPressure(1), map[int64]uint32{1: 0}), asked)
	sdw2.add(answerIn([]*gpotelv1.ControlGroup{rg(6437, 30), rg(9999, 4)}, cpuPressure(2), map[int64]uint32{2: 0}), asked)

	s := &scrapeResult{
		time: time.Unix(1_700_000_500, 0), dialect: dialect.GP7, tmID: 42, coordinatorHost: "mdw",
		sessions:       []SessionRow{{PID: 4000, SessionID: 77}, {PID: 4001, SessionID: 78}},
		queries:        []hostQuery{{host: "sdw1"}, {host: "sdw2"}},
		results:        []hostResult{{host: "sdw1", up: true, cgroups: sdw1}, {host: "sdw2", up: true, cgroups: sdw2}},
		resourceGroups: map[uint32]string{6437: "default_group"},
	}
	md, _ := newTestEmitter(t, metadata.NewDefaultMetricsBuilderConfig()).emitSnapshot(s, nil)

	hosts := resourcesOfKind(md, pipeline.KindHost)
	require.Len(t, hosts, 2)
	m, ok := metricNamed(hosts[0], pipeline.MetricPressureStallTime)
	require.True(t, ok)
	assert.Equal(t, 2.5, m.Sum().DataPoints().At(0).DoubleValue(), "2 500 000 us of stall is 2.5 s")
	assert.True(t, m.Sum().IsMonotonic())

	cgroups := resourcesOfKind(md, pipeline.KindCgroup)
	require.Len(t, cgroups, 3, "one per group per host")
	names := map[string]bool{}
	for _, rm := range cgroups {
		a := rm.Resource().Attributes()
		names[attrStr(a, pipeline.AttrHostName)+" "+attrStr(a, pipeline.AttrResourceGroupName)] = true
		assert.Equal(t, "proc_stat", attrStr(a, pipeline.AttrCgroupTasksSource))
		tasks, ok := metricNamed(rm, pipeline.MetricCgroupTasks)
		require.True(t, ok)
		assert.Equal(t, 5, tasks.Gauge().DataPoints().Len(), "running, sleeping, uninterruptible, stopped, other")
	}
	assert.Equal(t, map[string]bool{"sdw1 default_group": true, "sdw2 default_group": true, "sdw2 ": true}, names,
		"an oid the catalog does not name has no name attribute")

	byName := map[string]float64{}
	for _, rm := range resourcesOfKind(md, pipeline.KindSession) {
		if v, _ := rm.Resource().Attributes().Get(pipeline.AttrSessionID); v.Int() != 77 {
			_, has := metricNamed(rm, pipeline.MetricSessionCgroupPress)
			assert.False(t, has, "a session without processes in groups has no group pressure")
			continue
		}
		m, ok := metricNamed(rm, pipeline.MetricSessionCgroupPress)
		require.True(t, ok)
		for i := range m.Gauge().DataPoints().Len() {
			dp := m.Gauge().DataPoints().At(i)
			byName[attrStr(dp.Attributes(), pipeline.AttrCgroupName)+" "+attrStr(dp.Attributes(), pipeline.AttrPressureResource)] = dp.DoubleValue()
		}
	}
	assert.Equal(t, map[string]float64{"default_group cpu": 0.30}, byName,
		"the largest avg10 over the hosts; 9999 holds none of the session's processes")
}
