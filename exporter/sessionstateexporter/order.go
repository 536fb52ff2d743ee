// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// valueKind says how a sort field's values compare.
type valueKind uint8

const (
	kindString valueKind = iota
	kindInt
	kindUint
	kindFloat
	kindPair // (seconds or tm_id, nanos or sess_id)
)

// sortValue is one session's value of one sort field. An absent value (no
// last_metrics, a NULL timestamp) sorts before every present one.
type sortValue struct {
	present bool
	s       string
	i, i2   int64
	u       uint64
	f       float64
}

type sortField struct {
	kind valueKind
	get  func(*session) sortValue
}

func str(v string) sortValue      { return sortValue{present: true, s: v} }
func num(v int64) sortValue       { return sortValue{present: true, i: v} }
func unsigned(v uint64) sortValue { return sortValue{present: true, u: v} }
func float(v float64) sortValue   { return sortValue{present: true, f: v} }
func boolean(v bool) sortValue {
	if v {
		return num(1)
	}
	return num(0)
}
func stamp(t *timestamppb.Timestamp) sortValue {
	if t == nil {
		return sortValue{}
	}
	return sortValue{present: true, i: t.GetSeconds(), i2: int64(t.GetNanos())}
}

func infoOf(s *session) *yagpcc.SessionInfo { return s.state.GetSessionInfo() }

// Kinds by how SessionInfo values read.
func infoString(f func(*yagpcc.SessionInfo) string) sortField {
	return sortField{kindString, func(s *session) sortValue { return str(f(infoOf(s))) }}
}

func infoInt(f func(*yagpcc.SessionInfo) int64) sortField {
	return sortField{kindInt, func(s *session) sortValue { return num(f(infoOf(s))) }}
}

func infoTime(f func(*yagpcc.SessionInfo) *timestamppb.Timestamp) sortField {
	return sortField{kindPair, func(s *session) sortValue { return stamp(f(infoOf(s))) }}
}

func queryString(f func(*yagpcc.QueryInfo) string) sortField {
	return sortField{kindString, func(s *session) sortValue {
		if q := s.state.GetRunningQueryInfo(); q != nil {
			return str(f(q))
		}
		return sortValue{}
	}}
}

// statOf picks last_metrics or total_metrics.
type statOf func(*yagpcc.SessionState) *yagpcc.SystemStat

func lastStat(st *yagpcc.SessionState) *yagpcc.SystemStat {
	return st.GetLastMetrics().GetSystemStat()
}

func totalStat(st *yagpcc.SessionState) *yagpcc.SystemStat {
	return st.GetTotalMetrics().GetSystemStat()
}

func statFloat(of statOf, f func(*yagpcc.SystemStat) float64) sortField {
	return sortField{kindFloat, func(s *session) sortValue {
		if st := of(s.state); st != nil {
			return float(f(st))
		}
		return sortValue{}
	}}
}

func statUint(of statOf, f func(*yagpcc.SystemStat) uint64) sortField {
	return sortField{kindUint, func(s *session) sortValue {
		if st := of(s.state); st != nil {
			return unsigned(f(st))
		}
		return sortValue{}
	}}
}

