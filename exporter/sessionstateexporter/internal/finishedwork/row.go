// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package finishedwork

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unique"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/paging"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/view"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// eventLayout is how rows keep the fields of one event table
// (pipeline.QueryEventFields or SessionEventFields): every field read with
// the contract's reader, numbers in one slice, strings interned, the query
// text and the per-segment figures apart. Nothing here names a figure: a
// field added to the table is kept, served and sortable as it is.
type eventLayout struct {
	kind   pipeline.ResourceKind
	fields []events.Field
	// slot is each field's index in eventRow.nums or eventRow.strs.
	slot       []int
	nums, strs int
	byKey      map[string]int
	// The fields read by meaning: the key (identity, in table order), the
	// end, whose it was; -1 where the table has none.
	identity                                       []int
	tmID, sessID, start, ccnt, end, user, database int
	text, cpuUser, cpuSystem                       int
	// columns are the sortable fields by their item field's name.
	columns map[string]sortColumn
	// message makes the item; item holds its field of each event field
	// (nil: none of the same kind; a test keeps them in step).
	message func() protoreflect.Message
	item    []protoreflect.FieldDescriptor
	cpuTime protoreflect.FieldDescriptor
}

// cpuTimeColumn is the one item field that is no event field: user +
// system CPU, the figure a DBA sorts by first.
const cpuTimeColumn = "cpu_time"

var (
	queryLayout = newEventLayout(pipeline.KindFinishedQuery, events.QueryEventFields, pipeline.AttrQueryStart,
		events.AttrQueryEnd, func() protoreflect.Message { return (&gpotelv1.FinishedQuery{}).ProtoReflect() })
	sessionLayout = newEventLayout(pipeline.KindEndedSession, events.SessionEventFields, events.AttrSessionStart,
		events.AttrSessionEnd, func() protoreflect.Message { return (&gpotelv1.EndedSession{}).ProtoReflect() })
)

func newEventLayout(kind pipeline.ResourceKind, fields []events.Field, startKey, endKey string,
	message func() protoreflect.Message) *eventLayout {
	if len(fields) > len(eventRow{}.present)*64 {
		panic(fmt.Sprintf("sessionstate: %d event fields, a row marks at most %d", len(fields), len(eventRow{}.present)*64))
	}
	l := &eventLayout{kind: kind, fields: fields, slot: make([]int, len(fields)), byKey: map[string]int{},
		columns: map[string]sortColumn{}, message: message, item: make([]protoreflect.FieldDescriptor, len(fields))}
	for i, f := range fields {
		l.byKey[f.Key] = i
		switch {
		case f.Type == events.EventSegments || f.Key == pipeline.AttrDBQueryText:
			l.slot[i] = -1
		case f.Type == events.EventString:
			l.slot[i], l.strs = l.strs, l.strs+1
		default:
			l.slot[i], l.nums = l.nums, l.nums+1
		}
		if f.Identity {
			l.identity = append(l.identity, i)
		}
		if c, ok := f.Counter(); ok && c == pipeline.CPUUser {
			l.cpuUser = i
		} else if ok && c == pipeline.CPUSystem {
			l.cpuSystem = i
		}
	}
	at := func(key string) int {
		if i, ok := l.byKey[key]; ok {
			return i
		}
		return -1
	}
	l.tmID, l.sessID, l.start, l.ccnt, l.end = at(pipeline.AttrTmID), at(pipeline.AttrSessionID), at(startKey),
		at(pipeline.AttrQueryCommandCount), at(endKey)
	l.user, l.database, l.text = at(pipeline.AttrSessionUser), at(pipeline.AttrDBNamespace), at(pipeline.AttrDBQueryText)

	desc := message().Descriptor()
	for i, f := range fields {
		if fd := desc.Fields().ByName(protoreflect.Name(f.Column)); fd != nil && itemKindMatches(f, fd) {
			l.item[i] = fd
		}
		if f.Type != events.EventSegments {
			l.columns[f.Column] = fieldColumn(i, f)
		}
	}
	if fd := desc.Fields().ByName(cpuTimeColumn); fd != nil && fd.Kind() == protoreflect.DoubleKind {
		l.cpuTime = fd
	}
	l.columns[cpuTimeColumn] = sortColumn{paging.KindFloat, func(r *eventRow) paging.Value {
		if cpu, ok := r.cpuTime(); ok {
			return paging.Float(cpu)
		}
		return paging.Value{}
	}}
	return l
}

