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
	// derived: named here, computed from the contract's figures (a share,
	// a time since, the largest of several); else docs/pipeline.md's name.
	derived bool
}

// figures is the table of what a predicate may name.
var figures = [numFigures]figureDef{
	queryDuration:         contract("gpotel.query.duration", unitSeconds, "time since the running query's query_start"),
	queryCPUTime:          contract("gpotel.query.cpu.time", unitSeconds, "the running query's CPU, user + system, over every host"),
	queryDiskIO:           contract("gpotel.query.disk.io", unitBytes, "bytes the running query made the storage layer read and write"),
	queryDiskDelay:        contract("gpotel.query.disk.delay", unitSeconds, "time the running query's processes waited for block I/O"),
	queryRunDelay:         contract("gpotel.query.cpu.run_delay", unitSeconds, "time the running query's processes waited in a run queue for a CPU"),
	querySpillSize:        contract("gpotel.query.spill.size", unitBytes, "workfile bytes the running query holds now (Greenplum)"),
	querySpillFiles:       contract("gpotel.query.spill.files", unitNumber, "workfiles the running query holds now (Greenplum)"),
	querySkewRatio:        contract("gpotel.query.skew.ratio", unitNumber, "1 - avg/max of the running query's CPU over its segments"),
	querySkewMaxOverAvg:   contract("gpotel.query.skew.max_over_avg", unitNumber, "max/avg of the running query's CPU over its segments"),
	sessionCPURate:        contract("gpotel.session.cpu.time.rate", unitNumber, "CPU seconds per second of the session's processes over the window (cores)"),
	sessionRunDelayRate:   contract("gpotel.session.cpu.run_delay.rate", unitNumber, "run-queue wait per second of the session's processes over the window, summed"),
	sessionRunDelayShare:  derived("gpotel.session.cpu.run_delay.share", unitNumber, "gpotel.session.cpu.run_delay.rate per live process: the share of the window an average process waited for a CPU"),
	sessionDiskDelayRate:  contract("gpotel.session.disk.delay.rate", unitNumber, "block I/O wait per second of the session's processes over the window, summed"),
	sessionDiskIORate:     contract("gpotel.session.disk.io.rate", unitBytesPerSec, "read + write bytes per second of the session's processes over the window"),
	sessionMemory:         contract("gpotel.session.memory.usage", unitBytes, "resident memory of the session's live processes, summed over hosts (rss, cluster)"),
	sessionSkewMaxOverAvg: contract("gpotel.session.skew.max_over_avg", unitNumber, "max/avg of the session's CPU over its segments in the window"),
	sessionVmem:           contract("gpotel.session.vmem.usage", unitBytes, "Greenplum's vmem account of the session, summed over segments"),
	sessionLockWait:       contract("gpotel.session.lock.wait", unitNumber, "1 while the session waits for a lock"),
	sessionIdleInTransaction: derived("gpotel.session.idle_in_transaction.time", unitSeconds,
		"time since state_change of a session idle in a transaction (absent in any other state)"),
	sessionCgroupCPUPressure: derived("gpotel.session.cgroup.pressure.cpu", unitNumber, "the largest CPU \"some\" stall share of the session's control groups"),
	hostsCPUPressure:         derived("gpotel.session.hosts.pressure.cpu", unitNumber, "the largest CPU \"some\" stall share (avg60) of the hosts the session runs on"),
	hostsMemoryPressure:      derived("gpotel.session.hosts.pressure.memory", unitNumber, "the largest memory \"some\" stall share (avg60) of the hosts the session runs on"),
	hostsIOPressure:          derived("gpotel.session.hosts.pressure.io", unitNumber, "the largest I/O \"some\" stall share (avg60) of the hosts the session runs on"),
}

// decoders are the parts of the processor's output a reader decodes, a
// bit each: only those some rule's figures come from.
type decoders uint8

const (
	decodeQueries        decoders = 1 << iota // query resources
	decodeSessionFigures                      // the processor's figures on a session resource
	decodeGreenplum                           // the server's own figures of a session
	decodeHosts                               // host resources' pressure
	decodeEverything     = decodeQueries | decodeSessionFigures | decodeGreenplum | decodeHosts
)

// source is the decoder a figure comes from; 0: the session's state,
// always read.
func (f figure) source() decoders {
	switch {
	case f <= querySkewMaxOverAvg:
		return decodeQueries
	case f == sessionVmem || f == sessionLockWait:
		return decodeGreenplum
	case f == sessionIdleInTransaction:
		return 0
	case f >= hostsCPUPressure:
		return decodeHosts
	default:
		return decodeSessionFigures
	}
}

// contract is a figure docs/pipeline.md names.
func contract(name string, u unit, brief string) figureDef {
	return figureDef{name: name, unit: u, brief: brief}
}

// derived is a figure the rules compute from the contract's.
func derived(name string, u unit, brief string) figureDef {
	return figureDef{name: name, unit: u, brief: brief, derived: true}
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
