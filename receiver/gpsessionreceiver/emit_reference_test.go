package gpsessionreceiver

import (
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/kernelunits"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadata"
)

// builderEmitSnapshot is the emission as it was before process resources
// were written straight into pdata, kept as the reference the direct writer
// must match byte for byte: process resources through mdatagen's
// MetricsBuilder, by all the builders at once, each taking a contiguous
// stretch; mbs[0] also writes the snapshot and session resources, as the
// emitter does.
func builderEmitSnapshot(mbs []*metadata.MetricsBuilder, s *snapshot) (pmetric.Metrics, emitStats) {
	md, st := emitSnapshotAndSessions(mbs[0], s)
	ts := pcommon.NewTimestampFromTime(s.time)

	stretches := splitProcesses(s.results, len(mbs))
	parts := make([]pmetric.Metrics, len(stretches))
	counts := make([]emitStats, len(stretches))
	byPID := backendsByPID(s)
	var wg sync.WaitGroup
	for w, stretch := range stretches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, span := range stretch {
				builderEmitProcesses(mbs[w], ts, s.tmID, &s.results[span.result], byPID[span.result], span.from, span.to, &counts[w])
			}
			parts[w] = mbs[w].Emit()
		}()
	}
	wg.Wait()
	for w := range parts {
		parts[w].ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
		st.processes += counts[w].processes
		st.withoutStat += counts[w].withoutStat
	}
	return md, st
}

// builderEmitProcesses writes one process resource per answered process of r.infos[from:to].
func builderEmitProcesses(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, tmID int64, r *hostResult, byPID map[int64]*Backend, from, to int, st *emitStats) {
	rb := mb.NewResourceBuilder()
	for _, info := range r.infos[from:to] {
		b := byPID[info.GetPid()] // checkAnswer let only asked pids through
		p := kernelunits.Convert(info, r.consts)
		if !p.HasStat {
			st.withoutStat++
			continue
		}
		builderRecordProcess(mb, ts, &p)
		rb.SetGpotelResourceKindProcess()
		rb.SetGpotelTmID(tmID)
		rb.SetHostName(r.host)
		rb.SetGpotelSegmentID(b.SegmentID)
		rb.SetGpotelSessionID(b.SessionID)
		rb.SetProcessPid(b.PID)
		rb.SetProcessCreationTime(p.CreationTime.UTC().Format(CreationTimeLayout))
		if b.BackendType != "" {
			rb.SetGpotelBackendType(b.BackendType)
		}
		rb.SetGpotelProcessSystem(isSystemProcess(b.SessionID, b.BackendType))
		mb.EmitForResource(metadata.WithResource(rb.Emit()),
			metadata.WithStartTimeOverride(pcommon.NewTimestampFromTime(p.CreationTime)))
		st.processes++
	}
}

func builderRecordProcess(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, p *kernelunits.Process) {
	if p.UserCPU.OK {
		mb.RecordProcessCPUTimeDataPoint(ts, p.UserCPU.V, metadata.AttributeCPUModeUser)
		mb.RecordProcessCPUTimeDataPoint(ts, p.SystemCPU.V, metadata.AttributeCPUModeSystem)
	}
	if p.BlkioDelay.OK {
		mb.RecordGpotelProcessDiskDelayDataPoint(ts, p.BlkioDelay.V)
	}
	if p.MajorFaults.OK {
		mb.RecordProcessPagingFaultsDataPoint(ts, p.MajorFaults.V, metadata.AttributeFaultTypeMajor)
		mb.RecordProcessPagingFaultsDataPoint(ts, p.MinorFaults.V, metadata.AttributeFaultTypeMinor)
	}
	if p.VirtualMemory.OK {
		mb.RecordProcessMemoryVirtualDataPoint(ts, p.VirtualMemory.V)
	}
	if v := p.MemoryUsage(); v.OK {
		mb.RecordProcessMemoryUsageDataPoint(ts, v.V)
	}
	if v := p.ThreadCount(); v.OK {
		mb.RecordProcessThreadCountDataPoint(ts, v.V)
	}
	if p.VoluntarySwitches.OK {
		mb.RecordProcessContextSwitchesDataPoint(ts, p.VoluntarySwitches.V, metadata.AttributeContextSwitchTypeVoluntary)
		mb.RecordProcessContextSwitchesDataPoint(ts, p.InvoluntarySwitches.V, metadata.AttributeContextSwitchTypeInvoluntary)
	}
	for _, m := range []struct {
		v   kernelunits.Value[int64]
		typ metadata.AttributeRssType
	}{{p.RSSAnon, metadata.AttributeRssTypeAnon}, {p.RSSFile, metadata.AttributeRssTypeFile}, {p.RSSShmem, metadata.AttributeRssTypeShmem}} {
		if m.v.OK {
			mb.RecordGpotelProcessMemoryRssDataPoint(ts, m.v.V, m.typ)
		}
	}
	if p.PeakRSS.OK {
		mb.RecordGpotelProcessMemoryPeakDataPoint(ts, p.PeakRSS.V)
	}
	if p.PeakVirtual.OK {
		mb.RecordGpotelProcessMemoryVirtualPeakDataPoint(ts, p.PeakVirtual.V)
	}
	if p.Swap.OK {
		mb.RecordGpotelProcessMemorySwapDataPoint(ts, p.Swap.V)
	}
	if p.HasIO {
		mb.RecordProcessDiskIoDataPoint(ts, p.ReadBytes.V, metadata.AttributeDirectionRead)
		mb.RecordProcessDiskIoDataPoint(ts, p.WriteBytes.V, metadata.AttributeDirectionWrite)
		mb.RecordGpotelProcessDiskCancelledWriteDataPoint(ts, p.CancelledWriteBytes.V)
		mb.RecordGpotelProcessIoCharsDataPoint(ts, p.ReadChars.V, metadata.AttributeDirectionRead)
		mb.RecordGpotelProcessIoCharsDataPoint(ts, p.WriteChars.V, metadata.AttributeDirectionWrite)
		mb.RecordGpotelProcessIoSyscallsDataPoint(ts, p.ReadSyscalls.V, metadata.AttributeDirectionRead)
		mb.RecordGpotelProcessIoSyscallsDataPoint(ts, p.WriteSyscalls.V, metadata.AttributeDirectionWrite)
	}
	if p.RunDelay.OK {
		mb.RecordGpotelProcessCPURunDelayDataPoint(ts, p.RunDelay.V)
	}
	for i, d := range p.Delays {
		if d.OK {
			mb.RecordGpotelProcessDelayDataPoint(ts, d.V, delayTypes[i])
		}
	}
}