// itemKindMatches tells an item field that can hold an event field's values.
func itemKindMatches(f events.Field, fd protoreflect.FieldDescriptor) bool {
	scalar := func(k protoreflect.Kind) bool {
		return fd.Kind() == k && !fd.IsList() && !fd.IsMap() && fd.HasPresence() == f.Optional
	}
	switch f.Type {
	case events.EventInt:
		return scalar(protoreflect.Int64Kind)
	case events.EventDouble:
		return scalar(protoreflect.DoubleKind)
	case events.EventString:
		return scalar(protoreflect.StringKind)
	case events.EventBool:
		return scalar(protoreflect.BoolKind)
	case events.EventTime:
		return fd.Kind() == protoreflect.MessageKind && !fd.IsList() &&
			fd.Message().FullName() == (&timestamppb.Timestamp{}).ProtoReflect().Descriptor().FullName()
	case events.EventSegments:
		return fd.IsList() && fd.Message() != nil && fd.Message().FullName() == (&gpotelv1.SegmentUse{}).ProtoReflect().Descriptor().FullName()
	}
	return false
}

// eventRow is one finished query or ended session as the store keeps it:
// far smaller than the attribute map it came in (docs/performance.md).
// Immutable once stored: readers share it without locks.
type eventRow struct {
	layout  *eventLayout
	present [2]uint64 // bit i: field i has a value
	// nums holds ints, bools (0, 1), times (unix ns) and doubles (IEEE bits).
	nums []int64
	// strs are the few-valued strings (user, database, application,
	// client, resource group, status), interned.
	strs     []unique.Handle[string]
	text     string
	segments []segmentFigures
	// coordinator is the host name its answers report.
	coordinator unique.Handle[string]
}

// segmentAt is one segment instance; interned, as every event of a
// cluster names the same few.
type segmentAt struct {
	host    string
	segment int32
}

// segmentFigures is what a query's processes used on one segment instance.
type segmentFigures struct {
	at                 unique.Handle[segmentAt]
	cpu, read, written int64 // ns, bytes
}

// read keeps an event's attributes as a row; an error names a required
// field that is missing or of another type.
func (l *eventLayout) read(attrs pcommon.Map) (*eventRow, error) {
	r := &eventRow{layout: l, nums: make([]int64, l.nums), strs: make([]unique.Handle[string], l.strs)}
	for i, f := range l.fields {
		v, ok := events.Value(attrs, f)
		if !ok {
			if !f.Optional {
				return nil, fmt.Errorf("event field %s is missing or not a %s", f.Key, f.Type)
			}
			continue
		}
		r.present[i/64] |= 1 << (i % 64)
		switch x := v.(type) {
		case int64:
			r.nums[l.slot[i]] = x
		case float64:
			r.nums[l.slot[i]] = int64(math.Float64bits(x)) // #nosec G115 -- the bits, read back by double
		case bool:
			if x {
				r.nums[l.slot[i]] = 1
			}
		case time.Time:
			r.nums[l.slot[i]] = x.UnixNano()
		case string:
			if i == l.text {
				// A copy: the attribute's string may share a larger buffer.
				r.text = strings.Clone(x)
			} else {
				r.strs[l.slot[i]] = unique.Make(x)
			}
		case []pipeline.SegmentUse:
			r.segments = make([]segmentFigures, len(x))
			for j, u := range x {
				r.segments[j] = segmentFigures{at: unique.Make(segmentAt{u.Host, u.Segment}), cpu: u.CPU, read: u.Read, written: u.Written}
			}
		}
	}
	return r, nil
}

func (r *eventRow) has(i int) bool { return i >= 0 && r.present[i/64]&(1<<(i%64)) != 0 }

// num, double and str read field i; it must be present and of that kind.
func (r *eventRow) num(i int) int64      { return r.nums[r.layout.slot[i]] }
func (r *eventRow) double(i int) float64 { return math.Float64frombits(uint64(r.num(i))) } // #nosec G115 -- the bits stored by read
func (r *eventRow) str(i int) string {
	if i == r.layout.text {
		return r.text
	}
	return r.strs[r.layout.slot[i]].Value()
}

func (r *eventRow) end() int64 { return r.num(r.layout.end) }

func (r *eventRow) session() pipeline.SessionKey {
	return pipeline.SessionKey{TmID: r.num(r.layout.tmID), ID: r.num(r.layout.sessID)}
}

// queryID is a finished query's key, as GetGPQuery looks it up.
func (r *eventRow) queryID() view.QueryID {
	id := view.QueryID{Session: r.session(), Ccnt: r.num(r.layout.ccnt)}
	if id.Ccnt == 0 {
		id.Start = r.num(r.layout.start)
	}
	return id
}