// sortFields lists every SessionField the exporter can fill. Any other value
// is answered with InvalidArgument.
var sortFields = func() map[yagpcc.SessionField]sortField {
	m := map[yagpcc.SessionField]sortField{
		yagpcc.SessionField_SESSION_FIELD_KEY: {kindPair, func(s *session) sortValue {
			return sortValue{present: true, i: s.key.TmID, i2: s.key.ID}
		}},
		yagpcc.SessionField_SESSION_FIELD_HOST: {kindString, func(s *session) sortValue { return str(s.state.GetHostname()) }},
		yagpcc.SessionField_SESSION_FIELD_PID:  infoInt((*yagpcc.SessionInfo).GetPid),

		yagpcc.SessionField_SESSION_FIELD_DATABASE:         infoString((*yagpcc.SessionInfo).GetDatabase),
		yagpcc.SessionField_SESSION_FIELD_USER:             infoString((*yagpcc.SessionInfo).GetUser),
		yagpcc.SessionField_SESSION_FIELD_APPLICATION_NAME: infoString((*yagpcc.SessionInfo).GetApplicationName),
		yagpcc.SessionField_SESSION_FIELD_CLIENT_ADDR:      infoString((*yagpcc.SessionInfo).GetClientAddr),
		yagpcc.SessionField_SESSION_FIELD_CLIENT_HOSTNAME:  infoString((*yagpcc.SessionInfo).GetClientHostname),
		yagpcc.SessionField_SESSION_FIELD_CLIENT_PORT:      infoInt((*yagpcc.SessionInfo).GetClientPort),
		yagpcc.SessionField_SESSION_FIELD_BACKEND_START:    infoTime((*yagpcc.SessionInfo).GetBackendStart),
		yagpcc.SessionField_SESSION_FIELD_XACT_START:       infoTime((*yagpcc.SessionInfo).GetXactStart),
		yagpcc.SessionField_SESSION_FIELD_QUERY_START:      infoTime((*yagpcc.SessionInfo).GetQueryStart),
		yagpcc.SessionField_SESSION_FIELD_STATE_CHANGE:     infoTime((*yagpcc.SessionInfo).GetStateChange),
		yagpcc.SessionField_SESSION_FIELD_WAITING_REASON:   infoString((*yagpcc.SessionInfo).GetWaitingReason),
		yagpcc.SessionField_SESSION_FIELD_WAITING: {kindInt, func(s *session) sortValue {
			return boolean(infoOf(s).GetWaiting())
		}},
		yagpcc.SessionField_SESSION_FIELD_STATE:            infoString((*yagpcc.SessionInfo).GetState),
		yagpcc.SessionField_SESSION_FIELD_BACKEND_XID:      infoString((*yagpcc.SessionInfo).GetBackendXid),
		yagpcc.SessionField_SESSION_FIELD_BACKEND_XMIN:     infoString((*yagpcc.SessionInfo).GetBackendXmin),
		yagpcc.SessionField_SESSION_FIELD_RSGID:            infoInt((*yagpcc.SessionInfo).GetRsgid),
		yagpcc.SessionField_SESSION_FIELD_RSGNAME:          infoString((*yagpcc.SessionInfo).GetRsgname),
		yagpcc.SessionField_SESSION_FIELD_RSGQUEUEDURATION: infoString((*yagpcc.SessionInfo).GetRsgqueueduration),

		yagpcc.SessionField_QUERY_QUERY_TEXT:   queryString((*yagpcc.QueryInfo).GetQueryText),
		yagpcc.SessionField_QUERY_USERNAME:     queryString((*yagpcc.QueryInfo).GetUserName),
		yagpcc.SessionField_QUERY_DATABASENAME: queryString((*yagpcc.QueryInfo).GetDatabaseName),
		yagpcc.SessionField_QUERY_RSGNAME:      queryString((*yagpcc.QueryInfo).GetRsgname),
	}
	// Every SystemStat field a figure fills is sortable where the enum has
	// TOTAL_ and LAST_ values named after it; runningTimeSeconds is no figure.
	for prefix, of := range map[string]statOf{"TOTAL_": totalStat, "LAST_": lastStat} {
		if v, ok := yagpcc.SessionField_value[prefix+"RUNNINGTIMESECONDS"]; ok {
			m[yagpcc.SessionField(v)] = statFloat(of, (*yagpcc.SystemStat).GetRunningTimeSeconds)
		}
		for _, f := range pipeline.StatFields() {
			v, ok := yagpcc.SessionField_value[prefix+strings.ToUpper(f.Name)]
			switch {
			case !ok:
			case f.IsSeconds():
				m[yagpcc.SessionField(v)] = statFloat(of, f.Seconds)
			default:
				m[yagpcc.SessionField(v)] = statUint(of, f.Count)
			}
		}
	}
	// Greenplum's own figures: the lock's holder, and the workfiles held
	// now (a gauge: last and total carry the same; none held is 0).
	m[yagpcc.SessionField_SESSION_FIELD_BLOCKED_BY] = infoInt((*yagpcc.SessionInfo).GetBlockedBySessId)
	for field, of := range map[[2]yagpcc.SessionField]func(*yagpcc.SessionState) *yagpcc.GPMetrics{
		{yagpcc.SessionField_LAST_SPILL_TOTALBYTES, yagpcc.SessionField_LAST_SPILL_FILECOUNT}:   (*yagpcc.SessionState).GetLastMetrics,
		{yagpcc.SessionField_TOTAL_SPILL_TOTALBYTES, yagpcc.SessionField_TOTAL_SPILL_FILECOUNT}: (*yagpcc.SessionState).GetTotalMetrics,
	} {
		m[field[0]] = sortField{kindInt, func(s *session) sortValue { return num(of(s.state).GetSpill().GetTotalBytes()) }}
		m[field[1]] = sortField{kindInt, func(s *session) sortValue { return num(int64(of(s.state).GetSpill().GetFileCount())) }}
	}
	return m
}()

