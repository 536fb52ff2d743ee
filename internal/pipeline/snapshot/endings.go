// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshot

import (
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// How a backend's statement or life ended, as the server said it
// (docs/pipeline.md, how it ended): the coordinator's log records of
// failed statements and sessions, and the exits of the backends.

// MaxEndingMessage bounds a log record's message as the endings carry it:
// the server log is written by what a database user sends.
const MaxEndingMessage = 512

// Ending is one thing the server said of how a backend's statement or
// life ended: a log record (Severity set) or its exit (Exited).
type Ending struct {
	Session int64 // gpotel.session.id
	PID     int64
	// Time is the log record's time or the exit's, unix ns.
	Time int64
	// SessionStart is the session start the log record names (PostgreSQL's
	// session_id), unix ns; 0: none.
	SessionStart int64
	// CommandCount is the record's cmd<M> (Greenplum); 0: none.
	CommandCount int64
	Severity     string
	SQLState     string
	Message      string
	Exited       bool
	ExitCode     int64 // exit(n)'s n; meaningless when Signal != 0
	Signal       int64 // the signal that killed it; 0: it exited
}

// HostEndings are what one host's server said since the previous snapshot.
type HostEndings struct {
	Host string
	// LogReadThrough: every log record written before it has been listed
	// (unix ns); 0: the host's log is not read.
	LogReadThrough int64
	Endings        []Ending
}

// AppendEndings writes one endings resource: a point per ending, at its
// time, the session start as StartTimestamp.
func AppendEndings(rms pmetric.ResourceMetricsSlice, scope Scope, tmID int64, h *HostEndings) {
	attrs, ms := appendHostFraming(rms, scope, pipeline.KindEndings, tmID, h.Host, 4)
	if h.LogReadThrough != 0 {
		attrs.PutInt(pipeline.AttrLogReadThrough, h.LogReadThrough)
	}
	dps := appendMetric(ms, pipeline.MetricBackendEnding, "Always 1: a log record or an exit of the backend (docs/pipeline.md, how it ended).", "1", false)
	dps.EnsureCapacity(len(h.Endings))
	for _, e := range h.Endings {
		dp := dps.AppendEmpty()
		dp.SetStartTimestamp(pcommon.Timestamp(max(e.SessionStart, 0))) // #nosec G115 -- not negative
		dp.SetTimestamp(pcommon.Timestamp(max(e.Time, 0)))              // #nosec G115 -- not negative
		dp.SetIntValue(1)
		da := dp.Attributes()
		da.PutInt(pipeline.AttrProcessPID, e.PID)
		da.PutInt(pipeline.AttrSessionID, e.Session)
		if e.CommandCount > 0 {
			da.PutInt(pipeline.AttrQueryCommandCount, e.CommandCount)
		}
		if e.Exited {
			if e.Signal != 0 {
				da.PutInt(pipeline.AttrProcessExitSignal, e.Signal)
			} else {
				da.PutInt(pipeline.AttrProcessExitCode, e.ExitCode)
			}
			continue
		}
		da.PutStr(pipeline.AttrLogSeverity, e.Severity)
		da.PutStr(pipeline.AttrSQLState, e.SQLState)
		da.PutStr(pipeline.AttrLogMessage, CutMessage(e.Message))
	}
}

// CutMessage bounds a message to MaxEndingMessage bytes, not cutting a
// UTF-8 sequence, and marks a cut one with "…".
func CutMessage(m string) string {
	if len(m) <= MaxEndingMessage {
		return m
	}
	n := MaxEndingMessage - len("…")
	for n > 0 && m[n]&0xC0 == 0x80 {
		n--
	}
	return m[:n] + "…"
}

// DecodeEndings reads an endings resource; a point without pid, session or
// time, or that is neither a log record nor an exit, is skipped and counted.
func DecodeEndings(rm pmetric.ResourceMetrics) (h HostEndings, tmID int64, skipped int, err error) {
	attrs := rm.Resource().Attributes()
	if h.Host, tmID, err = hostOf(attrs, "endings"); err != nil {
		return h, 0, 1, err
	}
	if v, ok := attrs.Get(pipeline.AttrLogReadThrough); ok && v.Type() == pcommon.ValueTypeInt {
		h.LogReadThrough = v.Int()
	}
	pipeline.EachPoint(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
		if m.Name() != pipeline.MetricBackendEnding {
			return
		}
		e, ok := decodeEnding(dp)
		if !ok {
			skipped++
			if err == nil {
				err = fmt.Errorf("ending on %s without an int %s and %s, a timestamp, and a log record's or an exit's attributes",
					h.Host, pipeline.AttrProcessPID, pipeline.AttrSessionID)
			}
			return
		}
		h.Endings = append(h.Endings, e)
	})
	return h, tmID, skipped, err
}

func decodeEnding(dp pmetric.NumberDataPoint) (Ending, bool) {
	a := dp.Attributes()
	intOf := func(k string) (int64, bool) {
		v, ok := a.Get(k)
		if !ok || v.Type() != pcommon.ValueTypeInt {
			return 0, false
		}
		return v.Int(), true
	}
	strOf := func(k string) (string, bool) {
		v, ok := a.Get(k)
		if !ok || v.Type() != pcommon.ValueTypeStr {
			return "", false
		}
		return v.Str(), true
	}
	pid, ok1 := intOf(pipeline.AttrProcessPID)
	sess, ok2 := intOf(pipeline.AttrSessionID)
	if !ok1 || !ok2 || dp.Timestamp() == 0 {
		return Ending{}, false
	}
	e := Ending{PID: pid, Session: sess, Time: int64(dp.Timestamp()), SessionStart: int64(dp.StartTimestamp())} // #nosec G115 -- ns since 1970
	e.CommandCount, _ = intOf(pipeline.AttrQueryCommandCount)
	if code, ok := intOf(pipeline.AttrProcessExitCode); ok {
		e.Exited, e.ExitCode = true, code
		return e, true
	}
	if sig, ok := intOf(pipeline.AttrProcessExitSignal); ok && sig > 0 {
		e.Exited, e.Signal = true, sig
		return e, true
	}
	sev, ok3 := strOf(pipeline.AttrLogSeverity)
	state, ok4 := strOf(pipeline.AttrSQLState)
	msg, ok5 := strOf(pipeline.AttrLogMessage)
	if !ok3 || !ok4 || !ok5 {
		return Ending{}, false
	}
	e.Severity, e.SQLState, e.Message = sev, state, CutMessage(msg)
	return e, true
}

// hostOf reads the host and tm_id every per-host resource must name.
func hostOf(attrs pcommon.Map, resource string) (host string, tmID int64, err error) {
	h, ok := attrs.Get(pipeline.AttrHostName)
	tm, tmOK := attrs.Get(pipeline.AttrTmID)
	if !ok || !tmOK || tm.Type() != pcommon.ValueTypeInt {
		return "", 0, fmt.Errorf("%s resource lacks %s or an int %s", resource, pipeline.AttrHostName, pipeline.AttrTmID)
	}
	return h.Str(), tm.Int(), nil
}
