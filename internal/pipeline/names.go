// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// ResourceKind is what a resource of the pipeline is: the value of
// AttrResourceKind, read once per resource.
type ResourceKind uint8

// The resource kinds (docs/pipeline.md, rule 2).
const (
	// KindForeign has no gpotel.resource.kind: it is not ours and passes
	// through untouched.
	KindForeign ResourceKind = iota
	KindSnapshot
	KindSession
	KindProcess
	// KindExited holds exited processes' final totals (taskstats exit
	// records), in the shape of a process resource; without
	// gpotel.session.id when no scrape saw them (unattributed).
	KindExited
	// KindUnrecorded holds, per segment postmaster, the CPU its reaped
	// children used beyond their exit records: no session, one point per
	// postmaster.
	KindUnrecorded
	KindHost
	KindCgroup
	KindQuery
	// KindBatch heads every process batch of the receiver: its host's
	// batch sequence number and whether the snapshot lists the host's
	// processes in full (docs/pipeline.md, sparse batches).
	KindBatch
	// KindDeparted lists, in the closing batch, one host's processes that
	// left since the previous snapshot.
	KindDeparted
	// KindFinishedQuery carries, once, an ended query's event: its fields
	// as resource attributes, no metrics (processor; docs/pipeline.md,
	// finished work).
	KindFinishedQuery
	// KindEndedSession carries, once, an ended session's event.
	KindEndedSession
	// KindEndings lists, in the closing batch, what one host's server said
	// of how its backends' statements and lives ended: log records and
	// exits (docs/pipeline.md, how it ended).
	KindEndings
	// KindUnknown carries gpotel.resource.kind with a value this version
	// does not know.
	KindUnknown
)

// kindNames are the AttrResourceKind values.
var kindNames = [...]string{
	KindSnapshot:      "snapshot",
	KindSession:       "session",
	KindProcess:       "process",
	KindExited:        "exited",
	KindUnrecorded:    "unrecorded",
	KindHost:          "host",
	KindCgroup:        "cgroup",
	KindQuery:         "query",
	KindBatch:         "batch",
	KindDeparted:      "departed",
	KindFinishedQuery: "finished_query",
	KindEndedSession:  "ended_session",
	KindEndings:       "endings",
}

// String is the AttrResourceKind value; "" for KindForeign and KindUnknown.
func (k ResourceKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return ""
}

// Kinds lists every kind a resource of ours can be, in declaration order.
func Kinds() []ResourceKind {
	var out []ResourceKind
	for k := range kindNames {
		if kindNames[k] != "" {
			out = append(out, ResourceKind(k))
		}
	}
	return out
}

// KindOf reads a resource's kind from its attributes.
func KindOf(attrs pcommon.Map) ResourceKind {
	v, ok := attrs.Get(AttrResourceKind)
	if !ok {
		return KindForeign
	}
	s := v.Str()
	for k, name := range kindNames {
		if name != "" && name == s {
			return ResourceKind(k)
		}
	}
	return KindUnknown
}

// HoldsProcesses tells the kinds whose data points are processes: the
// processor stores them, and drops them unless emit_process_metrics.
func (k ResourceKind) HoldsProcesses() bool {
	return k == KindProcess || k == KindExited || k == KindUnrecorded
}

// Resource attributes.
const (
	AttrResourceKind        = "gpotel.resource.kind"
	AttrTmID                = "gpotel.tm_id"
	AttrDialect             = "gpotel.dialect"
	AttrHostName            = "host.name"
	AttrSegmentID           = "gpotel.segment.id"
	AttrSessionID           = "gpotel.session.id"
	AttrProcessPID          = "process.pid"
	AttrProcessCreationTime = "process.creation.time"
	AttrBackendType         = "gpotel.backend.type"
	AttrProcessSystem       = "gpotel.process.system"
	AttrProcessSparse       = "gpotel.process.sparse"
	AttrSessionPID          = "gpotel.session.pid"
	AttrSessionSystem       = "gpotel.session.system"
	AttrSessionOwn          = "gpotel.session.own"
	AttrDBNamespace         = "db.namespace"
	AttrSessionUser         = "gpotel.session.user"
)