func compareValues(kind valueKind, a, b *sortValue) int {
	if a.present != b.present {
		if a.present {
			return 1
		}
		return -1
	}
	switch kind {
	case kindString:
		return strings.Compare(a.s, b.s)
	case kindInt:
		return cmp.Compare(a.i, b.i)
	case kindUint:
		return cmp.Compare(a.u, b.u)
	case kindFloat:
		// cmp.Compare orders NaN first: a total order, as paging needs.
		return cmp.Compare(a.f, b.f)
	default:
		if c := cmp.Compare(a.i, b.i); c != 0 {
			return c
		}
		return cmp.Compare(a.i2, b.i2)
	}
}

// sortKey is one requested sort field with its direction.
type sortKey struct {
	field yagpcc.SessionField
	def   sortField
	desc  bool
}

// sortSpec is the requested order; the session key always breaks ties, ascending.
type sortSpec []sortKey

// maxSortFields bounds a request's sort fields: every cached order holds a
// value per session and field.
const maxSortFields = 8

func parseSortSpec(fields []*yagpcc.SessionFieldWrapper) (sortSpec, error) {
	if len(fields) > maxSortFields {
		return nil, fmt.Errorf("field: %d sort fields, at most %d sort fields are accepted", len(fields), maxSortFields)
	}
	spec := make(sortSpec, 0, len(fields))
	for i, w := range fields {
		def, ok := sortFields[w.GetFieldName()]
		if !ok {
			return nil, fmt.Errorf("field[%d]: cannot sort by %s: gpotel does not fill it", i, fieldName(w.GetFieldName()))
		}
		if j := slices.IndexFunc(spec, func(k sortKey) bool { return k.field == w.GetFieldName() }); j >= 0 {
			return nil, fmt.Errorf("field[%d]: %s repeats field[%d]: each sort field may appear once", i, fieldName(w.GetFieldName()), j)
		}
		var desc bool
		switch w.GetOrder() {
		case yagpcc.SortOrder_SORT_ORDER_UNSPECIFIED, yagpcc.SortOrder_SORT_ASC:
		case yagpcc.SortOrder_SORT_DESC:
			desc = true
		default:
			return nil, fmt.Errorf("field[%d]: unknown sort order %d", i, w.GetOrder())
		}
		spec = append(spec, sortKey{field: w.GetFieldName(), def: def, desc: desc})
	}
	return spec, nil
}

func fieldName(f yagpcc.SessionField) string {
	if n, ok := yagpcc.SessionField_name[int32(f)]; ok {
		return n
	}
	return "SessionField(" + strconv.Itoa(int(f)) + ")"
}

