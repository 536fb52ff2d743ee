package snapshotdiffprocessor

import (
	sc "github.com/gpotel/gpotel/internal/gpsemconv"
)

// attrSlot maps one data-point attribute value to a counter slot.
type attrSlot struct {
	value string
	slot  int
}

// counterMetric ties a receiver's cumulative process metric to the session
// figure the processor derives from it.
type counterMetric struct {
	process string
	session string
	unit    string
	attr    string     // data-point attribute telling the slots apart; "" for one slot
	slots   []attrSlot // value "" when attr is ""
	seconds bool       // the value is seconds, held as integer ns
}

var counterMetrics = []counterMetric{
	{sc.MetricProcessCPUTime, sc.MetricSessionCPUTime, "s", sc.AttrCPUMode,
		[]attrSlot{{sc.CPUModeUser, ctrCPUUser}, {sc.CPUModeSys, ctrCPUSystem}}, true},
	{sc.MetricProcessDiskIO, sc.MetricSessionDiskIO, "By", sc.AttrDirection,
		[]attrSlot{{sc.DirectionRead, ctrDiskRead}, {sc.DirectionWrite, ctrDiskWrite}}, false},
	{sc.MetricProcessCancelledWrite, sc.MetricSessionCancelledWrite, "By", "",
		[]attrSlot{{"", ctrCancelledWrite}}, false},
	{sc.MetricProcessDiskDelay, sc.MetricSessionDiskDelay, "s", "",
		[]attrSlot{{"", ctrDiskDelay}}, true},
	{sc.MetricProcessIOChars, sc.MetricSessionIOChars, "By", sc.AttrDirection,
		[]attrSlot{{sc.DirectionRead, ctrCharsRead}, {sc.DirectionWrite, ctrCharsWrite}}, false},
	{sc.MetricProcessIOSyscalls, sc.MetricSessionIOSyscalls, "{syscall}", sc.AttrDirection,
		[]attrSlot{{sc.DirectionRead, ctrSyscallsRead}, {sc.DirectionWrite, ctrSyscallsWrite}}, false},
	{sc.MetricProcessPagingFaults, sc.MetricSessionPagingFaults, "{fault}", sc.AttrFaultType,
		[]attrSlot{{sc.FaultTypeMajor, ctrFaultsMajor}, {sc.FaultTypeMinor, ctrFaultsMinor}}, false},
	{sc.MetricProcessContextSwitches, sc.MetricSessionContextSwitches, "{context_switch}", sc.AttrContextSwitchType,
		[]attrSlot{{sc.ContextSwitchVol, ctrSwitchesVoluntary}, {sc.ContextSwitchInvol, ctrSwitchesInvoluntary}}, false},
	{sc.MetricProcessRunDelay, sc.MetricSessionRunDelay, "s", "",
		[]attrSlot{{"", ctrRunDelay}}, true},
	{sc.MetricProcessDelay, sc.MetricSessionDelay, "s", sc.AttrDelayType,
		[]attrSlot{{sc.DelaySwapin, ctrDelaySwapin}, {sc.DelayFreepages, ctrDelayFreepages}, {sc.DelayThrashing, ctrDelayThrashing},
			{sc.DelayCompact, ctrDelayCompact}, {sc.DelayWpcopy, ctrDelayWpcopy}, {sc.DelayIRQ, ctrDelayIRQ}}, true},
}

var counterByProcessMetric = func() map[string]*counterMetric {
	m := make(map[string]*counterMetric, len(counterMetrics))
	for i := range counterMetrics {
		m[counterMetrics[i].process] = &counterMetrics[i]
	}
	return m
}()

// memoryTypeNames are the gpotel.memory.type values of the memory slots.
var memoryTypeNames = [numMemory]string{
	memRSS:         sc.MemoryTypeRSS,
	memRSSAnon:     sc.MemoryTypeRSSAnon,
	memRSSShared:   sc.MemoryTypeRSSShared,
	memVirtual:     sc.MemoryTypeVirtual,
	memPeak:        sc.MemoryTypePeak,
	memVirtualPeak: sc.MemoryTypeVirtualPeak,
}
