// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpinfo

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/paging"
	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/view"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// sessionFilter is a request's selection. Different filter fields combine
// with AND; several values of one field combine with OR; matching is exact.
type sessionFilter struct {
	values map[yagpcc.SessionFilterEnum]map[string]struct{}
	ids    map[yagpcc.SessionFilterEnum]map[int64]struct{}

	showSystem  bool
	hideEmpty   bool
	runningOnly bool
	liveOnly    bool
}

func parseFilters(filters []*yagpcc.SessionFilter) (*sessionFilter, error) {
	if len(filters) > paging.MaxFilterValues {
		return nil, fmt.Errorf("filter: %d values, at most %d filter values are accepted", len(filters), paging.MaxFilterValues)
	}
	f := &sessionFilter{
		values: map[yagpcc.SessionFilterEnum]map[string]struct{}{},
		ids:    map[yagpcc.SessionFilterEnum]map[int64]struct{}{},
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
			addTo(f.values, field, sf.GetValue())
		case yagpcc.SessionFilterEnum_SESSION_FILTER_SESS_ID,
			yagpcc.SessionFilterEnum_SESSION_FILTER_TM_ID:
			n, err := strconv.ParseInt(strings.TrimSpace(sf.GetValue()), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("filter[%d]: %s needs an integer, got %q", i, field, sf.GetValue())
			}
			addTo(f.ids, field, n)
		default:
			return nil, fmt.Errorf("filter[%d]: unknown filter field %s", i, field)
		}
	}
	return f, nil
}

func addTo[V comparable](sets map[yagpcc.SessionFilterEnum]map[V]struct{}, field yagpcc.SessionFilterEnum, v V) {
	if sets[field] == nil {
		sets[field] = map[V]struct{}{}
	}
	sets[field][v] = struct{}{}
}

// writeCanonical spells the filter independent of value order, for page tokens.
func (f *sessionFilter) writeCanonical(w io.Writer) {
	for _, field := range slices.Sorted(maps.Keys(f.values)) {
		_, _ = fmt.Fprintf(w, "%d=", field)
		for _, v := range slices.Sorted(maps.Keys(f.values[field])) {
			_, _ = fmt.Fprintf(w, "%d:%s,", len(v), v)
		}
		_, _ = io.WriteString(w, ";")
	}
	for _, field := range slices.Sorted(maps.Keys(f.ids)) {
		_, _ = fmt.Fprintf(w, "%d=%v;", field, slices.Sorted(maps.Keys(f.ids[field])))
	}
	_, _ = fmt.Fprintf(w, "|sys=%t|hide=%t|run=%t|live=%t", f.showSystem, f.hideEmpty, f.runningOnly, f.liveOnly)
}

func (f *sessionFilter) match(v *view.View, s *view.Session) bool {
	if s.System && !f.showSystem {
		return false
	}
	if f.runningOnly && !s.Running {
		return false
	}
	if f.liveOnly && !v.Live(s) {
		return false
	}
	if f.hideEmpty && s.State.GetRunningQueryInfo().GetQueryText() == "" {
		return false
	}
	in := s.State.GetSessionInfo()
	for field, vs := range f.values {
		var have string
		switch field {
		case yagpcc.SessionFilterEnum_SESSION_FILTER_HOST:
			have = s.State.GetHostname()
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
		if _, ok := vs[have]; !ok {
			return false
		}
	}
	for field, ids := range f.ids {
		have := s.Key.ID
		if field == yagpcc.SessionFilterEnum_SESSION_FILTER_TM_ID {
			have = s.Key.TmID
		}
		if _, ok := ids[have]; !ok {
			return false
		}
	}
	return true
}