// sessionEventID is an ended session's key: sess_id is reused (the
// leader's pid on PostgreSQL), its start tells the sessions apart.
type sessionEventID struct {
	session pipeline.SessionKey
	start   int64
}

func (r *eventRow) sessionEventID() sessionEventID {
	return sessionEventID{r.session(), r.num(r.layout.start)}
}

// cpuTime is user + system CPU in seconds; ok false when neither is known.
func (r *eventRow) cpuTime() (float64, bool) {
	l := r.layout
	var s float64
	for _, i := range []int{l.cpuUser, l.cpuSystem} {
		if r.has(i) {
			s += r.double(i)
		}
	}
	return s, r.has(l.cpuUser) || r.has(l.cpuSystem)
}

// rowQueueBytes is what the store holds per row beyond the row's own
// memory: its arrival queue slot and its key's index entry, at the
// occupancy a growing map and slice average (BenchmarkFinishedStore
// measures the whole).
const rowQueueBytes = 120

// bytes is what keeping r costs, as the store's byte budget counts it: its
// allocations, every string it names (interned ones counted in full, as if
// no other row shared them) and its share of the store's indexes.
func (r *eventRow) bytes() int {
	n := int(unsafe.Sizeof(*r)) + cap(r.nums)*int(unsafe.Sizeof(int64(0))) + cap(r.strs)*int(unsafe.Sizeof(unique.Handle[string]{})) +
		len(r.text) + cap(r.segments)*int(unsafe.Sizeof(segmentFigures{})) + rowQueueBytes
	n += handleLen(r.coordinator)
	for _, h := range r.strs {
		n += handleLen(h)
	}
	for _, s := range r.segments {
		n += len(s.at.Value().host)
	}
	return n
}

// handleLen is the length of an interned string; 0 for none.
func handleLen(h unique.Handle[string]) int {
	if h == (unique.Handle[string]{}) {
		return 0
	}
	return len(h.Value())
}

// message is the row as its gpotel.v1 item: every field of the event.
func (r *eventRow) message() protoreflect.Message {
	l := r.layout
	m := l.message()
	for i, f := range l.fields {
		fd := l.item[i]
		if fd == nil || !r.has(i) {
			continue
		}
		switch f.Type {
		case events.EventInt:
			m.Set(fd, protoreflect.ValueOfInt64(r.num(i)))
		case events.EventDouble:
			m.Set(fd, protoreflect.ValueOfFloat64(r.double(i)))
		case events.EventBool:
			m.Set(fd, protoreflect.ValueOfBool(r.num(i) != 0))
		case events.EventString:
			m.Set(fd, protoreflect.ValueOfString(r.str(i)))
		case events.EventTime:
			m.Set(fd, protoreflect.ValueOfMessage(timestamppb.New(time.Unix(0, r.num(i))).ProtoReflect()))
		case events.EventSegments:
			list := m.Mutable(fd).List()
			for _, s := range r.segments {
				at := s.at.Value()
				list.Append(protoreflect.ValueOfMessage((&gpotelv1.SegmentUse{Hostname: at.host, Segment: at.segment,
					CpuSeconds: float64(s.cpu) / 1e9, ReadBytes: s.read, WriteBytes: s.written}).ProtoReflect()))
			}
		}
	}
	if cpu, ok := r.cpuTime(); ok && l.cpuTime != nil {
		m.Set(l.cpuTime, protoreflect.ValueOfFloat64(cpu))
	}
	return m
}

// skewStat writes a query event's skew field into yagpcc's SystemStat
// (1063-1069) as DecodeQuery does a query resource's: skew_segments is
// the disk I/O skew's when both have one (written second there and here).
var skewStat = func() map[string]func(*yagpcc.SystemStat, *eventRow, int) {
	m := map[string]func(*yagpcc.SystemStat, *eventRow, int){}
	for prefix, fields := range map[string]struct {
		ratio, overAvg func(*yagpcc.SystemStat) *float64
		hottest        func(*yagpcc.SystemStat) **int32
	}{
		events.AttrSkewCPUPrefix: {func(st *yagpcc.SystemStat) *float64 { return &st.CpuSkew },
			func(st *yagpcc.SystemStat) *float64 { return &st.CpuMaxOverAvg }, func(st *yagpcc.SystemStat) **int32 { return &st.CpuHottestSegment }},
		events.AttrSkewIOPrefix: {func(st *yagpcc.SystemStat) *float64 { return &st.IoSkew },
			func(st *yagpcc.SystemStat) *float64 { return &st.IoMaxOverAvg }, func(st *yagpcc.SystemStat) **int32 { return &st.IoHottestSegment }},
	} {
		m[prefix+"ratio"] = func(st *yagpcc.SystemStat, r *eventRow, i int) { *fields.ratio(st) = r.double(i) }
		m[prefix+"max_over_avg"] = func(st *yagpcc.SystemStat, r *eventRow, i int) { *fields.overAvg(st) = r.double(i) }
		m[prefix+"hottest_segment"] = func(st *yagpcc.SystemStat, r *eventRow, i int) {
			if v := r.num(i); v >= math.MinInt32 && v <= math.MaxInt32 {
				seg := int32(v)
				*fields.hottest(st) = &seg
			}
		}
		m[prefix+"segments"] = func(st *yagpcc.SystemStat, r *eventRow, i int) {
			st.SkewSegments = uint32(min(max(r.num(i), 0), math.MaxUint32)) // #nosec G115 -- clamped
		}
	}
	return m
}()