// Data-point attributes and their values.
const (
	AttrCPUMode = "cpu.mode"
	CPUModeUser = "user"
	CPUModeSys  = "system"

	AttrDirection  = "disk.io.direction"
	DirectionRead  = "read"
	DirectionWrite = "write"

	AttrFaultType  = "system.paging.fault.type"
	FaultTypeMajor = "major"
	FaultTypeMinor = "minor"

	AttrContextSwitchType = "process.context_switch.type"
	ContextSwitchVol      = "voluntary"
	ContextSwitchInvol    = "involuntary"

	AttrRSSType  = "gpotel.memory.rss.type"
	RSSTypeAnon  = "anon"
	RSSTypeFile  = "file"
	RSSTypeShmem = "shmem"

	// AttrDelayType names a delay-accounting delay (taskstats) that /proc
	// has no file for; the run-queue and block-I/O waits have their own
	// metrics (gpotel.*.cpu.run_delay, gpotel.*.disk.delay).
	// Its values are the rows of gpotel.process.delay in Figures.
	AttrDelayType = "gpotel.delay.type"

	AttrWindow     = "gpotel.window"
	WindowLifetime = "lifetime"

	AttrMemoryType        = "gpotel.memory.type"
	MemoryTypeRSS         = "rss"
	MemoryTypeRSSAnon     = "rss_anon"
	MemoryTypeRSSShared   = "rss_shared"
	MemoryTypeVirtual     = "virtual"
	MemoryTypePeak        = "peak"
	MemoryTypeVirtualPeak = "virtual_peak"

	AttrMemoryAggregation    = "gpotel.memory.aggregation"
	MemoryAggregationCluster = "cluster"
	MemoryAggregationMaxHost = "max_host"
)

// Snapshot metrics (receiver).
const (
	MetricHostUp        = "gpotel.host.up"
	MetricHostProcesses = "gpotel.host.processes"
	MetricHostCPUs      = "gpotel.host.cpus"
)

// Framing metrics (receiver): always written, never switched off
// (docs/pipeline.md, sparse batches).
const (
	MetricBatchSequence   = "gpotel.batch.sequence"
	MetricBatchFull       = "gpotel.batch.full"
	MetricHostBatches     = "gpotel.host.batches"
	MetricHostSequence    = "gpotel.host.sequence"
	MetricProcessDeparted = "gpotel.process.departed"
	// MetricBackendEnding is one log record or exit of an endings resource.
	MetricBackendEnding = "gpotel.backend.ending"
	// MetricHostReadDelay is how long after the snapshot time the host's
	// last answer came: its processes were read no later than that.
	MetricHostReadDelay = "gpotel.host.read_delay"
)

// Session state metric (receiver) and the keys of its Metadata map.
const (
	MetricSessionInfo = "gpotel.session.info"

	MetaApplicationName  = "application_name"
	MetaClientAddr       = "client_addr"
	MetaClientHostname   = "client_hostname"
	MetaClientPort       = "client_port"
	MetaBackendStart     = "backend_start"
	MetaXactStart        = "xact_start"
	MetaQueryStart       = "query_start"
	MetaStateChange      = "state_change"
	MetaState            = "state"
	MetaWaiting          = "waiting"
	MetaWaitingReason    = "waiting_reason"
	MetaWaitEventType    = "wait_event_type"
	MetaWaitEvent        = "wait_event"
	MetaBackendType      = "backend_type"
	MetaBackendXID       = "backend_xid"
	MetaBackendXmin      = "backend_xmin"
	MetaRsgID            = "rsgid"
	MetaRsgName          = "rsgname"
	MetaRsgQueueDuration = "rsgqueueduration"
	MetaQuery            = "query"
	MetaQueryTruncated   = "query_truncated"
	// MetaBackends lists the session's processes on every host as
	// BackendRef strings: what the exporter needs to ask the agents for a
	// session's memory contexts without the per-process resources.
	MetaBackends = "backends"
)

