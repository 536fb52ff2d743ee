// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gpotel/gpotel/proto/yagpcc"
)

// Every row of the table is complete: a metric, an attribute value exactly
// when the metric has an attribute, a source, a unit that converts to the
// metric's type, and a SystemStat field for every counter.
func TestEveryFigureRowIsComplete(t *testing.T) {
	seen := map[string]bool{}
	for f := range NumFigures {
		row := &Figures[f]
		if row.Metric == nil {
			t.Fatalf("figure %d has no row", f)
		}
		name := row.Metric.Name + " " + row.Value
		if seen[name] {
			t.Errorf("%s is two rows", name)
		}
		seen[name] = true
		if (row.Value == "") != (row.Metric.Attr == "") {
			t.Errorf("%s: attribute value %q for attribute %q", name, row.Value, row.Metric.Attr)
		}
		if len(row.Live) == 0 {
			t.Errorf("%s has no agent field", name)
		}
		for _, src := range append(append([]Source[*yagpcc.GpPidProcInfo](nil), row.Live...), exitAsLive(row)...) {
			if src.Unit.IsTime() != row.Metric.Double {
				t.Errorf("%s: %s is in unit %d, the metric in %s", name, src.Field, src.Unit, row.Metric.Unit)
			}
		}
		if isCounter(f) != (row.Metric.Session != "") {
			t.Errorf("%s: a counter needs a session figure and only a counter has one", name)
		}
		if isCounter(f) && row.Stat.IsZero() {
			t.Errorf("%s: no SystemStat field", name)
		}
	}
}

// exitAsLive lists a row's exit sources as live ones, for their units.
func exitAsLive(row *FigureRow) []Source[*yagpcc.GpPidProcInfo] {
	var out []Source[*yagpcc.GpPidProcInfo]
	for _, s := range row.Exit {
		out = append(out, Source[*yagpcc.GpPidProcInfo]{Field: s.Field, Unit: s.Unit})
	}
	return out
}

// A StatField's name is the metrics.proto field its accessor fills.
func TestEveryStatFieldIsNamedAfterItsProtoField(t *testing.T) {
	fields := []StatField{}
	for f := range Figure(NumCounters) {
		fields = append(fields, Figures[f].Stat)
	}
	for _, mt := range MemoryTypes {
		fields = append(fields, mt.Cluster, mt.MaxHost)
	}
	for _, field := range fields {
		if field.IsZero() {
			continue
		}
		var st yagpcc.SystemStat
		switch {
		case field.seconds != nil:
			*field.seconds(&st) = 1
		case field.optional != nil:
			one := 1.0
			*field.optional(&st) = &one
		default:
			*field.count(&st) = 1
		}
		var set []string
		st.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
			set = append(set, string(fd.Name()))
			return true
		})
		if len(set) != 1 || set[0] != field.Name {
			t.Errorf("StatField %q fills %v", field.Name, set)
		}
	}
}

// isCounter tells the cumulative counters from the gauges.
func isCounter(f Figure) bool { return int(f) < NumCounters }

// An exit record with no user or system samples puts all its run time in
// user, as the kernel does.
func TestExitCPUWithoutSamplesIsAllUser(t *testing.T) {
	if u, s := adjustCPU(1e9, 0, 0); u != 1e9 || s != 0 {
		t.Errorf("no samples: %v/%v ns, want all user as the kernel does", u, s)
	}
}
