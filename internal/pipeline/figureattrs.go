// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

// FigureAttribute is the data-point attribute that tells the figures of one
// process metric apart; its values are the Value column of the metric's
// rows in Figures.
type FigureAttribute struct {
	Name        string // as it travels
	ID          string // its name in the receiver's metadata.yaml (mdatagen's builder API)
	Description string
}

// FigureAttributes are the attributes of the process metrics' Attr column.
var FigureAttributes = []FigureAttribute{
	{AttrCPUMode, "cpu_mode", "The CPU mode the time was spent in."},
	{AttrDirection, "direction", "The direction of the transfer."},
	{AttrFaultType, "fault_type", "The kind of page fault."},
	{AttrContextSwitchType, "context_switch_type", "Whether the process gave up the CPU itself or was preempted."},
	{AttrRSSType, "rss_type", "The kind of resident memory."},
	{AttrDelayType, "delay_type", "A delay-accounting wait that /proc has no file for (taskstats)."},
}

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