// Process metrics (receiver).
const (
	MetricProcessInfo             = "gpotel.process.info"
	MetricProcessCPUTime          = "process.cpu.time"
	MetricProcessDiskIO           = "process.disk.io"
	MetricProcessCancelledWrite   = "gpotel.process.disk.cancelled_write"
	MetricProcessDiskDelay        = "gpotel.process.disk.delay"
	MetricProcessIOChars          = "gpotel.process.io.chars"
	MetricProcessIOSyscalls       = "gpotel.process.io.syscalls"
	MetricProcessPagingFaults     = "process.paging.faults"
	MetricProcessContextSwitches  = "process.context_switches"
	MetricProcessRunDelay         = "gpotel.process.cpu.run_delay"
	MetricProcessDelay            = "gpotel.process.delay"
	MetricProcessMemoryUsage      = "process.memory.usage"
	MetricProcessMemoryVirtual    = "process.memory.virtual"
	MetricProcessMemoryRSS        = "gpotel.process.memory.rss"
	MetricProcessMemoryPeak       = "gpotel.process.memory.peak"
	MetricProcessMemoryVirtPeak   = "gpotel.process.memory.virtual_peak"
	MetricProcessMemorySwap       = "gpotel.process.memory.swap"
	MetricProcessMemoryPageTables = "gpotel.process.memory.page_tables"
	MetricProcessThreadCount      = "process.thread.count"
)

// Session figures (processor). Windowed ones also have a RateSuffix sibling.
const (
	MetricSessionCPUTime         = "gpotel.session.cpu.time"
	MetricSessionDiskIO          = "gpotel.session.disk.io"
	MetricSessionCancelledWrite  = "gpotel.session.disk.cancelled_write"
	MetricSessionDiskDelay       = "gpotel.session.disk.delay"
	MetricSessionIOChars         = "gpotel.session.io.chars"
	MetricSessionIOSyscalls      = "gpotel.session.io.syscalls"
	MetricSessionPagingFaults    = "gpotel.session.paging.faults"
	MetricSessionContextSwitches = "gpotel.session.context_switches"
	MetricSessionRunDelay        = "gpotel.session.cpu.run_delay"
	MetricSessionDelay           = "gpotel.session.delay"
	MetricSessionWindowSpan      = "gpotel.session.window.span"
	MetricSessionPartial         = "gpotel.session.partial"
	MetricSessionProcesses       = "gpotel.session.processes"
	MetricSessionHosts           = "gpotel.session.hosts"
	MetricSessionMemoryUsage     = "gpotel.session.memory.usage"

	RateSuffix = ".rate"
)

// Cluster figures (processor), on the snapshot resource, per window: the
// session figures' counters summed over every process whatever its session
// (ClusterMetric), and over the exited processes no scrape saw, per segment
// (UnattributedMetric, with host.name and gpotel.segment.id).
const (
	clusterPrefix      = "gpotel.cluster."
	unattributedPrefix = "gpotel.unattributed."
	sessionPrefix      = "gpotel.session."
)

// ClusterMetric names the cluster-wide sibling of a session figure:
// gpotel.session.cpu.time → gpotel.cluster.cpu.time.
func ClusterMetric(session string) string {
	return clusterPrefix + strings.TrimPrefix(session, sessionPrefix)
}

// UnattributedMetric names the unattributed sibling of a session figure:
// gpotel.session.cpu.time → gpotel.unattributed.cpu.time.
func UnattributedMetric(session string) string {
	return unattributedPrefix + strings.TrimPrefix(session, sessionPrefix)
}

