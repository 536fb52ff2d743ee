// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

// ClosingMetric describes a metric of the snapshot, session, host and
// cgroup resources the receiver writes in a snapshot's closing batch.
type ClosingMetric struct {
	Name, Unit, Description string
	Sum, Double             bool     // a cumulative monotonic sum; a double
	Attrs                   []string // its data-point attributes, in order
}

// The closing batch's metrics (docs/pipeline.md, snapshot, session, host and cgroup resources).
var (
	HostUp = &ClosingMetric{Name: MetricHostUp, Unit: "1", Attrs: []string{AttrHostName},
		Description: "1 when the host's agent answered every call of this scrape and every process batch of that host was accepted downstream, 0 " +
			"otherwise. On the snapshot resource. A host at 0 did not answer, so its processes are unknown this time, not exited."}
	HostProcesses = &ClosingMetric{Name: MetricHostProcesses, Unit: "{process}", Attrs: []string{AttrHostName},
		Description: "Processes the receiver asked that host about in this scrape. On the snapshot resource."}
	HostCPUs = &ClosingMetric{Name: MetricHostCPUs, Unit: "{cpu}", Attrs: []string{AttrHostName},
		Description: "CPUs the host's kernel had online when its agent answered in this scrape: what its processes can use at most. " +
			"On the snapshot resource; absent for a host whose agent did not say."}
	SessionInfo = &ClosingMetric{Name: MetricSessionInfo, Unit: "1",
		Description: "Always 1, on each session resource. Metric.Metadata() carries the volatile pg_stat_activity state (state, query, wait event, " +
			"timestamps, ...); see docs/pipeline.md."}
	SessionCgroupPressure = &ClosingMetric{Name: MetricSessionCgroupPress, Unit: "1", Double: true,
		Attrs: []string{AttrCgroupName, AttrPressureResource, AttrPressureKind},
		Description: "On session resources: for each cgroup v2 group the session's processes run in, the largest 10-second stall share (avg10 / 100) " +
			"over the hosts where they run there."}
	PressureStallTime = &ClosingMetric{Name: MetricPressureStallTime, Unit: "s", Sum: true, Double: true,
		Attrs:       []string{AttrPressureResource, AttrPressureKind},
		Description: "Cumulative stall time (pressure file total, microseconds, divided by 1e6). On host and cgroup v2 cgroup resources."}
	PressureStallRatio = &ClosingMetric{Name: MetricPressureStallRatio, Unit: "1", Double: true,
		Attrs: []string{AttrPressureResource, AttrPressureKind, AttrPressureWindow},
		Description: "Share of wall time tasks stalled for the resource, the kernel's running average (avg10, avg60, avg300 divided by 100). " +
			"On host and cgroup v2 cgroup resources."}
	CgroupTasks = &ClosingMetric{Name: MetricCgroupTasks, Unit: "{task}", Attrs: []string{AttrTaskState},
		Description: "Tasks of the group by state. On cgroup resources."}
)

// ClosingMetrics lists them.
var ClosingMetrics = []*ClosingMetric{HostUp, HostProcesses, HostCPUs, SessionInfo, SessionCgroupPressure,
	SessionSpillSize, SessionSpillFiles, SessionLockWait, SessionVmemUsage, SessionVmemRunaway,
	PressureStallTime, PressureStallRatio, CgroupTasks}

// The Greenplum session metrics' descriptions, for the closing batch.
var (
	SessionSpillSize = &ClosingMetric{Name: MetricSessionSpillSize, Unit: "By", Attrs: []string{AttrSegmentID, AttrQueryCommandCount},
		Description: "On Greenplum session resources: bytes of workfiles (spilled sorts, hashes) the session's command holds now on the segment " +
			"(gp_toolkit.gp_workfile_usage_per_query), from the receiver's latest read of it."}
	SessionSpillFiles = &ClosingMetric{Name: MetricSessionSpillFiles, Unit: "{file}", Attrs: []string{AttrSegmentID, AttrQueryCommandCount},
		Description: "On Greenplum session resources: workfiles the session's command holds now on the segment."}
	SessionLockWait = &ClosingMetric{Name: MetricSessionLockWait, Unit: "1",
		Attrs: []string{AttrSegmentID, AttrLockMode, AttrLockBlockerMode},
		Description: "On session resources, only while the session waits for a lock: 1, with the mode it wants and the mode a session holding a " +
			"conflicting lock holds (pg_locks, cluster-wide on Greenplum); Metric.Metadata() names the object and that session."}
	SessionVmemUsage = &ClosingMetric{Name: MetricSessionVmemUsage, Unit: "By", Attrs: []string{AttrSegmentID},
		Description: "On Greenplum session resources, where the server keeps it (GP6: gp_internal_tools' " +
			"session_state.session_level_memory_consumption): the vmem Greenplum accounts to the session on the segment."}
	SessionVmemRunaway = &ClosingMetric{Name: MetricSessionVmemRunaway, Unit: "1", Attrs: []string{AttrSegmentID},
		Description: "On Greenplum session resources beside gpotel.session.vmem.usage: 1 when the server marked the session runaway on the segment (its " +
			"red-zone cleaner will cancel it), else 0."}
)
