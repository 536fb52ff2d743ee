// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipelinetest

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// AppendQueryEvent writes q as one log record of lrs: event name, the
// end as its time, every field of pipeline.QueryEventFields it has.
func AppendQueryEvent(lrs plog.LogRecordSlice, q *pipeline.FinishedQuery, observed pcommon.Timestamp) {
	rms := pmetric.NewResourceMetricsSlice()
	pipeline.AppendFinishedQuery(rms, q)
	pipeline.AppendEventOf(lrs, rms.At(0).Resource(), observed)
}

// AppendSessionEvent writes s as one log record of lrs.
func AppendSessionEvent(lrs plog.LogRecordSlice, s *pipeline.EndedSession, observed pcommon.Timestamp) {
	rms := pmetric.NewResourceMetricsSlice()
	pipeline.AppendEndedSession(rms, s)
	pipeline.AppendEventOf(lrs, rms.At(0).Resource(), observed)
}

// DecodeQueryEvent reads a query event's attributes back (a finished_query
// resource's, or a log record's); an error names the first field that is
// required and missing or of another type.
func DecodeQueryEvent(attrs pcommon.Map) (pipeline.FinishedQuery, error) {
	var q pipeline.FinishedQuery
	err := decodeEvent(attrs, pipeline.QueryEventFields, &q.Totals, &q.Known, &q.Session, &q.Who, func(f pipeline.EventField, v any) {
		switch f.Key {
		case pipeline.AttrQueryStart:
			q.Start = v.(time.Time).UnixNano()
		case pipeline.AttrQueryCommandCount:
			q.CommandCount = v.(int64)
		case pipeline.AttrEventQueryEnd:
			q.End = v.(time.Time).UnixNano()
		case pipeline.AttrEventQueryStatus:
			q.Status = v.(string)
		case pipeline.AttrSQLState:
			q.SQLState = v.(string)
		case pipeline.AttrEventErrorMessage:
			q.ErrorMessage = v.(string)
		case pipeline.AttrEventCancelReason:
			q.CancelReason = v.(string)
		case pipeline.AttrEventEndedByRule:
			q.EndedByRule = v.(string)
		case pipeline.AttrEventPartial:
			q.Partial = v.(bool)
		case pipeline.AttrDBQueryText:
			text := v.(string)
			q.Text = &text
		case pipeline.AttrEventSegments:
			q.Segments = v.([]pipeline.SegmentUse)
		case pipeline.AttrEventSpillMax, pipeline.AttrEventSpillFilesMax:
			if q.Spill == nil {
				q.Spill = &pipeline.QuerySpill{}
			}
			if f.Key == pipeline.AttrEventSpillMax {
				q.Spill.MaxBytes = v.(int64)
			} else {
				q.Spill.MaxFiles = v.(int64)
			}
		case pipeline.AttrEventLockWait:
			q.LockWait = fromSeconds(v.(float64))
		case pipeline.AttrEventLockBlocker:
			q.LockBlocker = v.(int64)
		case pipeline.AttrEventVmemPeak:
			q.VmemPeak = v.(int64)
		case pipeline.AttrEventPartialReason, pipeline.AttrEventPartialHosts, pipeline.AttrEventPartialSince:
			readPartialCause(f.Key, v, &q.PartialCause)
		default:
			readSkew(f.Key, v, &q.Skew)
		}
	})
	return q, err
}

// DecodeSessionEvent reads a session event's attributes back.
func DecodeSessionEvent(attrs pcommon.Map) (pipeline.EndedSession, error) {
	var s pipeline.EndedSession
	err := decodeEvent(attrs, pipeline.SessionEventFields, &s.Totals, &s.Known, &s.Session, &s.Who, func(f pipeline.EventField, v any) {
		switch f.Key {
		case pipeline.AttrEventSessionStart:
			s.Start = v.(time.Time).UnixNano()
		case pipeline.AttrEventSessionEnd:
			s.End = v.(time.Time).UnixNano()
		case pipeline.AttrEventSessionEndReason:
			s.EndReason = v.(string)
		case pipeline.AttrSQLState:
			s.SQLState = v.(string)
		case pipeline.AttrEventErrorMessage:
			s.Message = v.(string)
		case pipeline.AttrEventPartial:
			s.Partial = v.(bool)
		case pipeline.AttrEventSessionQueries:
			s.Queries = v.(int64)
		case pipeline.AttrEventMemoryPeak:
			s.MemoryPeak = v.(int64)
		case pipeline.AttrEventSpillMax:
			s.SpillMax = v.(int64)
		case pipeline.AttrEventLockWait:
			s.LockWait = fromSeconds(v.(float64))
		case pipeline.AttrEventVmemPeak:
			s.VmemPeak = v.(int64)
		case pipeline.AttrEventPartialReason, pipeline.AttrEventPartialHosts, pipeline.AttrEventPartialSince:
			readPartialCause(f.Key, v, &s.PartialCause)
		}
	})
	return s, err
}

