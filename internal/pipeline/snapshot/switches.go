// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshot

import (
	"go.opentelemetry.io/collector/filter"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Switches are the receiver user's metrics and resource_attributes
// settings (mdatagen's MetricsBuilderConfig), by name; what is not listed
// is on, with its data-point attributes. The encoders honour them as
// mdatagen's builder does.
type Switches struct {
	Metrics  map[string]MetricSwitch
	Resource map[string]ResourceSwitch
}

// MetricSwitch is one metric's settings.
type MetricSwitch struct {
	Off bool
	// AttributesOff are its data-point attributes switched off: points that
	// then have the same attributes are merged by Aggregation.
	AttributesOff []string
	Aggregation   string // sum, avg, min or max
}

// ResourceSwitch is one resource attribute's settings.
type ResourceSwitch struct {
	Off bool
	// Include and Exclude drop a whole resource whose attribute matches
	// (metrics_include must match, metrics_exclude must not); nil: none.
	Include, Exclude filter.Filter
}

// How points merged after an attribute was switched off combine, as
// mdatagen names them.
const (
	AggregationSum = "sum"
	AggregationAvg = "avg"
	AggregationMin = "min"
	AggregationMax = "max"
)

func (s *Switches) metric(name string) MetricSwitch { return s.Metrics[name] }

func (s *Switches) attributeOn(metric, attr string) bool {
	for _, a := range s.Metrics[metric].AttributesOff {
		if a == attr {
			return false
		}
	}
	return true
}

func (s *Switches) resourceOn(attr string) bool { return !s.Resource[attr].Off }

// keeps applies the resource attribute filters as the builder does: an
// attribute that is present must match its include filter and must not
// match its exclude filter.
func (s *Switches) keeps(attrs pcommon.Map) bool {
	for key, rs := range s.Resource {
		if rs.Include == nil && rs.Exclude == nil {
			continue
		}
		v, ok := attrs.Get(key)
		if !ok {
			continue
		}
		if rs.Include != nil && !rs.Include.Matches(v.AsString()) {
			return false
		}
		if rs.Exclude != nil && rs.Exclude.Matches(v.AsString()) {
			return false
		}
	}
	return true
}
