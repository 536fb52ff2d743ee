// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workloadrulesconnector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// figureSnapshot is one session at sec: its coordinator backend and four
// executors on segments 0-3 of sdw1, which by 330 s have used 20, 1, 1
// and 1 s of CPU, waited 15 s each for a CPU and 3 s for block I/O, and
// read 1 MiB each; the session holds 5 GiB of workfiles and 1 GiB of vmem
// and waits for a lock; sdw1's CPU is 40 % "some" stalled over a minute.
func figureSnapshot(sec float64, state string) pipelinetest.Snapshot {
	s := pipelinetest.Snapshot{Time: at(sec), TmID: 1700000000, Coordinator: "mdw",
		Hosts: []pipelinetest.Host{{Name: "mdw", Up: true}, {Name: "sdw1", Up: true}},
		Readings: []snapshot.HostReading{{Host: "sdw1", Pressure: &gpotelv1.Pressure{
			Cpu: &gpotelv1.ResourcePressure{Some: &gpotelv1.PressureStall{Avg10: 50, Avg60: 40, Avg300: 30}}}}}}
	ses := pipelinetest.Session{ID: 1, PID: 1001, DB: "sales", User: "alice", State: state, QueryStart: at(0), BackendStart: at(-10),
		Query: "select 1", Waiting: true, Greenplum: &snapshot.GreenplumSession{
			Spill:  []snapshot.Spill{{Segment: 0, CommandCount: 1, Bytes: 5 << 30, Files: 4}},
			Memory: []snapshot.SegmentMemory{{Segment: 0, Bytes: 1 << 30}}}}
	if state != "active" {
		ses.StateChange = at(30)
	}
	s.Processes = append(s.Processes, pipelinetest.Process{Host: "mdw", Segment: -1, Session: 1, PID: 1001, Created: at(-10), CommandCount: 1, RSS: 1 << 20})
	ses.Backends = append(ses.Backends, pipeline.BackendRef{Host: "mdw", SegmentID: -1, PID: 1001})
	after := sec > 300
	for seg := range int64(4) {
		p := pipelinetest.Process{Host: "sdw1", Segment: seg, Session: 1, PID: 2000 + seg, Created: at(-1), CommandCount: 1, RSS: 1 << 20}
		if after {
			p.CPUUser, p.RunDelay, p.DiskDelay, p.ReadBytes = 1, 15, 3, 1<<20
			if seg == 0 {
				p.CPUUser = 20
			}
		}
		s.Processes = append(s.Processes, p)
		ses.Backends = append(ses.Backends, pipeline.BackendRef{Host: "sdw1", SegmentID: seg, PID: p.PID})
	}
	s.Sessions = append(s.Sessions, ses)
	return s
}

// readFigures decodes the processor's output for the second of two
// snapshots 30 s apart, over a 1m window.
func readFigures(t *testing.T, state string, needs decoders) target {
	t.Helper()
	var v view
	require.True(t, newViewReader(needs, time.Minute, nil).read(processed(t, figureSnapshot(300, state), figureSnapshot(330, state)), &v))
	require.Len(t, v.targets, 1)
	return v.targets[0]
}

// TestEveryFigureIsReadFromTheProcessorsOutput: each figure a predicate
// may name reads what the processor wrote for it.
func TestEveryFigureIsReadFromTheProcessorsOutput(t *testing.T) {
	tg := readFigures(t, "active", decodeEverything)
	want := map[figure]float64{
		queryDuration:            330,
		queryCPUTime:             23,
		queryDiskIO:              4 << 20,
		queryDiskDelay:           12,
		queryRunDelay:            60,
		querySpillSize:           5 << 30,
		querySpillFiles:          4,
		querySkewRatio:           1 - 23.0/4/20,
		querySkewMaxOverAvg:      20 / (23.0 / 4),
		sessionCPURate:           23.0 / 30,
		sessionRunDelayRate:      60.0 / 30,
		sessionRunDelayShare:     60.0 / 30 / 5,
		sessionDiskDelayRate:     12.0 / 30,
		sessionDiskIORate:        float64(4<<20) / 30,
		sessionMemory:            5 << 20,
		sessionSkewMaxOverAvg:    20 / (23.0 / 4),
		sessionVmem:              1 << 30,
		sessionLockWait:          1,
		sessionCgroupCPUPressure: 0,
		hostsCPUPressure:         0.4,
		hostsMemoryPressure:      0,
		hostsIOPressure:          0,
	}
	for f := range numFigures {
		v, ok := tg.value(f)
		w, expected := want[f]
		if !expected {
			assert.False(t, ok, "%s: want absent, got %v", figures[f].name, v)
			continue
		}
		if assert.True(t, ok, "%s: absent", figures[f].name) {
			assert.InDelta(t, w, v, 1e-6*max(1, w), figures[f].name)
		}
		// A reader that decodes only what the figure comes from has it.
		only := readFigures(t, "active", f.source())
		_, ok = only.value(f)
		assert.True(t, ok, "%s: absent when only its source is decoded", figures[f].name)
	}
	idle := readFigures(t, "idle in transaction", 0)
	v, ok := idle.value(sessionIdleInTransaction)
	assert.True(t, ok)
	assert.Equal(t, 300.0, v, "since state_change at 30 s")
	_, ok = idle.value(queryDuration)
	assert.False(t, ok, "no query runs")
}
