// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"flag"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
)

var update = flag.Bool("update", false, "write the golden files from what the code produces")

// The processor's output for three scrapes of a small cluster (a session
// on two segments and the coordinator, one without processes, an exited
// process a scrape saw, one no scrape saw, a postmaster's unrecorded CPU,
// a query per session, per-host figures and smoothing on) is the golden
// file: what the contract looks like to a third-party component reading
// the processor's output. go test -run Golden -update writes it.
func TestProcessorOutputMatchesTheGoldenFile(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Windows = []time.Duration{time.Minute, 2 * time.Minute}
	cfg.EmitSessionHostFigures = true
	cfg.Queries.Text = true
	p, sink := newTestProcessor(t, cfg)
	scrape := func(sec float64, cpu float64, exits ...pipelinetest.Process) pipelinetest.Snapshot {
		s := snap(sec, nil, []int64{7, 8},
			withMemory(proc("mdw", -1, 7, 1007, -100, cpu/10, 0), 10, 4, 6, 100),
			withMemory(proc("sdw1", 0, 7, 2001, -100, cpu, int64(cpu*1000)), 40, 30, 10, 400),
			withMemory(proc("sdw2", 1, 7, 3001, -100, cpu*3, int64(cpu*10)), 50, 35, 15, 500))
		for i := range s.Processes {
			s.Processes[i].CommandCount = 3
		}
		for i := range s.Sessions {
			s.Sessions[i].QueryStart, s.Sessions[i].Query = at(-30), "select count(*) from t"
		}
		s.Processes = append(s.Processes, exits...)
		return s
	}
	seen := proc("sdw1", 0, 7, 2002, -100, 1, 50)
	exited := seen
	exited.CPUUser, exited.Exited = 2.5, true
	ghost := proc("sdw2", 1, 0, 3999, 61, 0.75, 10)
	ghost.Exited, ghost.Unattributed = true, true
	postmaster := proc("sdw2", 1, 0, 3000, -1000, 0.25, 0)
	postmaster.Unrecorded = true
	md := feed(t, p, sink,
		scrape(0, 1, seen),
		scrape(60, 2, exited, ghost),
		scrape(120, 4, postmaster))
	pipelinetest.CompareGolden(t, filepath.Join("testdata", "golden", "output.json"), md, *update)
}
