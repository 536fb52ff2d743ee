// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"go/format"
	"io/fs"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gpotel/gpotel/internal/kernelunits"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// The files figuregen writes, relative to the repository root.
const (
	docPath         = "docs/pipeline.md"
	metadataPath    = "receiver/gpsessionreceiver/metadata.yaml"
	statusLinesPath = "segmentagent/procfs/statuslines.go"
)

type output struct {
	path    string
	content []byte
}

// generate returns every file figuregen writes, as it would write it.
func generate(root string) ([]output, error) {
	files := os.DirFS(root)
	doc, err := fs.ReadFile(files, docPath)
	if err != nil {
		return nil, err
	}
	for name, block := range map[string]string{
		"process-metrics": processMetricTable(),
		"session-figures": sessionFigureTable(),
		"session-rates":   sessionRateTable(),
		"systemstat":      systemStatTable(),
	} {
		if doc, err = replaceBlock(doc, "<!-- ", name, block); err != nil {
			return nil, fmt.Errorf("%s: %w", docPath, err)
		}
	}
	metadata, err := fs.ReadFile(files, metadataPath)
	if err != nil {
		return nil, err
	}
	metrics, err := metadataMetrics()
	if err != nil {
		return nil, err
	}
	for _, section := range []struct{ name, body string }{
		{"resource_attributes", metadataResourceAttributes()},
		{"attributes", metadataAttributes()},
		{"metrics", metrics},
	} {
		if metadata, err = replaceSection(metadata, section.name, section.body); err != nil {
			return nil, fmt.Errorf("%s: %w", metadataPath, err)
		}
	}
	lines, err := statusLinesSource()
	if err != nil {
		return nil, err
	}
	return []output{{docPath, doc}, {metadataPath, metadata}, {statusLinesPath, lines}}, nil
}

// replaceBlock replaces the lines between a file's "BEGIN generated: name"
// and "END generated: name" comments with block.
func replaceBlock(file []byte, comment, name, block string) ([]byte, error) {
	lines := strings.SplitAfter(string(file), "\n")
	begin := slices.IndexFunc(lines, func(l string) bool {
		return strings.HasPrefix(strings.TrimSpace(l), comment+"BEGIN generated: "+name+" ")
	})
	if begin < 0 {
		return nil, fmt.Errorf("no %q comment", comment+"BEGIN generated: "+name)
	}
	end := slices.IndexFunc(lines[begin:], func(l string) bool {
		return strings.HasPrefix(strings.TrimSpace(l), comment+"END generated: "+name)
	})
	if end < 0 {
		return nil, fmt.Errorf("no %q comment", comment+"END generated: "+name)
	}
	out := slices.Concat(lines[:begin+1], []string{block}, lines[begin+end:])
	return []byte(strings.Join(out, "")), nil
}

func ticked(s string) string {
	if s == "" {
		return ""
	}
	return "`" + s + "`"
}

func row(cells ...string) string {
	for i, c := range cells {
		cells[i] = strings.ReplaceAll(c, "|", `\|`)
	}
	return "| " + strings.Join(cells, " | ") + " |\n"
}

func metricType(m *pipeline.ProcessMetric) string {
	value := "int"
	if m.Double {
		value = "double"
	}
	if m.Sum {
		return "sum, cumulative, monotonic, " + value
	}
	return "gauge " + value
}

// conversion says how a field's kernel unit becomes seconds or bytes.
var conversion = map[kernelunits.Unit]string{
	kernelunits.Ticks:        " ÷ clk_tck",
	kernelunits.Pages:        " × page_size",
	kernelunits.KiB:          " × 1024",
	kernelunits.Nanoseconds:  " ns ÷ 1e9",
	kernelunits.Microseconds: " µs ÷ 1e6",
}