// MetricUnrecordedCPUTime (processor, on the snapshot resource, per window,
// host.name, gpotel.segment.id and cpu.mode) is the CPU of each segment
// postmaster's reaped children beyond their exit records: what the kernel
// charged them after the record was taken (teardown), and records lost.
const MetricUnrecordedCPUTime = "gpotel.unrecorded.cpu.time"

// Smoothed figures (processor): exponentially weighted averages, one point
// per configured time constant (AttrTimeConstant). Session ones are on the
// session resource; host (with host.name) and cluster ones on the snapshot's.
const (
	AttrTimeConstant = "gpotel.time_constant"

	MetricSessionCPUUsageSmoothed    = "gpotel.session.cpu.usage.smoothed"
	MetricSessionDiskIORateSmoothed  = "gpotel.session.disk.io.rate.smoothed"
	MetricSessionMemoryUsageSmoothed = "gpotel.session.memory.usage.smoothed"
	MetricHostCPUUsageSmoothed       = "gpotel.host.cpu.usage.smoothed"
	MetricHostDiskIORateSmoothed     = "gpotel.host.disk.io.rate.smoothed"
	MetricHostMemoryUsageSmoothed    = "gpotel.host.memory.usage.smoothed"
	MetricClusterCPUUsageSmoothed    = "gpotel.cluster.cpu.usage.smoothed"
	MetricClusterDiskIORateSmoothed  = "gpotel.cluster.disk.io.rate.smoothed"
	MetricClusterMemoryUsageSmoothed = "gpotel.cluster.memory.usage.smoothed"
)

// Skew figures (processor), on the session resource, per window and for
// lifetime (AttrWindow): how unevenly a figure (AttrSkewFigure) is spread
// over the segments the session had processes on, the coordinator excluded.
// Absent when no segment used any of it.
const (
	AttrSkewFigure = "gpotel.skew.figure"
	SkewFigureCPU  = "cpu"     // process.cpu.time, user + system
	SkewFigureIO   = "disk.io" // process.disk.io, read + write

	MetricSessionSkewRatio          = "gpotel.session.skew.ratio"           // 1 - avg/max
	MetricSessionSkewMaxOverAvg     = "gpotel.session.skew.max_over_avg"    // max/avg
	MetricSessionSkewHottestSegment = "gpotel.session.skew.hottest_segment" // content id
	MetricSessionSkewSegments       = "gpotel.session.skew.segments"        // segments that took part
)

// Per-host session figures (processor, with emit_session_host_figures), on
// the session resource with host.name: what the session's processes on one
// host used, per window (rates) and now (memory, processes).
const (
	MetricSessionHostCPUUsage   = "gpotel.session.host.cpu.usage"
	MetricSessionHostDiskIORate = "gpotel.session.host.disk.io.rate"
	MetricSessionHostMemory     = "gpotel.session.host.memory.usage"
	MetricSessionHostProcesses  = "gpotel.session.host.processes"
)

