// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/pressure"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

var pressureAt = time.Unix(0, 1_700_000_000_000_000_000).UTC()

// cpuSome is a pressure whose cpu "some" line has stalled stallSeconds in
// all and avg10 (a share) lately, avg60 half and avg300 a quarter of it.
func cpuSome(stallSeconds, avg10 float64) *gpotelv1.Pressure {
	return &gpotelv1.Pressure{Cpu: &gpotelv1.ResourcePressure{Some: &gpotelv1.PressureStall{
		TotalUs: int64(stallSeconds * 1e6), Avg10: avg10 * 100, Avg60: avg10 * 50, Avg300: avg10 * 25}}}
}

func pressureBatch(hostCPU float64) pmetric.Metrics {
	name := "default_group"
	return snapshot.NewClosingEncoder(pipelinetest.Scope, pressureAt, snapshot.Switches{}).Encode(&snapshot.Closing{
		Time: pressureAt, TmID: testTmID, Coordinator: "mdw", Hosts: []snapshot.HostAnswer{{Host: "sdw1", Up: true}},
		Readings: []snapshot.HostReading{{Host: "sdw1", Pressure: cpuSome(12.5, hostCPU), Groups: []snapshot.Cgroup{
			{Group: &gpotelv1.ControlGroup{Version: 2, Path: "/gpdb/6437", ResourceGroupOid: 6437, Pressure: cpuSome(3, 0.25),
				TaskStates: &gpotelv1.TaskStates{Source: gpotelv1.TaskStates_SOURCE_CGROUPSTATS, Running: 4}}, ResourceGroupName: &name},
			{Group: &gpotelv1.ControlGroup{Version: 1, Path: "/gpdb/7000", ResourceGroupOid: 7000,
				TaskStates: &gpotelv1.TaskStates{Source: gpotelv1.TaskStates_SOURCE_CGROUPSTATS}}},
		}}},
	})
}

func TestPressureServiceAnswersTheLatestSnapshotsHostsAndGroups(t *testing.T) {
	var store pressure.Store
	svc := &pressure.Service{Store: &store}
	empty, err := svc.GetHostPressure(context.Background(), &gpotelv1.GetHostPressureRequest{})
	require.NoError(t, err)
	assert.Zero(t, empty.GetSnapshotTimeUnixNano(), "before the first snapshot")

	store.Consume(decoded(pressureBatch(0.5)).Pressure)
	resp, err := svc.GetHostPressure(context.Background(), &gpotelv1.GetHostPressureRequest{})
	require.NoError(t, err)
	assert.Equal(t, pressureAt.UnixNano(), resp.GetSnapshotTimeUnixNano())
	require.Len(t, resp.GetHosts(), 1)
	h := resp.GetHosts()[0]
	assert.Equal(t, "sdw1", h.GetHostname())
	require.Len(t, h.GetPressure(), 1)
	assert.Equal(t, &gpotelv1.PressureFigures{Resource: "cpu", Kind: "some", Avg10: 0.5, Avg60: 0.25, Avg300: 0.125, StallSeconds: 12.5},
		h.GetPressure()[0])
	require.Len(t, h.GetGroups(), 2)
	assert.Equal(t, "default_group", h.GetGroups()[0].GetName())
	assert.Equal(t, map[string]int64{"running": 4, "sleeping": 0, "uninterruptible": 0, "stopped": 0}, h.GetGroups()[0].GetTasks())
	assert.Equal(t, "oid:7000", h.GetGroups()[1].GetName(), "an oid the catalog does not name")
	assert.Empty(t, h.GetGroups()[1].GetPressure(), "a v1 group has no pressure")

	// A process batch (no snapshot resource) leaves the figures alone.
	procs := pipelinetest.Snapshot{Time: pressureAt, TmID: testTmID, Coordinator: "mdw",
		Processes: []pipelinetest.Process{{Host: "sdw1", Session: 7, PID: 700, Created: pressureAt.Add(-time.Hour)}}}.Batches()[0]
	store.Consume(decoded(procs).Pressure)
	store.Consume(decoded(pressureBatch(0.75)).Pressure)
	resp, err = svc.GetHostPressure(context.Background(), &gpotelv1.GetHostPressureRequest{})
	require.NoError(t, err)
	assert.Equal(t, 0.75, resp.GetHosts()[0].GetPressure()[0].GetAvg10(), "the newest snapshot replaces the older")
}

func TestSystemStatCarriesTheWorstSomePressureOfTheSessionsGroups(t *testing.T) {
	srv := startDefault(t)
	s := fullSession()
	s.pressure = []snapshot.GroupPressure{ // avg10 in percent
		{Name: "default_group", Resource: "cpu", Kind: "some", Avg10: 30},
		{Name: "admin_group", Resource: "cpu", Kind: "some", Avg10: 5},
		{Name: "default_group", Resource: "cpu", Kind: "full", Avg10: 90}, // full is not some: not taken
		{Name: "default_group", Resource: "memory", Kind: "some", Avg10: 2},
		{Name: "admin_group", Resource: "io", Kind: "some", Avg10: 7},
	}
	srv.consume(t, buildSnapshot(t0, []testSession{s}))
	got := listAll(t, srv).SessionsState[0]
	for name, st := range map[string]*yagpcc.SystemStat{"last": got.GetLastMetrics().GetSystemStat(), "total": got.GetTotalMetrics().GetSystemStat()} {
		assert.Equal(t, 0.30, st.GetCpuPressure(), name)
		assert.Equal(t, 0.02, st.GetMemoryPressure(), name)
		assert.Equal(t, 0.07, st.GetIoPressure(), name)
	}
}
