// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

// Names of the closing batch beyond names.go: Greenplum session figures,
// cgroup and pressure values, endings.

// Data-point attributes of the Greenplum session figures.
const (
	AttrLockMode        = "gpotel.lock.mode"
	AttrLockBlockerMode = "gpotel.lock.blocker.mode"
)

// Keys of gpotel.session.lock.wait's Metric.Metadata(): they name one wait
// (a relation name a user chose, a transaction id, the blocking session),
// so as data-point attributes every row-lock wait would start a series of
// its own in a backend such as Prometheus. In the metadata they travel
// with the point and identify nothing.
const (
	MetaLockObject           = "gpotel.lock.object"
	MetaLockBlockerSessionID = "gpotel.lock.blocker.session.id"
)

// The Greenplum session metrics of the closing batch (receiver).
const (
	MetricSessionSpillSize   = "gpotel.session.spill.size"
	MetricSessionSpillFiles  = "gpotel.session.spill.files"
	MetricSessionLockWait    = "gpotel.session.lock.wait"
	MetricSessionVmemUsage   = "gpotel.session.vmem.usage"
	MetricSessionVmemRunaway = "gpotel.session.vmem.runaway"
)

// The query's workfiles (processor), from the Greenplum session figures:
// held now, and the most held at once over its life as far as the reads saw.
const (
	MetricQuerySpillSize     = "gpotel.query.spill.size"
	MetricQuerySpillFiles    = "gpotel.query.spill.files"
	MetricQuerySpillSizeMax  = "gpotel.query.spill.size.max"
	MetricQuerySpillFilesMax = "gpotel.query.spill.files.max"
)

// The gpotel.cgroup.tasks.source values.
const (
	TasksSourceCgroupstats = "cgroupstats"
	TasksSourceProcStat    = "proc_stat"
)

// The gpotel.pressure.kind values.
const (
	PressureSome = "some"
	PressureFull = "full"
)

// Attributes of an endings resource and its points.
const (
	// AttrLogReadThrough (resource, int unix ns): every record the host's
	// server log held before this time is in this endings resource or an
	// earlier one. Absent: the host's log is not read.
	AttrLogReadThrough = "gpotel.log.read_through"
	// AttrLogSeverity (point): ERROR, FATAL, PANIC, or LOG for a lost
	// connection (SQLSTATE class 08); absent for an exit.
	AttrLogSeverity = "gpotel.log.severity"
	// AttrSQLState is the record's SQLSTATE (OpenTelemetry's database
	// response status code).
	AttrSQLState = "db.response.status_code"
	// AttrLogMessage is the record's message, cut at MaxEndingMessage bytes.
	AttrLogMessage = "gpotel.log.message"
	// AttrProcessExitCode is the exit status of a backend that exited
	// (exit(n)); absent when a signal killed it.
	AttrProcessExitCode = "process.exit.code"
	// AttrProcessExitSignal is the signal that killed a backend.
	AttrProcessExitSignal = "gpotel.process.exit.signal"
)