// WindowName is the gpotel.window value of a configured window: Go's
// duration text without trailing zero units ("30s", "5m", "1h30m", "1h").
func WindowName(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// BackendRef names one process of a session: where it runs and its pid.
type BackendRef struct {
	Host      string
	SegmentID int64
	PID       int64
}

// String is the MetaBackends element: "<host.name>/<segment id>/<pid>".
func (b BackendRef) String() string {
	return b.Host + "/" + strconv.FormatInt(b.SegmentID, 10) + "/" + strconv.FormatInt(b.PID, 10)
}

// ParseBackendRef reads a MetaBackends element; the host is everything
// before the last two slashes.
func ParseBackendRef(s string) (BackendRef, error) {
	rest, pid, ok1 := cutLast(s)
	host, seg, ok2 := cutLast(rest)
	if !ok1 || !ok2 || host == "" {
		return BackendRef{}, fmt.Errorf("backend %q is not host/segment/pid", s)
	}
	segID, err1 := strconv.ParseInt(seg, 10, 64)
	p, err2 := strconv.ParseInt(pid, 10, 64)
	if err1 != nil || err2 != nil || p <= 0 {
		return BackendRef{}, fmt.Errorf("backend %q is not host/segment/pid", s)
	}
	return BackendRef{Host: host, SegmentID: segID, PID: p}, nil
}

func cutLast(s string) (before, after string, ok bool) {
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}

// Pressure and control groups (receiver): host and cgroup resources, and the
// pressure of a session's groups on its session resource.
const (
	AttrCgroupPath           = "gpotel.cgroup.path"
	AttrCgroupVersion        = "gpotel.cgroup.version"
	AttrCgroupControllers    = "gpotel.cgroup.controllers"
	AttrCgroupTasksSource    = "gpotel.cgroup.tasks.source"
	AttrResourceGroupOID     = "gpotel.resource_group.oid"
	AttrResourceGroupName    = "gpotel.resource_group.name"
	AttrResourceQueueName    = "gpotel.resource_queue.name"
	AttrCgroupName           = "gpotel.cgroup.name"
	AttrPressureResource     = "gpotel.pressure.resource"
	AttrPressureKind         = "gpotel.pressure.kind"
	AttrPressureWindow       = "gpotel.pressure.window"
	AttrTaskState            = "gpotel.task.state"
	MetricPressureStallTime  = "gpotel.pressure.stall.time"
	MetricPressureStallRatio = "gpotel.pressure.stall.ratio"
	MetricCgroupTasks        = "gpotel.cgroup.tasks"
	MetricSessionCgroupPress = "gpotel.session.cgroup.pressure"
)

// Query figures (processor): one query resource per running query and per
// query that finished inside the longest window (docs/pipeline.md, query
// figures). The process title's command count (MetricProcessCommandCount)
// is how Greenplum names a session's query; without it the query is the one
// that started at its session's query_start.
const (
	// MetricProcessCommandCount is cmd<N> of a Greenplum process title: the
	// gp_command_count of the command the process last ran (receiver).
	MetricProcessCommandCount = "gpotel.process.command_count"

	AttrQueryCommandCount = "gpotel.query.command_count" // the ccnt, when the key is ccnt
	AttrQueryStart        = "gpotel.query.start"         // query_start, RFC 3339 with nanoseconds
	AttrQueryKeySource    = "gpotel.query.key.source"    // QueryKeyCommandCount or QueryKeyQueryStart
	AttrDBQueryText       = "db.query.text"              // only with the processor's query_text on

	QueryKeyCommandCount = "command_count"
	QueryKeyQueryStart   = "query_start"

	MetricQueryDuration  = "gpotel.query.duration"
	MetricQueryCompleted = "gpotel.query.completed"
	MetricQueryPartial   = "gpotel.query.partial"
	// Per segment instance (host.name, gpotel.segment.id): what skew is computed from.
	MetricQuerySegmentCPUTime = "gpotel.query.segment.cpu.time"
	MetricQuerySegmentDiskIO  = "gpotel.query.segment.disk.io"

	queryPrefix = "gpotel.query."
)

// QueryMetric names the per-query sibling of a session figure:
// gpotel.session.cpu.time → gpotel.query.cpu.time (the skew figures too:
// gpotel.query.skew.ratio).
func QueryMetric(session string) string {
	return queryPrefix + strings.TrimPrefix(session, sessionPrefix)
}

// SessionMetricOfQuery is QueryMetric's inverse; ok is false for a name
// that is no per-query figure.
func SessionMetricOfQuery(query string) (session string, ok bool) {
	rest, ok := strings.CutPrefix(query, queryPrefix)
	if !ok {
		return "", false
	}
	return sessionPrefix + rest, true
}

// QueryStartValue writes a query_start as AttrQueryStart holds it.
func QueryStartValue(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// UnknownSegment is the segment of a process whose gpotel.process.info had
// no segment id: it takes no part in skew rather than counting as segment 0.
const UnknownSegment = math.MinInt32
