// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workloadrulesconnector

import (
	"slices"
	"strings"
)

// figure is one value a predicate may compare: a figure of the processor's
// output (docs/pipeline.md) for the session a rule looks at, read once per
// snapshot into its target.
type figure uint8

// The figures, in the order of figures' table.
const (
	queryDuration figure = iota
	queryCPUTime
	queryDiskIO
	queryDiskDelay
	queryRunDelay
	querySpillSize
	querySpillFiles
	querySkewRatio
	querySkewMaxOverAvg
	sessionCPURate
	sessionRunDelayRate
	sessionRunDelayShare
	sessionDiskDelayRate
	sessionDiskIORate
	sessionMemory
	sessionSkewMaxOverAvg
	sessionVmem
	sessionLockWait
	sessionIdleInTransaction
	sessionCgroupCPUPressure
	hostsCPUPressure
	hostsMemoryPressure
	hostsIOPressure
	numFigures
)

// A target's present figures fit one mask.
var _ [32 - numFigures]struct{}

// unit is how a predicate's value is written for a figure.
type unit uint8

const (
	unitSeconds     unit = iota // a duration: 90s, 2m, 1h30m
	unitBytes                   // a size: 512MiB, 50GiB, 10GB
	unitBytesPerSec             // a size per second: 100MiB/s
	unitNumber                  // a plain number: 0.8, 10
)

var unitNames = [...]string{
	unitSeconds:     "a duration (90s, 2m, 1h30m)",
	unitBytes:       "a size (512MiB, 50GiB, 10GB)",
	unitBytesPerSec: "a size per second (100MiB/s)",
	unitNumber:      "a plain number (0.8, 10)",
}

// figureDef is one row of the table: the figure's name as docs/pipeline.md
// documents it (or, for the few the rules derive, as this component's
// README does), its unit and what it means.
type figureDef struct {
	name  string
	unit  unit
	brief string
}

// figures is the table of what a predicate may name.
var figures = [numFigures]figureDef{
	queryDuration:         {"gpotel.query.duration", unitSeconds, "time since the running query's query_start"},
	queryCPUTime:          {"gpotel.query.cpu.time", unitSeconds, "the running query's CPU, user + system, over every host"},
	queryDiskIO:           {"gpotel.query.disk.io", unitBytes, "bytes the running query made the storage layer read and write"},
	queryDiskDelay:        {"gpotel.query.disk.delay", unitSeconds, "time the running query's processes waited for block I/O"},
	queryRunDelay:         {"gpotel.query.cpu.run_delay", unitSeconds, "time the running query's processes waited in a run queue for a CPU"},
	querySpillSize:        {"gpotel.query.spill.size", unitBytes, "workfile bytes the running query holds now (Greenplum)"},
	querySpillFiles:       {"gpotel.query.spill.files", unitNumber, "workfiles the running query holds now (Greenplum)"},
	querySkewRatio:        {"gpotel.query.skew.ratio", unitNumber, "1 - avg/max of the running query's CPU over its segments"},
	querySkewMaxOverAvg:   {"gpotel.query.skew.max_over_avg", unitNumber, "max/avg of the running query's CPU over its segments"},
	sessionCPURate:        {"gpotel.session.cpu.time.rate", unitNumber, "CPU seconds per second of the session's processes over the window (cores)"},
	sessionRunDelayRate:   {"gpotel.session.cpu.run_delay.rate", unitNumber, "run-queue wait per second of the session's processes over the window, summed"},
	sessionRunDelayShare:  {"gpotel.session.cpu.run_delay.share", unitNumber, "gpotel.session.cpu.run_delay.rate per live process: the share of the window an average process waited for a CPU"},
	sessionDiskDelayRate:  {"gpotel.session.disk.delay.rate", unitNumber, "block I/O wait per second of the session's processes over the window, summed"},
	sessionDiskIORate:     {"gpotel.session.disk.io.rate", unitBytesPerSec, "read + write bytes per second of the session's processes over the window"},
	sessionMemory:         {"gpotel.session.memory.usage", unitBytes, "resident memory of the session's live processes, summed over hosts (rss, cluster)"},
	sessionSkewMaxOverAvg: {"gpotel.session.skew.max_over_avg", unitNumber, "max/avg of the session's CPU over its segments in the window"},
	sessionVmem:           {"gpotel.session.vmem.usage", unitBytes, "Greenplum's vmem account of the session, summed over segments"},
	sessionLockWait:       {"gpotel.session.lock.wait", unitNumber, "1 while the session waits for a lock"},
	sessionIdleInTransaction: {"gpotel.session.idle_in_transaction.time", unitSeconds,
		"time since state_change of a session idle in a transaction (absent in any other state)"},
	sessionCgroupCPUPressure: {"gpotel.session.cgroup.pressure.cpu", unitNumber, "the largest CPU \"some\" stall share of the session's control groups"},
	hostsCPUPressure:         {"gpotel.session.hosts.pressure.cpu", unitNumber, "the largest CPU \"some\" stall share (avg60) of the hosts the session runs on"},
	hostsMemoryPressure:      {"gpotel.session.hosts.pressure.memory", unitNumber, "the largest memory \"some\" stall share (avg60) of the hosts the session runs on"},
	hostsIOPressure:          {"gpotel.session.hosts.pressure.io", unitNumber, "the largest I/O \"some\" stall share (avg60) of the hosts the session runs on"},
}

// figureByName finds a figure by its name.
func figureByName(name string) (figure, bool) {
	for f := range numFigures {
		if figures[f].name == name {
			return f, true
		}
	}
	return 0, false
}

// figureNames lists every figure's name, sorted, for a refusal's message.
func figureNames() string {
	names := make([]string, 0, numFigures)
	for f := range numFigures {
		names = append(names, figures[f].name)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
