// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

// Attribute declares an attribute of the receiver's output as its
// metadata.yaml states it: figuregen writes that file's attributes and
// resource_attributes from these tables, and only from them.
type Attribute struct {
	Name        string // as it travels
	ID          string // a data-point attribute's key in metadata.yaml (mdatagen's builder API)
	Type        string // string, int or bool
	Description string
	// Enum is its values when they are a fixed set; a figure attribute's
	// are the Value column of its metric's rows in Figures.
	Enum []string
}

// FigureAttributes are the attributes of the process metrics' Attr column.
var FigureAttributes = []Attribute{
	{AttrCPUMode, "cpu_mode", "string", "The CPU mode the time was spent in.", nil},
	{AttrDirection, "direction", "string", "The direction of the transfer.", nil},
	{AttrFaultType, "fault_type", "string", "The kind of page fault.", nil},
	{AttrContextSwitchType, "context_switch_type", "string", "Whether the process gave up the CPU itself or was preempted.", nil},
	{AttrRSSType, "rss_type", "string", "The kind of resident memory.", nil},
	{AttrDelayType, "delay_type", "string", "A delay-accounting wait that /proc has no file for (taskstats).", nil},
}

// PointAttributes are the other data-point attributes of the receiver's
// metrics: process.pid and gpotel.process.info's (ProcessInfoAttrs), and
// the closing batch's (ClosingMetric.Attrs).
var PointAttributes = []Attribute{
	{AttrProcessPID, "process_pid", "int", "Every process metric: the process the point is about. Its StartTimestamp is the process creation time, " +
		"which tells a reused pid apart.", nil},
	{AttrSegmentID, "segment_id", "int", "gpotel.process.info points: the segment content id; -1 is the coordinator.", nil},
	{AttrBackendType, "backend_type", "string", "gpotel.process.info points, when the server reports it: pg_stat_activity backend_type.", nil},
	{AttrProcessSystem, "process_system", "bool", "gpotel.process.info points: true for a process that is not a client backend " +
		"(no sess_id, or a non-client backend_type).", nil},
	{AttrProcessSparse, "process_sparse", "bool", "gpotel.process.info points: true when the process's points in this batch are only the figures that " +
		"changed since the receiver last sent it; the others are as last sent (docs/pipeline.md, sparse batches).", nil},
	{AttrHostName, "host_name", "string", "The host a snapshot figure is about.", nil},
	{AttrCgroupName, "cgroup_name", "string", "gpotel.session.cgroup.pressure points: the resource group's name, oid:<oid> when the catalog does not " +
		"name it, or the cgroup path of a group that is no resource group.", nil},
	{AttrQueryCommandCount, "command_count", "int", "gpotel.session.spill.* points: the gp_command_count of the session's command that holds the workfiles.", nil},
	{AttrLockMode, "lock_mode", "string", "gpotel.session.lock.wait points: the lock mode the session waits for (pg_locks.mode).", nil},
	{AttrLockBlockerMode, "lock_blocker_mode", "string", "gpotel.session.lock.wait points: the mode the blocking session holds.", nil},
	{AttrPressureResource, "pressure_resource", "string", "The resource tasks stalled for.", []string{"cpu", "memory", "io", "irq"}},
	{AttrPressureKind, "pressure_kind", "string", "some: at least one task stalled; full: every non-idle task stalled at once.",
		[]string{PressureSome, PressureFull}},
	{AttrPressureWindow, "pressure_window", "string", "The kernel's averaging window.", []string{"10s", "60s", "300s"}},
	{AttrTaskState, "task_state", "string", "A task's scheduler state, in the buckets of the kernel's struct cgroupstats (io_wait only from " +
		"cgroupstats; other only from proc_stat: zombie, idle, dead).",
		[]string{"running", "sleeping", "uninterruptible", "stopped", "io_wait", "other"}},
}

