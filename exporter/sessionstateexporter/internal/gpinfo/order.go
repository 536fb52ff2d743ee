// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpinfo

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/paging"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/view"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

type sortField struct {
	kind paging.Kind
	get  func(*view.Session) paging.Value
}

func infoOf(s *view.Session) *yagpcc.SessionInfo { return s.State.GetSessionInfo() }

// Kinds by how SessionInfo values read.
func infoString(f func(*yagpcc.SessionInfo) string) sortField {
	return sortField{paging.KindString, func(s *view.Session) paging.Value { return paging.Str(f(infoOf(s))) }}
}

func infoInt(f func(*yagpcc.SessionInfo) int64) sortField {
	return sortField{paging.KindInt, func(s *view.Session) paging.Value { return paging.Num(f(infoOf(s))) }}
}

func infoTime(f func(*yagpcc.SessionInfo) *timestamppb.Timestamp) sortField {
	return sortField{paging.KindPair, func(s *view.Session) paging.Value { return paging.Stamp(f(infoOf(s))) }}
}

func queryString(f func(*yagpcc.QueryInfo) string) sortField {
	return sortField{paging.KindString, func(s *view.Session) paging.Value {
		if q := s.State.GetRunningQueryInfo(); q != nil {
			return paging.Str(f(q))
		}
		return paging.Value{}
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
	return sortField{paging.KindFloat, func(s *view.Session) paging.Value {
		if st := of(s.State); st != nil {
			return paging.Float(f(st))
		}
		return paging.Value{}
	}}
}

func statUint(of statOf, f func(*yagpcc.SystemStat) uint64) sortField {
	return sortField{paging.KindUint, func(s *view.Session) paging.Value {
		if st := of(s.State); st != nil {
			return paging.Unsigned(f(st))
		}
		return paging.Value{}
	}}
}

// sortFields lists every SessionField the exporter can fill. Any other value
// is answered with InvalidArgument.
var sortFields = func() map[yagpcc.SessionField]sortField {
	m := map[yagpcc.SessionField]sortField{
		yagpcc.SessionField_SESSION_FIELD_KEY: {paging.KindPair, func(s *view.Session) paging.Value {
			return paging.Value{Present: true, I: s.Key.TmID, I2: s.Key.ID}
		}},
		yagpcc.SessionField_SESSION_FIELD_HOST: {paging.KindString, func(s *view.Session) paging.Value { return paging.Str(s.State.GetHostname()) }},
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
		yagpcc.SessionField_SESSION_FIELD_WAITING: {paging.KindInt, func(s *view.Session) paging.Value {
			return paging.Bool(infoOf(s).GetWaiting())
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
		m[field[0]] = sortField{paging.KindInt, func(s *view.Session) paging.Value { return paging.Num(of(s.State).GetSpill().GetTotalBytes()) }}
		m[field[1]] = sortField{paging.KindInt, func(s *view.Session) paging.Value { return paging.Num(int64(of(s.State).GetSpill().GetFileCount())) }}
	}
	return m
}()

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
	s    *view.Session
	vals []paging.Value
}

// compare orders two positions (sort values + key) in the spec's order.
func (spec sortSpec) compare(avals []paging.Value, akey pipeline.SessionKey, bvals []paging.Value, bkey pipeline.SessionKey) int {
	for i, k := range spec {
		c := paging.Compare(k.def.kind, &avals[i], &bvals[i])
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
	return n * (int(unsafe.Sizeof(orderEntry{})) + len(spec)*int(unsafe.Sizeof(paging.Value{})))
}

// ordersKey keys a view's orderCache.
type ordersKey struct{}

// ordersOf is v's orderCache.
func ordersOf(v *view.View) *orderCache {
	return v.Derived(ordersKey{}, func() any { return &orderCache{} }).(*orderCache)
}

// orderOf is v's sessions in the order of spec, sorted once per view.
func orderOf(v *view.View, spec sortSpec) []orderEntry {
	name := spec.String()
	c := ordersOf(v)
	c.mu.Lock()
	o, ok := c.orders[name]
	if !ok {
		o = &sortedOrder{spec: spec}
		if size := orderBytes(len(v.Sessions), spec); c.bytes+size <= maxOrderCacheBytes {
			if c.orders == nil {
				c.orders = map[string]*sortedOrder{}
			}
			c.orders[name] = o
			c.bytes += size
		}
	}
	if len(c.recent) == 0 || c.recent[0].String() != name {
		c.recent = append([]sortSpec{spec}, slices.DeleteFunc(c.recent, func(r sortSpec) bool { return r.String() == name })...)
		c.recent = c.recent[:min(len(c.recent), maxPrebuiltOrders)]
	}
	c.mu.Unlock()
	o.once.Do(func() { o.entries = buildOrder(v.Sessions, o.spec) })
	return o.entries
}

// PrebuildOrders sorts next in the orders most recently asked of prev: the
// session store calls it before next is served.
func PrebuildOrders(prev, next *view.View) {
	c := ordersOf(prev)
	c.mu.Lock()
	specs := slices.Clone(c.recent)
	c.mu.Unlock()
	for i := len(specs) - 1; i >= 0; i-- {
		orderOf(next, specs[i])
	}
}

func buildOrder(sessions []*view.Session, spec sortSpec) []orderEntry {
	entries := make([]orderEntry, len(sessions))
	vals := make([]paging.Value, len(sessions)*len(spec))
	for i, s := range sessions {
		ev := vals[i*len(spec) : (i+1)*len(spec) : (i+1)*len(spec)]
		for j, k := range spec {
			ev[j] = k.def.get(s)
		}
		entries[i] = orderEntry{s: s, vals: ev}
	}
	if len(spec) > 0 {
		slices.SortFunc(entries, func(a, b orderEntry) int {
			return spec.compare(a.vals, a.s.Key, b.vals, b.s.Key)
		})
	}
	return entries
}
