package sessionstateexporter

import (
	"cmp"
	"math"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/internal/gpsemconv"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// queryID is a query's key (docs/pipeline.md, query figures): the command
// count when the title gave one, else the start.
type queryID struct {
	session sessionKey
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
	stat      *yagpcc.SystemStat // immutable once parsed: shared by every answer
	segments  []*yagpcc.SegmentMetrics
}

func (q *queryRecord) key() *yagpcc.QueryKey {
	return &yagpcc.QueryKey{
		Tmid: int32(q.id.session.tmID), Ssid: int32(q.id.session.sessID), // #nosec G115 -- yagpcc's field widths
		Ccnt: int32(q.id.ccnt), QueryStart: timestamppb.New(q.start), // #nosec G115 -- a command count
	}
}

// parseQuery reads one query resource; ok is false without its identity.
func parseQuery(rm pmetric.ResourceMetrics) (*queryRecord, bool) {
	attrs := rm.Resource().Attributes()
	sessID, okS := intAttr(attrs, gpsemconv.AttrSessionID)
	tmID, okT := intAttr(attrs, gpsemconv.AttrTmID)
	start, err := time.Parse(time.RFC3339Nano, strAttr(attrs, gpsemconv.AttrQueryStart))
	if !okS || !okT || err != nil {
		return nil, false
	}
	q := &queryRecord{start: start.UTC(), text: strAttr(attrs, gpsemconv.AttrDBQueryText), stat: &yagpcc.SystemStat{}}
	q.id.session = sessionKey{tmID: tmID, sessID: sessID}
	if ccnt, ok := intAttr(attrs, gpsemconv.AttrQueryCommandCount); ok && ccnt > 0 {
		q.id.ccnt = ccnt
	} else {
		q.id.start = start.UnixNano()
	}
	segs := map[int64]*yagpcc.SegmentMetrics{}
	segment := func(a pcommon.Map) *yagpcc.SystemStat {
		content, ok := intAttr(a, gpsemconv.AttrSegmentID)
		if !ok || content < math.MinInt32 || content > math.MaxInt32 {
			return nil
		}
		sm := segs[content]
		if sm == nil {
			sm = &yagpcc.SegmentMetrics{
				Hostname:       strAttr(a, gpsemconv.AttrHostName),
				SegmentKey:     &yagpcc.SegmentKey{Segindex: int32(content)},
				SegmentMetrics: &yagpcc.GPMetrics{SystemStat: &yagpcc.SystemStat{}},
			}
			segs[content] = sm
		}
		return sm.SegmentMetrics.SystemStat
	}
	sms := rm.ScopeMetrics()
	for i := 0; i < sms.Len(); i++ {
		ms := sms.At(i).Metrics()
		for j := 0; j < ms.Len(); j++ {
			m := ms.At(j)
			pts := numberPoints(m)
			for k := 0; k < pts.Len(); k++ {
				dp := pts.At(k)
				switch m.Name() {
				case gpsemconv.MetricQueryDuration:
					q.duration = pointFloat(dp)
				case gpsemconv.MetricQueryCompleted:
					q.completed = pointFloat(dp) != 0
				case gpsemconv.MetricQuerySegmentCPUTime:
					if st := segment(dp.Attributes()); st != nil {
						st.RunningTimeSeconds = pointFloat(dp)
					}
				case gpsemconv.MetricQuerySegmentDiskIO:
					if st := segment(dp.Attributes()); st != nil {
						setDirection(dp.Attributes(), pointUint(dp), &st.ReadBytes, &st.WriteBytes)
					}
				default:
					if name, ok := gpsemconv.SessionMetricOfQuery(m.Name()); ok {
						setSystemStat(q.stat, name, dp.Attributes(), dp)
					}
				}
			}
		}
	}
	finishStat(q.stat)
	for _, sm := range segs {
		q.segments = append(q.segments, sm)
	}
	slices.SortFunc(q.segments, func(a, b *yagpcc.SegmentMetrics) int {
		return cmp.Compare(a.GetSegmentKey().GetSegindex(), b.GetSegmentKey().GetSegindex())
	})
	return q, true
}

// attachQueries gives each session its running query's key and figures:
// the newest query of the session that has not completed.
func attachQueries(sessions []*session, queries []*queryRecord) map[queryID]*queryRecord {
	byID := make(map[queryID]*queryRecord, len(queries))
	running := map[sessionKey]*queryRecord{}
	for _, q := range queries {
		byID[q.id] = q
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
		s.state.QueryMetrics = &yagpcc.GPMetrics{SystemStat: q.stat}
	}
	return byID
}

// totalQueryData is GetGPQuery's answer for one query.
func (q *queryRecord) totalQueryData(s *session, collect time.Time) *yagpcc.TotalQueryData {
	status := yagpcc.QueryStatus_QUERY_STATUS_START
	var end *timestamppb.Timestamp
	if q.completed {
		status = yagpcc.QueryStatus_QUERY_STATUS_DONE
		end = timestamppb.New(q.start.Add(time.Duration(q.duration * float64(time.Second))))
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
	}
	stat.TotalQueryMetrics = &yagpcc.GPMetrics{SystemStat: q.stat}
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