// ResourceAttributes are the attributes of the receiver's resources
// (docs/pipeline.md, resources); every one is on unless the user switches
// it off.
var ResourceAttributes = []Attribute{
	{Name: AttrResourceKind, Type: "string", Enum: receiverKinds(),
		Description: "What the resource is: one snapshot per scrape, one session per coordinator session row, one process resource per session and host " +
			"per agent answer (its processes are data points), exited processes' final totals, the postmasters' unrecorded CPU, one host and one cgroup " +
			"resource per host and group with their pressure."},
	{Name: AttrTmID, Type: "int", Description: "Every resource: the coordinator postmaster start, unix seconds (yagpcc's tm_id)."},
	{Name: AttrHostName, Type: "string", Description: "Every resource: for a process the host it runs on; for the snapshot and sessions the coordinator host."},
	{Name: AttrDialect, Type: "string", Description: "Snapshot resource: the server dialect, gp6, gp7, cloudberry or postgresql."},
	{Name: AttrSessionID, Type: "int", Description: "Process and session resources: sess_id; 0 for a system process without one."},
	{Name: AttrSessionPID, Type: "int", Description: "Session resources: the coordinator backend's pid."},
	{Name: AttrSessionSystem, Type: "bool", Description: "Session resources: true when the row is a system process, not a client session."},
	{Name: AttrSessionOwn, Type: "bool", Description: "Session resources: true when the session is one of the collector's own monitoring connections " +
		"(known by its backend pid); absent otherwise."},
	{Name: AttrDBNamespace, Type: "string", Description: "Session resources: the database (pg_stat_activity datname)."},
	{Name: AttrSessionUser, Type: "string", Description: "Session resources: the user (pg_stat_activity usename)."},
	{Name: AttrResourceQueueName, Type: "string", Description: "Session resources on Greenplum: the resource queue of the session's role " +
		"(pg_resqueue.rsqname of pg_roles.rolresqueue); absent where the server has no queues or the catalog did not name one."},
	{Name: AttrCgroupPath, Type: "string", Description: "Cgroup resources: the group's path inside its hierarchy, as /proc/<pid>/cgroup names it; for " +
		"a resource group it ends at the oid."},
	{Name: AttrCgroupVersion, Type: "int", Description: "Cgroup resources: 1 or 2."},
	{Name: AttrCgroupControllers, Type: "string", Description: "Cgroup resources of a cgroup v1 group: the controllers of its hierarchy (cpu, or cpu,cpuacct)."},
	{Name: AttrCgroupTasksSource, Type: "string", Enum: []string{TasksSourceCgroupstats, TasksSourceProcStat},
		Description: "Cgroup resources: where gpotel.cgroup.tasks comes from: cgroupstats (every task of a cgroup v1 group, from the kernel) or " +
			"proc_stat (the group's database processes this scrape read)."},
	{Name: AttrResourceGroupOID, Type: "int", Description: "Cgroup resources of a Greenplum resource group (<parent>/<oid>): the group's oid."},
	{Name: AttrResourceGroupName, Type: "string", Description: "Cgroup resources of a resource group: its name in the coordinator's pg_resgroup; " +
		"absent when the catalog does not name the oid."},
}

// receiverKinds are the gpotel.resource.kind values the receiver writes.
func receiverKinds() []string {
	var out []string
	for _, k := range []ResourceKind{KindSnapshot, KindSession, KindProcess, KindExited, KindUnrecorded, KindHost, KindCgroup} {
		out = append(out, k.String())
	}
	return out
}

// ProcessInfoAttrs are gpotel.process.info's data-point attributes after
// process.pid: they describe a process rather than tell figures apart.
var ProcessInfoAttrs = []string{AttrSegmentID, AttrBackendType, AttrProcessSystem, AttrProcessSparse}

// StatusLine is an optional kB line of /proc/<pid>/status and the
// yagpcc.ProcStatus field the agent reports it in.
type StatusLine struct {
	Line       string // as the kernel prints it, without the colon
	ProtoField string // the ProcStatus field's proto name
}

// StatusLinesBesideFigures are the status lines the agent reports that no
// row of Figures reads: yagpcc's ProcStatus carries them for its clients.
// The agent's list of lines is these and the rows' status sources
// (segmentagent/procfs/statuslines.go, generated).
var StatusLinesBesideFigures = []StatusLine{
	{"VmSize", "vm_size_kb"},
	{"VmData", "vm_data_kb"},
}

// MetricAttributes are the data-point attributes a metric of the
// receiver's declares, in order; nil for a name that is none of them.
func MetricAttributes(name string) []string {
	if m, ok := processMetricByName[name]; ok {
		if m == ProcessInfo {
			return append([]string{AttrProcessPID}, ProcessInfoAttrs...)
		}
		if m.Attr == "" {
			return []string{AttrProcessPID}
		}
		return []string{AttrProcessPID, m.Attr}
	}
	for _, m := range ClosingMetrics {
		if m.Name == name {
			return m.Attrs
		}
	}
	return nil
}