func (spec sortSpec) String() string {
	var b strings.Builder
	for _, k := range spec {
		b.WriteString(strconv.Itoa(int(k.field)))
		if k.desc {
			b.WriteString("d")
		}
		b.WriteString(",")
	}
	return b.String()
}

// orderEntry is a session at its place in one sort order.
type orderEntry struct {
	s    *session
	vals []sortValue
}

// compare orders two positions (sort values + key) in the spec's order.
func (spec sortSpec) compare(avals []sortValue, akey pipeline.SessionKey, bvals []sortValue, bkey pipeline.SessionKey) int {
	for i, k := range spec {
		c := compareValues(k.def.kind, &avals[i], &bvals[i])
		if k.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return akey.Compare(bkey)
}

// sortedOrder is a view's sessions in one sort order, built once per view.
type sortedOrder struct {
	once    sync.Once
	spec    sortSpec
	entries []orderEntry
}

// orderCache keeps the sort orders clients ask for, up to
// maxOrderCacheBytes; a view lives one snapshot, so the cache empties itself
// at every snapshot.
type orderCache struct {
	mu     sync.Mutex
	orders map[string]*sortedOrder
	bytes  int
	// recent lists the orders asked, most recently asked first.
	recent []sortSpec
}

const (
	// maxOrderCacheBytes bounds the sort orders one view keeps; an order
	// beyond it is built for its request alone.
	maxOrderCacheBytes = 64 << 20
	// The next view sorts this many of the last view's orders up front, so
	// clients that poll with the same order never wait for a sort.
	maxPrebuiltOrders = 8
)

// orderBytes is what an order of spec over n sessions holds.
func orderBytes(n int, spec sortSpec) int {
	return n * (int(unsafe.Sizeof(orderEntry{})) + len(spec)*int(unsafe.Sizeof(sortValue{})))
}

func (v *view) order(spec sortSpec) []orderEntry {
	name := spec.String()
	v.orders.mu.Lock()
	o, ok := v.orders.orders[name]
	if !ok {
		o = &sortedOrder{spec: spec}
		if size := orderBytes(len(v.sessions), spec); v.orders.bytes+size <= maxOrderCacheBytes {
			if v.orders.orders == nil {
				v.orders.orders = map[string]*sortedOrder{}
			}
			v.orders.orders[name] = o
			v.orders.bytes += size
		}
	}
	if len(v.orders.recent) == 0 || v.orders.recent[0].String() != name {
		v.orders.recent = append([]sortSpec{spec}, slices.DeleteFunc(v.orders.recent, func(r sortSpec) bool { return r.String() == name })...)
		v.orders.recent = v.orders.recent[:min(len(v.orders.recent), maxPrebuiltOrders)]
	}
	v.orders.mu.Unlock()
	o.once.Do(func() { o.entries = buildOrder(v.sessions, o.spec) })
	return o.entries
}

// prebuildOrders sorts v in the orders most recently asked of prev.
func (v *view) prebuildOrders(prev *view) {
	prev.orders.mu.Lock()
	specs := slices.Clone(prev.orders.recent)
	prev.orders.mu.Unlock()
	for i := len(specs) - 1; i >= 0; i-- {
		v.order(specs[i])
	}
}

func buildOrder(sessions []*session, spec sortSpec) []orderEntry {
	entries := make([]orderEntry, len(sessions))
	vals := make([]sortValue, len(sessions)*len(spec))
	for i, s := range sessions {
		ev := vals[i*len(spec) : (i+1)*len(spec) : (i+1)*len(spec)]
		for j, k := range spec {
			ev[j] = k.def.get(s)
		}
		entries[i] = orderEntry{s: s, vals: ev}
	}
	if len(spec) > 0 {
		slices.SortFunc(entries, func(a, b orderEntry) int {
			return spec.compare(a.vals, a.s.key, b.vals, b.s.key)
		})
	}
	return entries
}
