package sessionstateexporter

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpotel/gpotel/proto/yagpcc"
)

// sessionFilter is a request's selection. Different filter fields combine
// with AND; several values of one field combine with OR; matching is exact.
type sessionFilter struct {
	values map[yagpcc.SessionFilterEnum][]string
	ids    map[yagpcc.SessionFilterEnum][]int64

	showSystem  bool
	hideEmpty   bool
	runningOnly bool
	liveOnly    bool
}

func parseFilters(filters []*yagpcc.SessionFilter) (*sessionFilter, error) {
	f := &sessionFilter{
		values: map[yagpcc.SessionFilterEnum][]string{},
		ids:    map[yagpcc.SessionFilterEnum][]int64{},
	}
	for i, sf := range filters {
		field := sf.GetFieldName()
		switch field {
		case yagpcc.SessionFilterEnum_SESSION_FILTER_HOST,
			yagpcc.SessionFilterEnum_SESSION_FILTER_USER,
			yagpcc.SessionFilterEnum_SESSION_FILTER_DATABASE,
			yagpcc.SessionFilterEnum_SESSION_FILTER_APPLICATION_NAME,
			yagpcc.SessionFilterEnum_SESSION_FILTER_CLIENT_HOSTNAME,
			yagpcc.SessionFilterEnum_SESSION_FILTER_STATE,
			yagpcc.SessionFilterEnum_SESSION_FILTER_RSGNAME:
			f.values[field] = append(f.values[field], sf.GetValue())
		case yagpcc.SessionFilterEnum_SESSION_FILTER_SESS_ID,
			yagpcc.SessionFilterEnum_SESSION_FILTER_TM_ID:
			n, err := strconv.ParseInt(strings.TrimSpace(sf.GetValue()), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("filter[%d]: %s needs an integer, got %q", i, field, sf.GetValue())
			}
			f.ids[field] = append(f.ids[field], n)
		default:
			return nil, fmt.Errorf("filter[%d]: unknown filter field %s", i, field)
		}
	}
	return f, nil
}

// canonical spells the filter independent of value order, for page tokens.
func (f *sessionFilter) canonical() string {
	var parts []string
	for field, vs := range f.values {
		vs = slices.Clone(vs)
		slices.Sort(vs)
		parts = append(parts, fmt.Sprintf("%d=%q", field, vs))
	}
	for field, ids := range f.ids {
		ids = slices.Clone(ids)
		slices.Sort(ids)
		parts = append(parts, fmt.Sprintf("%d=%v", field, ids))
	}
	slices.Sort(parts)
	return fmt.Sprintf("%s|sys=%t|hide=%t|run=%t|live=%t", strings.Join(parts, ";"), f.showSystem, f.hideEmpty, f.runningOnly, f.liveOnly)
}

func (f *sessionFilter) match(v *view, s *session) bool {
	if s.system && !f.showSystem {
		return false
	}
	if f.runningOnly && !s.running {
		return false
	}
	if f.liveOnly && !v.live(s) {
		return false
	}
	if f.hideEmpty && s.state.GetRunningQueryInfo().GetQueryText() == "" {
		return false
	}
	in := s.state.GetSessionInfo()
	for field, vs := range f.values {
		var have string
		switch field {
		case yagpcc.SessionFilterEnum_SESSION_FILTER_HOST:
			have = s.state.GetHostname()
		case yagpcc.SessionFilterEnum_SESSION_FILTER_USER:
			have = in.GetUser()
		case yagpcc.SessionFilterEnum_SESSION_FILTER_DATABASE:
			have = in.GetDatabase()
		case yagpcc.SessionFilterEnum_SESSION_FILTER_APPLICATION_NAME:
			have = in.GetApplicationName()
		case yagpcc.SessionFilterEnum_SESSION_FILTER_CLIENT_HOSTNAME:
			have = in.GetClientHostname()
		case yagpcc.SessionFilterEnum_SESSION_FILTER_STATE:
			have = in.GetState()
		case yagpcc.SessionFilterEnum_SESSION_FILTER_RSGNAME:
			have = in.GetRsgname()
		}
		if !slices.Contains(vs, have) {
			return false
		}
	}
	for field, ids := range f.ids {
		have := s.key.sessID
		if field == yagpcc.SessionFilterEnum_SESSION_FILTER_TM_ID {
			have = s.key.tmID
		}
		if !slices.Contains(ids, have) {
			return false
		}
	}
	return true
}
