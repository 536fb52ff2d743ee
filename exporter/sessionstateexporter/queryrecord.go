// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/output"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// queryID is a query's key (docs/pipeline.md, query figures): the command
// count when the title gave one, else the start.
type queryID struct {
	session pipeline.SessionKey
	ccnt    int64
	start   int64 // unix ns; only when ccnt is 0
}

// queryRecord is one query resource of the newest snapshot.
type queryRecord struct {
	id        queryID
	start     time.Time
	completed bool
	duration  float64            // s
	text      string             // db.query.text, when the processor writes it
	stat      *yagpcc.SystemStat // immutable once read: shared by every answer
	segments  []*yagpcc.SegmentMetrics
	spill     *pipeline.QuerySpill // nil: no read saw it hold workfiles
	// A finished query's event also gives its exact end, how it ended and
	// whose it was (its session may be long gone).
	end     time.Time
	status  yagpcc.QueryStatus
	message string // the server's message of its failure, as yagpcc keeps it
	owner   *queryOwner
}

// queryOwner is whose a finished query was, and who serves it.
type queryOwner struct {
	clusterID, hostname, user, database, rsgname string
}

func newQueryRecord(q output.QueryOutput) *queryRecord {
	r := &queryRecord{id: queryID{session: q.Session, ccnt: q.CommandCount}, start: q.Start, completed: q.Completed,
		duration: q.Duration, text: q.Text, stat: q.Stat, segments: q.Segments, spill: q.Spill}
	if q.CommandCount == 0 {
		r.id.start = q.Start.UnixNano()
	}
	return r
}

func (q *queryRecord) key() *yagpcc.QueryKey {
	return &yagpcc.QueryKey{
		Tmid: int32(q.id.session.TmID), Ssid: int32(q.id.session.ID), // #nosec G115 -- yagpcc's field widths
		Ccnt: int32(q.id.ccnt), QueryStart: timestamppb.New(q.start), // #nosec G115 -- a command count
	}
}

// attachQueries gives each session its running query's key and figures:
// the newest query of the session that has not completed.
func attachQueries(sessions []*session, queries []*queryRecord) map[queryID]*queryRecord {
	byID := make(map[queryID]*queryRecord, len(queries))
	running := map[pipeline.SessionKey]*queryRecord{}
	for _, q := range queries {
		byID[q.id] = q
		if q.id.ccnt != 0 {
			// gpotel's query_start key (field 1001) names it too, as on a server without counts.
			byID[queryID{session: q.id.session, start: q.start.UnixNano()}] = q
		}
		if r := running[q.id.session]; !q.completed && (r == nil || q.start.After(r.start)) {
			running[q.id.session] = q
		}
	}
	for _, s := range sessions {
		q := running[s.key]
		if q == nil || !s.running {
			continue
		}
		s.query = q
		s.state.RunningQuery = q.key()
		s.state.QueryMetrics = q.metrics()
	}
	return byID
}

// metrics is the query's GPMetrics. Its spill is the most the query held
// at once (yagpcc's totals are over the query's life; gpotel sees the
// workfiles held at each read, not the bytes ever written).
func (q *queryRecord) metrics() *yagpcc.GPMetrics {
	m := &yagpcc.GPMetrics{SystemStat: q.stat}
	if sp := q.spill; sp != nil {
		m.Spill = spillInfo(sp.MaxBytes, sp.MaxFiles)
	}
	return m
}

// totalQueryData is GetGPQuery's answer for one query.
func (q *queryRecord) totalQueryData(s *session, collect time.Time) *yagpcc.TotalQueryData {
	status := yagpcc.QueryStatus_QUERY_STATUS_START
	var end *timestamppb.Timestamp
	if q.completed {
		status = yagpcc.QueryStatus_QUERY_STATUS_DONE
		end = timestamppb.New(q.start.Add(time.Duration(q.duration * float64(time.Second))))
	}
	if !q.end.IsZero() {
		end = timestamppb.New(q.end)
	}
	if q.status != yagpcc.QueryStatus_QUERY_STATUS_UNSPECIFIED {
		status = q.status
	}
	info := &yagpcc.QueryInfo{QueryText: q.text, StartTime: timestamppb.New(q.start), EndTime: end}
	stat := &yagpcc.QueryStat{
		CollectTime: timestamppb.New(collect),
		QueryKey:    q.key(),
		QueryInfo:   info,
		StatKind:    yagpcc.StatKind_SK_PRECISE,
		QueryStatus: status,
		StartTime:   info.StartTime,
		EndTime:     end,
		Completed:   q.completed,
		Message:     q.message,
	}
	stat.TotalQueryMetrics = q.metrics()
	if o := q.owner; o != nil {
		stat.ClusterId, stat.Hostname = o.clusterID, o.hostname
		info.UserName, info.DatabaseName, info.Rsgname = o.user, o.database, o.rsgname
	}
	if s != nil {
		st := s.state
		stat.ClusterId, stat.Hostname = st.GetClusterId(), st.GetHostname()
		info.UserName, info.DatabaseName = st.GetSessionInfo().GetUser(), st.GetSessionInfo().GetDatabase()
		info.Rsgname = st.GetSessionInfo().GetRsgname()
		if info.QueryText == "" && s.running && s.query == q {
			info.QueryText = st.GetRunningQueryInfo().GetQueryText()
		}
		if !q.completed {
			stat.SessionState = st.GetSessionInfo().GetState()
		}
	}
	out := &yagpcc.TotalQueryData{QueryStat: stat}
	for _, sm := range q.segments {
		seg := &yagpcc.SegmentMetrics{
			ClusterId: stat.ClusterId, Hostname: sm.Hostname, CollectTime: stat.CollectTime,
			SegmentKey: sm.SegmentKey, QueryStatus: status, StartTime: stat.StartTime, EndTime: end,
			SegmentMetrics: sm.SegmentMetrics, QueryKey: stat.QueryKey,
		}
		out.SegmentQueryMetrics = append(out.SegmentQueryMetrics, seg)
	}
	return out
}
