// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package view

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/output"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// QueryID is a query's key (docs/pipeline.md, query figures): the command
// count when the title gave one, else the start.
type QueryID struct {
	Session pipeline.SessionKey
	Ccnt    int64
	Start   int64 // unix ns; only when Ccnt is 0
}

// QueryRecord is one query resource of the newest snapshot, or a finished
// query's event as GetGPQuery answers it.
type QueryRecord struct {
	ID        QueryID
	Start     time.Time
	Completed bool
	Duration  float64            // s
	Text      string             // db.query.text, when the processor writes it
	Stat      *yagpcc.SystemStat // immutable once read: shared by every answer
	Segments  []*yagpcc.SegmentMetrics
	Spill     *pipeline.QuerySpill // nil: no read saw it hold workfiles
	// A finished query's event also gives its exact End, how it ended and
	// whose it was (its session may be long gone).
	End     time.Time
	Status  yagpcc.QueryStatus
	Message string // the server's message of its failure, as yagpcc keeps it
	Owner   *QueryOwner
}

// QueryOwner is whose a finished query was, and who serves it.
type QueryOwner struct {
	ClusterID, Hostname, User, Database, Rsgname string
}

// NewQueryRecord is a query resource's record.
func NewQueryRecord(q output.QueryOutput) *QueryRecord {
	r := &QueryRecord{ID: QueryID{Session: q.Session, Ccnt: q.CommandCount}, Start: q.Start, Completed: q.Completed,
		Duration: q.Duration, Text: q.Text, Stat: q.Stat, Segments: q.Segments, Spill: q.Spill}
	if q.CommandCount == 0 {
		r.ID.Start = q.Start.UnixNano()
	}
	return r
}

func (q *QueryRecord) key() *yagpcc.QueryKey {
	return &yagpcc.QueryKey{
		Tmid: int32(q.ID.Session.TmID), Ssid: int32(q.ID.Session.ID), // #nosec G115 -- yagpcc's field widths
		Ccnt: int32(q.ID.Ccnt), QueryStart: timestamppb.New(q.Start), // #nosec G115 -- a command count
	}
}

// attachQueries gives each session its running query's key and figures:
// the newest query of the session that has not completed.
func attachQueries(sessions []*Session, queries []*QueryRecord) map[QueryID]*QueryRecord {
	byID := make(map[QueryID]*QueryRecord, len(queries))
	running := map[pipeline.SessionKey]*QueryRecord{}
	for _, q := range queries {
		byID[q.ID] = q
		if q.ID.Ccnt != 0 {
			// gpotel's query_start key (field 1001) names it too, as on a server without counts.
			byID[QueryID{Session: q.ID.Session, Start: q.Start.UnixNano()}] = q
		}
		if r := running[q.ID.Session]; !q.Completed && (r == nil || q.Start.After(r.Start)) {
			running[q.ID.Session] = q
		}
	}
	for _, s := range sessions {
		q := running[s.Key]
		if q == nil || !s.Running {
			continue
		}
		s.Query = q
		s.State.RunningQuery = q.key()
		s.State.QueryMetrics = q.metrics()
	}
	return byID
}

// metrics is the query's GPMetrics. Its spill is the most the query held
// at once (yagpcc's totals are over the query's life; gpotel sees the
// workfiles held at each read, not the bytes ever written).
func (q *QueryRecord) metrics() *yagpcc.GPMetrics {
	m := &yagpcc.GPMetrics{SystemStat: q.Stat}
	if sp := q.Spill; sp != nil {
		m.Spill = SpillInfo(sp.MaxBytes, sp.MaxFiles)
	}
	return m
}

// TotalQueryData is GetGPQuery's answer for one query; s is its live
// session, nil without one.
func (q *QueryRecord) TotalQueryData(s *Session, collect time.Time) *yagpcc.TotalQueryData {
	status := yagpcc.QueryStatus_QUERY_STATUS_START
	var end *timestamppb.Timestamp
	if q.Completed {
		status = yagpcc.QueryStatus_QUERY_STATUS_DONE
		end = timestamppb.New(q.Start.Add(time.Duration(q.Duration * float64(time.Second))))
	}
	if !q.End.IsZero() {
		end = timestamppb.New(q.End)
	}
	if q.Status != yagpcc.QueryStatus_QUERY_STATUS_UNSPECIFIED {
		status = q.Status
	}
	info := &yagpcc.QueryInfo{QueryText: q.Text, StartTime: timestamppb.New(q.Start), EndTime: end}
	stat := &yagpcc.QueryStat{
		CollectTime: timestamppb.New(collect),
		QueryKey:    q.key(),
		QueryInfo:   info,
		StatKind:    yagpcc.StatKind_SK_PRECISE,
		QueryStatus: status,
		StartTime:   info.StartTime,
		EndTime:     end,
		Completed:   q.Completed,
		Message:     q.Message,
	}
	stat.TotalQueryMetrics = q.metrics()
	if o := q.Owner; o != nil {
		stat.ClusterId, stat.Hostname = o.ClusterID, o.Hostname
		info.UserName, info.DatabaseName, info.Rsgname = o.User, o.Database, o.Rsgname
	}
	if s != nil {
		st := s.State
		stat.ClusterId, stat.Hostname = st.GetClusterId(), st.GetHostname()
		info.UserName, info.DatabaseName = st.GetSessionInfo().GetUser(), st.GetSessionInfo().GetDatabase()
		info.Rsgname = st.GetSessionInfo().GetRsgname()
		if info.QueryText == "" && s.Running && s.Query == q {
			info.QueryText = st.GetRunningQueryInfo().GetQueryText()
		}
		if !q.Completed {
			stat.SessionState = st.GetSessionInfo().GetState()
		}
	}
	out := &yagpcc.TotalQueryData{QueryStat: stat}
	for _, sm := range q.Segments {
		seg := &yagpcc.SegmentMetrics{
			ClusterId: stat.ClusterId, Hostname: sm.Hostname, CollectTime: stat.CollectTime,
			SegmentKey: sm.SegmentKey, QueryStatus: status, StartTime: stat.StartTime, EndTime: end,
			SegmentMetrics: sm.SegmentMetrics, QueryKey: stat.QueryKey,
		}
		out.SegmentQueryMetrics = append(out.SegmentQueryMetrics, seg)
	}
	return out
}

// KeyString names a query key in an answer.
func KeyString(k *yagpcc.QueryKey) string {
	return fmt.Sprintf("{ssid %d, tmid %d, ccnt %d, query_start %s}",
		k.GetSsid(), k.GetTmid(), k.GetCcnt(), k.GetQueryStart().AsTime().Format(time.RFC3339Nano))
}