// liveSources is where the agent reads a metric's figures, first present first.
func liveSources(m *pipeline.ProcessMetric) string {
	var parts []string
	for _, f := range m.Figures() {
		r := &pipeline.Figures[f]
		var fields []string
		for _, s := range r.Live {
			field := s.Field + conversion[s.Unit]
			if s.Delayacct {
				field += " (delay accounting on)"
			}
			fields = append(fields, field)
		}
		part := strings.Join(fields, ", else ")
		if r.Value != "" {
			part = ticked(r.Value) + ": " + part
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

func processMetricTable() string {
	var b strings.Builder
	b.WriteString(row("metric", "type", "unit", "data-point attributes (after `process.pid`)", "read from", "meaning"))
	b.WriteString(row("---", "---", "---", "---", "---", "---"))
	for _, m := range pipeline.ProcessMetrics {
		attrs := ticked(m.Attr)
		if m == pipeline.ProcessInfo {
			var names []string
			for _, a := range pipeline.ProcessInfoAttrs {
				names = append(names, ticked(a))
			}
			attrs = strings.Join(names, ", ")
		}
		b.WriteString(row(ticked(m.Name), metricType(m), ticked(m.Unit), attrs, liveSources(m), m.Description))
	}
	return b.String()
}

func sessionFigureTable() string {
	var b strings.Builder
	b.WriteString(row("metric", "unit", "data-point attributes", "from"))
	b.WriteString(row("---", "---", "---", "---"))
	for _, m := range pipeline.CounterMetrics {
		b.WriteString(row(ticked(m.Session), ticked(m.Unit), ticked(m.Attr), ticked(m.Name)))
	}
	return b.String()
}

func sessionRateTable() string {
	var b strings.Builder
	b.WriteString(row("metric", "unit", "data-point attributes"))
	b.WriteString(row("---", "---", "---"))
	for _, m := range pipeline.CounterMetrics {
		attrs := ticked(pipeline.AttrWindow)
		if m.Attr != "" {
			attrs += ", " + ticked(m.Attr)
		}
		b.WriteString(row(ticked(m.Session+pipeline.RateSuffix), ticked(m.Unit+"/s"), attrs))
	}
	return b.String()
}

func systemStatTable() string {
	var b strings.Builder
	b.WriteString(row("session figure", "attribute values", "`SystemStat` field"))
	b.WriteString(row("---", "---", "---"))
	for f := range pipeline.Figure(pipeline.NumCounters) {
		r := &pipeline.Figures[f]
		b.WriteString(row(ticked(r.Metric.Session), ticked(r.Value), ticked(r.Stat.Name)))
	}
	for _, mt := range pipeline.MemoryTypes {
		for _, agg := range []struct {
			name  string
			field pipeline.StatField
		}{{pipeline.MemoryAggregationCluster, mt.Cluster}, {pipeline.MemoryAggregationMaxHost, mt.MaxHost}} {
			if agg.field.IsZero() {
				continue
			}
			field := ticked(agg.field.Name)
			if agg.field.InKiB() {
				field += " (÷ 1024)"
			}
			b.WriteString(row(ticked(pipeline.MetricSessionMemoryUsage), ticked(mt.Name)+", "+ticked(agg.name), field))
		}
	}
	return b.String()
}

// attributeIDs maps each data-point attribute to its key in metadata.yaml.
func attributeIDs() map[string]string {
	ids := map[string]string{}
	for _, a := range slices.Concat(pipeline.FigureAttributes, pipeline.PointAttributes) {
		ids[a.Name] = a.ID
	}
	return ids
}

// replaceSection replaces the body of a top-level section of a YAML file
// (its indented lines after the key) with body.
func replaceSection(file []byte, section, body string) ([]byte, error) {
	lines := strings.SplitAfter(string(file), "\n")
	start := slices.Index(lines, section+":\n")
	if start < 0 {
		return nil, fmt.Errorf("no %s section", section)
	}
	end := start + 1
	for end < len(lines) && (lines[end] == "\n" || strings.HasPrefix(lines[end], " ")) {
		end++
	}
	out := slices.Concat(lines[:start+1], []string{body}, lines[end:])
	return []byte(strings.Join(out, "")), nil
}

// sortedEntries joins the entries in key order, as mdatagen wants them.
func sortedEntries(entries map[string]string) string {
	var b strings.Builder
	for _, key := range slices.Sorted(maps.Keys(entries)) {
		b.WriteString(entries[key])
	}
	return b.String()
}

// enumLine is an attribute's enum, when it has one.
func enumLine(values []string) string {
	if len(values) == 0 {
		return ""
	}
	return fmt.Sprintf("    enum: [%s]\n", strings.Join(values, ", "))
}

// figureValues are a figure attribute's values: its metrics' rows' Value column.
func figureValues(attr string) []string {
	var values []string
	for _, m := range pipeline.ProcessMetrics {
		if m.Attr != attr {
			continue
		}
		for _, f := range m.Figures() {
			if v := pipeline.Figures[f].Value; !slices.Contains(values, v) {
				values = append(values, v)
			}
		}
	}
	return values
}

func metadataAttributes() string {
	entries := map[string]string{}
	for _, a := range pipeline.FigureAttributes {
		a.Enum = figureValues(a.Name)
		entries[a.ID] = attributeEntry(a)
	}
	for _, a := range pipeline.PointAttributes {
		entries[a.ID] = attributeEntry(a)
	}
	return sortedEntries(entries)
}

func attributeEntry(a pipeline.Attribute) string {
	return fmt.Sprintf("  %s:\n    name_override: %s\n    description: %q\n    type: %s\n%s\n",
		a.ID, a.Name, a.Description, a.Type, enumLine(a.Enum))
}

func metadataResourceAttributes() string {
	entries := map[string]string{}
	for _, a := range pipeline.ResourceAttributes {
		entries[a.Name] = fmt.Sprintf("  %s:\n    description: %q\n    type: %s\n%s    enabled: true\n\n",
			a.Name, a.Description, a.Type, enumLine(a.Enum))
	}
	return sortedEntries(entries)
}

// metadataMetrics writes every metric of the receiver: the process
// metrics and the closing batch's.
func metadataMetrics() (string, error) {
	ids := attributeIDs()
	entries := map[string]string{}
	add := func(name, description, unit string, sum, double bool) error {
		var b strings.Builder
		fmt.Fprintf(&b, "  %s:\n    enabled: true\n    stability: development\n    description: %q\n    unit: %q\n", name, description, unit)
		value := "int"
		if double {
			value = "double"
		}
		if sum {
			fmt.Fprintf(&b, "    sum:\n      value_type: %s\n      monotonic: true\n      aggregation_temporality: cumulative\n", value)
		} else {
			fmt.Fprintf(&b, "    gauge:\n      value_type: %s\n", value)
		}
		var attrs []string
		for _, a := range pipeline.MetricAttributes(name) {
			id, ok := ids[a]
			if !ok {
				return fmt.Errorf("%s: its attribute %s is in neither pipeline.FigureAttributes nor pipeline.PointAttributes", name, a)
			}
			attrs = append(attrs, id)
		}
		if len(attrs) > 0 {
			fmt.Fprintf(&b, "    attributes: [%s]\n", strings.Join(attrs, ", "))
		}
		b.WriteString("\n")
		entries[name] = b.String()
		return nil
	}
	for _, m := range pipeline.ProcessMetrics {
		if err := add(m.Name, m.Description, m.Unit, m.Sum, m.Double); err != nil {
			return "", err
		}
	}
	for _, m := range pipeline.ClosingMetrics {
		if err := add(m.Name, m.Description, m.Unit, m.Sum, m.Double); err != nil {
			return "", err
		}
	}
	return sortedEntries(entries), nil
}

// statusLine is one optional kB line of /proc/<pid>/status the agent reports.
type statusLine struct {
	line    string // as the kernel prints it
	goField string // its yagpcc.ProcStatus field
	number  protoreflect.FieldNumber
}

// statusLines finds, for each optional field of yagpcc.ProcStatus, the
// status line it carries: the one a row of Figures reads from it (found by
// setting the field alone and asking each row's status sources), or one of
// pipeline.StatusLinesBesideFigures.
func statusLines() ([]statusLine, error) {
	goFields := map[string]string{}
	t := reflect.TypeFor[yagpcc.ProcStatus]()
	for i := range t.NumField() {
		for _, part := range strings.Split(t.Field(i).Tag.Get("protobuf"), ",") {
			if name, ok := strings.CutPrefix(part, "name="); ok {
				goFields[name] = t.Field(i).Name
			}
		}
	}
	beside := map[string]string{}
	for _, l := range pipeline.StatusLinesBesideFigures {
		beside[l.ProtoField] = l.Line
	}
	var out []statusLine
	fields := (&yagpcc.ProcStatus{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !fd.HasPresence() || fd.Kind() != protoreflect.Int64Kind {
			continue
		}
		marker := int64(fd.Number())<<20 + 7
		status := &yagpcc.ProcStatus{}
		status.ProtoReflect().Set(fd, protoreflect.ValueOfInt64(marker))
		info := &yagpcc.GpPidProcInfo{ProcStatus: status}
		line := beside[string(fd.Name())]
		for _, r := range pipeline.Figures {
			for _, s := range r.Live {
				name, ok := strings.CutPrefix(s.Field, "status ")
				if !ok || s.Unit != kernelunits.KiB {
					continue
				}
				if v, ok := s.Read(info); ok && v == marker {
					if line != "" && line != name {
						return nil, fmt.Errorf("ProcStatus.%s is read as status %s and %s", fd.Name(), line, name)
					}
					line = name
				}
			}
		}
		if line == "" {
			return nil, fmt.Errorf("ProcStatus.%s: no row of pipeline.Figures reads it and it is not in pipeline.StatusLinesBesideFigures", fd.Name())
		}
		out = append(out, statusLine{line, goFields[string(fd.Name())], fd.Number()})
	}
	return out, nil
}

func statusLinesSource() ([]byte, error) {
	lines, err := statusLines()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("// Code generated by internal/pipeline/figuregen from pipeline.Figures. DO NOT EDIT.\n\n")
	b.WriteString("package procfs\n\nimport \"github.com/gpotel/gpotel/proto/yagpcc\"\n\n")
	b.WriteString("// The optional kB lines of /proc/<pid>/status the agent reports, in the\n// order of their yagpcc.ProcStatus fields.\nconst (\n")
	for i, l := range lines {
		if i == 0 {
			fmt.Fprintf(&b, "\t%s StatusLine = iota\n", l.line)
		} else {
			fmt.Fprintf(&b, "\t%s\n", l.line)
		}
	}
	b.WriteString("\n\tnumStatusLines\n)\n\n")
	b.WriteString("// statusLineNames are the lines as the kernel prints them.\nvar statusLineNames = [numStatusLines]string{\n")
	for _, l := range lines {
		fmt.Fprintf(&b, "\t%s: %q,\n", l.line, l.line)
	}
	b.WriteString("}\n\n")
	b.WriteString("// setStatusLine points the line's yagpcc.ProcStatus field at v.\n" +
		"func setStatusLine(s *yagpcc.ProcStatus, l StatusLine, v *int64) {\n\tswitch l {\n")
	for _, l := range lines {
		fmt.Fprintf(&b, "\tcase %s:\n\t\ts.%s = v // field %d\n", l.line, l.goField, l.number)
	}
	b.WriteString("\t}\n}\n")
	return format.Source(b.Bytes())
}
