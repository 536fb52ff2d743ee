// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshot

import (
	"time"

	"github.com/gpotel/gpotel/internal/kernelunits"
	"github.com/gpotel/gpotel/internal/pipeline"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// Value is one figure of one process in seconds (Float, for a metric
// with Double) or bytes and counts (Int). A figure whose source was not
// read is not OK, never zero.
type Value struct {
	Int   int64
	Float float64
	OK    bool
}

// Process is one process as the receiver writes it: its identity and every
// figure (Figures) in seconds and bytes.
type Process struct {
	PID int64
	// CreationTime is boot time + stat starttime, or the exit record's
	// start; zero without stat, and then the process has no identity.
	CreationTime time.Time
	HasStat      bool
	Values       [pipeline.NumFigures]Value
}

// Set stores a figure's value in its metric's type.
func (p *Process) Set(f pipeline.Figure, seconds float64, n int64) {
	if pipeline.Figures[f].Metric.Double {
		p.Values[f] = Value{Float: seconds, OK: true}
	} else {
		p.Values[f] = Value{Int: n, OK: true}
	}
}

// setRaw converts a raw reading in unit u with the host's constants.
func (p *Process) setRaw(f pipeline.Figure, h kernelunits.Host, u kernelunits.Unit, raw int64) {
	if pipeline.Figures[f].Metric.Double {
		p.Values[f] = Value{Float: h.ToSeconds(u, raw), OK: true}
	} else {
		p.Values[f] = Value{Int: h.ToInt(u, raw), OK: true}
	}
}

// ProcessFromAnswer turns one agent reading into seconds and bytes with the
// answering host's constants: for each figure, the first of its Live
// sources the answer has.
func ProcessFromAnswer(info *yagpcc.GpPidProcInfo, host kernelunits.Host) Process {
	p := Process{PID: info.GetPid()}
	if st := info.GetProcStat(); st != nil {
		p.HasStat = true
		p.CreationTime = host.SinceBoot(st.GetStarttime())
	}
	for f := range pipeline.NumFigures {
		for _, src := range pipeline.Figures[f].Live {
			if src.Delayacct && !host.Delayacct {
				continue
			}
			if raw, ok := src.Read(info); ok {
				p.setRaw(f, host, src.Unit, raw)
				break
			}
		}
	}
	return p
}

// ProcessFromExit turns one taskstats exit record into the exited process's
// final totals: every figure with an Exit source. Delays other than the
// run-queue wait are read only when delay accounting was on: otherwise the
// kernel left them 0, not measured.
func ProcessFromExit(r *gpotelv1.ExitRecord, delayacct bool) Process {
	s := r.GetStats()
	p := Process{PID: s.GetPid(), CreationTime: time.Unix(0, r.GetStartTimeUnixNano()).UTC(), HasStat: true}
	var noHost kernelunits.Host // exit records carry no ticks or pages
	for f := range pipeline.NumFigures {
		for _, src := range pipeline.Figures[f].Exit {
			if src.Delayacct && !delayacct {
				continue
			}
			if raw, ok := src.Read(s); ok {
				p.setRaw(f, noHost, src.Unit, raw)
				break
			}
		}
	}
	return p
}