// queryRecord is a finished query's row as GetGPQuery answers it, as the
// newest snapshot's query resource of it was answered while the processor
// still wrote one.
func (r *eventRow) queryRecord(clusterID string) *view.QueryRecord {
	l := r.layout
	at := func(key string) int { return l.byKey[key] }
	st := &yagpcc.SystemStat{}
	for i, f := range l.fields {
		if !r.has(i) {
			continue
		}
		if c, ok := f.Counter(); ok {
			if f.Type == events.EventDouble {
				pipeline.Figures[c].Stat.SetSeconds(st, r.double(i))
			} else {
				pipeline.Figures[c].Stat.SetCount(st, r.num(i))
			}
		} else if set := skewStat[f.Key]; set != nil {
			set(st, r, i)
		}
	}
	st.RunningTimeSeconds = st.UserTimeSeconds + st.KernelTimeSeconds
	st.Partial = r.num(at(events.AttrPartial)) != 0
	q := &view.QueryRecord{ID: r.queryID(), Start: time.Unix(0, r.num(l.start)).UTC(), Completed: true,
		Duration: r.double(at(events.AttrDuration)), Text: r.text, Stat: st,
		End: time.Unix(0, r.end()).UTC(), Status: yagpccStatus(r.str(at(events.AttrQueryStatus))),
		Owner: &view.QueryOwner{ClusterID: clusterID, Hostname: r.coordinator.Value(), User: r.str(l.user), Database: r.str(l.database)}}
	if i := at(events.AttrResourceGroup); r.has(i) {
		q.Owner.Rsgname = r.str(i)
	}
	if i := at(events.AttrErrorMessage); r.has(i) {
		q.Message = r.str(i)
	}
	if i, j := at(events.AttrSpillMax), at(events.AttrSpillFilesMax); r.has(i) || r.has(j) {
		q.Spill = &pipeline.QuerySpill{}
		if r.has(i) {
			q.Spill.MaxBytes = r.num(i)
		}
		if r.has(j) {
			q.Spill.MaxFiles = r.num(j)
		}
	}
	for _, s := range r.segments {
		at := s.at.Value()
		q.Segments = append(q.Segments, &yagpcc.SegmentMetrics{Hostname: at.host, SegmentKey: &yagpcc.SegmentKey{Segindex: at.segment},
			SegmentMetrics: &yagpcc.GPMetrics{SystemStat: &yagpcc.SystemStat{RunningTimeSeconds: float64(s.cpu) / 1e9,
				ReadBytes: uint64(max(s.read, 0)), WriteBytes: uint64(max(s.written, 0))}}}) // #nosec G115 -- not negative
	}
	slices.SortStableFunc(q.Segments, func(a, b *yagpcc.SegmentMetrics) int {
		return cmp.Compare(a.GetSegmentKey().GetSegindex(), b.GetSegmentKey().GetSegindex())
	})
	return q
}

// yagpccStatus is how yagpcc says a query ended (docs/pipeline.md, how it
// ended): completed is DONE, cancelled CANCELED; error, terminated,
// client_lost and aborted (failed or cancelled, no log to say which) are
// ERROR, as yagpcc's hooks see an aborted statement; unknown claims
// nothing beyond its end: END.
func yagpccStatus(status string) yagpcc.QueryStatus {
	switch status {
	case events.QueryCompleted:
		return yagpcc.QueryStatus_QUERY_STATUS_DONE
	case events.QueryCancelled:
		return yagpcc.QueryStatus_QUERY_STATUS_CANCELED
	case events.QueryError, events.QueryTerminated, events.QueryClientLost, events.QueryAborted:
		return yagpcc.QueryStatus_QUERY_STATUS_ERROR
	}
	return yagpcc.QueryStatus_QUERY_STATUS_END
}

func timeOf(unixNano int64) time.Time { return time.Unix(0, unixNano).UTC() }