// readPartialCause reads one of the partial cause's fields back.
func readPartialCause(key string, v any, c *pipeline.PartialCause) {
	switch key {
	case pipeline.AttrEventPartialReason:
		c.StartedBefore = slices.Contains(strings.Split(v.(string), ","), pipeline.PartialStartedBefore)
	case pipeline.AttrEventPartialHosts:
		for _, h := range strings.Split(v.(string), ",") {
			if n, ok := strings.CutPrefix(h, "+"); ok {
				c.MoreHosts, _ = strconv.Atoi(n)
			} else {
				c.Hosts = append(c.Hosts, h)
			}
		}
	case pipeline.AttrEventPartialSince:
		c.Since = v.(time.Time).UnixNano()
	}
}

// decodeEvent reads every field present, the counters into totals and
// known, the session's key and who it was into session and who, the rest
// through set; a required field missing is an error.
func decodeEvent(attrs pcommon.Map, fields []pipeline.EventField, totals *pipeline.Counters, known *uint32,
	session *pipeline.SessionKey, who *pipeline.SessionWho, set func(pipeline.EventField, any),
) error {
	for _, f := range fields {
		v, ok := pipeline.EventValue(attrs, f)
		switch {
		case !ok && !f.Optional:
			return fmt.Errorf("event field %s is missing or not a %s", f.Key, f.Type)
		case !ok:
			continue
		}
		if c, isCounter := f.Counter(); isCounter {
			if f.Type == pipeline.EventDouble {
				totals[c] = fromSeconds(v.(float64))
			} else {
				totals[c] = v.(int64)
			}
			*known |= 1 << c
			continue
		}
		if !decodeWho(f.Key, v, session, who) {
			set(f, v)
		}
	}
	return nil
}

// decodeWho sets the identity and who fields; false for any other key.
func decodeWho(key string, v any, session *pipeline.SessionKey, w *pipeline.SessionWho) bool {
	switch key {
	case pipeline.AttrTmID:
		session.TmID = v.(int64)
	case pipeline.AttrSessionID:
		session.ID = v.(int64)
	case pipeline.AttrDBNamespace:
		w.Database = v.(string)
	case pipeline.AttrSessionUser:
		w.User = v.(string)
	case pipeline.AttrEventApplication:
		w.Application = pipeline.Null[string]{V: v.(string), Valid: true}
	case pipeline.AttrEventClientAddress:
		w.ClientAddress = pipeline.Null[string]{V: v.(string), Valid: true}
	case pipeline.AttrEventClientPort:
		w.ClientPort = pipeline.Null[int64]{V: v.(int64), Valid: true}
	case pipeline.AttrEventResourceGroup:
		w.ResourceGroup = pipeline.Null[string]{V: v.(string), Valid: true}
	default:
		return false
	}
	return true
}

// readSkew sets one skew field; a skew with any field present is OK.
func readSkew(key string, v any, p *pipeline.SkewPair) {
	sk, rest := &p.CPU, ""
	if r, ok := strings.CutPrefix(key, pipeline.AttrEventSkewCPUPrefix); ok {
		rest = r
	} else if r, ok := strings.CutPrefix(key, pipeline.AttrEventSkewIOPrefix); ok {
		sk, rest = &p.IO, r
	} else {
		return
	}
	sk.OK = true
	switch rest {
	case "ratio":
		sk.Ratio = v.(float64)
	case "max_over_avg":
		sk.MaxOverAvg = v.(float64)
	case "hottest_segment":
		sk.Hottest = int32(max(min(v.(int64), math.MaxInt32), math.MinInt32))
	case "segments":
		sk.Segments = int(max(v.(int64), 0))
	}
}

// fromSeconds is seconds as integer ns, saturating.
func fromSeconds(s float64) int64 {
	ns := math.Round(s * 1e9)
	switch {
	case ns >= math.MaxInt64:
		return math.MaxInt64
	case ns <= math.MinInt64:
		return math.MinInt64
	}
	return int64(ns)
}
