// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"go/format"
	"io/fs"
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
	ids, err := attributeIDs()
	if err != nil {
		return nil, err
	}
	for section, entries := range map[string]map[string]string{
		"attributes": metadataAttributes(),
		"metrics":    metadataMetrics(ids),
	} {
		if metadata, err = mergeSection(metadata, section, entries); err != nil {
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

// infoAttributes are gpotel.process.info's attributes, which describe a
// process rather than tell figures apart.
var infoAttributes = []struct{ name, id string }{
	{pipeline.AttrSegmentID, "segment_id"},
	{pipeline.AttrBackendType, "backend_type"},
	{pipeline.AttrProcessSystem, "process_system"},
	{pipeline.AttrProcessSparse, "process_sparse"},
}

func processMetricTable() string {
	var b strings.Builder
	b.WriteString(row("metric", "type", "unit", "data-point attributes (after `process.pid`)", "read from", "meaning"))
	b.WriteString(row("---", "---", "---", "---", "---", "---"))
	for _, m := range pipeline.ProcessMetrics {
		attrs := ticked(m.Attr)
		if m == pipeline.ProcessInfo {
			var names []string
			for _, a := range infoAttributes {
				names = append(names, ticked(a.name))
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

// attributeIDs maps a figure attribute to its name in metadata.yaml.
func attributeIDs() (map[string]string, error) {
	ids := map[string]string{}
	for _, a := range pipeline.FigureAttributes {
		ids[a.Name] = a.ID
	}
	for _, m := range pipeline.ProcessMetrics {
		if _, ok := ids[m.Attr]; m.Attr != "" && !ok {
			return nil, fmt.Errorf("%s: its attribute %s is not in pipeline.FigureAttributes", m.Name, m.Attr)
		}
	}
	return ids, nil
}

// generatedMark heads each metadata.yaml entry figuregen writes; mdatagen
// wants a section's keys sorted, so its entries stand among the written ones.
const generatedMark = "    # figuregen writes this entry from internal/pipeline.Figures (make generate)\n"

// mergeSection replaces a top-level section's generated entries (the ones
// with generatedMark, and any of the same keys) with entries, in key order.
func mergeSection(file []byte, section string, entries map[string]string) ([]byte, error) {
	lines := strings.SplitAfter(string(file), "\n")
	start := slices.Index(lines, section+":\n")
	if start < 0 {
		return nil, fmt.Errorf("no %s section", section)
	}
	end := start + 1
	for end < len(lines) && (lines[end] == "\n" || strings.HasPrefix(lines[end], " ")) {
		end++
	}
	type entry struct{ key, text string }
	var kept []entry
	for i := start + 1; i < end; {
		j := i + 1
		for j < end && !isEntryStart(lines[j]) {
			j++
		}
		text := strings.Join(lines[i:j], "")
		if key, ok := entryKey(lines[i]); ok {
			if _, owned := entries[key]; !owned && !strings.Contains(text, generatedMark) {
				kept = append(kept, entry{key, strings.TrimRight(text, "\n") + "\n\n"})
			}
		}
		i = j
	}
	for key, text := range entries {
		kept = append(kept, entry{key, text})
	}
	slices.SortFunc(kept, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	var body strings.Builder
	for _, e := range kept {
		body.WriteString(e.text)
	}
	out := slices.Concat(lines[:start+1], []string{body.String()}, lines[end:])
	return []byte(strings.Join(out, "")), nil
}

func isEntryStart(line string) bool {
	_, ok := entryKey(line)
	return ok
}

// entryKey reads "  key:" at the start of a section's entry.
func entryKey(line string) (string, bool) {
	rest, ok := strings.CutPrefix(line, "  ")
	if !ok || rest == "" || rest[0] == ' ' || rest[0] == '#' {
		return "", false
	}
	key, ok := strings.CutSuffix(strings.TrimRight(rest, "\n"), ":")
	return key, ok
}

func metadataAttributes() map[string]string {
	out := map[string]string{}
	for _, a := range pipeline.FigureAttributes {
		var values []string
		for _, m := range pipeline.ProcessMetrics {
			if m.Attr != a.Name {
				continue
			}
			for _, f := range m.Figures() {
				if v := pipeline.Figures[f].Value; !slices.Contains(values, v) {
					values = append(values, v)
				}
			}
		}
		out[a.ID] = fmt.Sprintf("  %s:\n%s    name_override: %s\n    description: %q\n    type: string\n    enum: [%s]\n\n",
			a.ID, generatedMark, a.Name, a.Description, strings.Join(values, ", "))
	}
	return out
}

func metadataMetrics(ids map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range pipeline.ProcessMetrics {
		var b strings.Builder
		fmt.Fprintf(&b, "  %s:\n%s    enabled: true\n    stability: development\n    description: %q\n    unit: %q\n", m.Name, generatedMark, m.Description, m.Unit)
		value := "int"
		if m.Double {
			value = "double"
		}
		if m.Sum {
			fmt.Fprintf(&b, "    sum:\n      value_type: %s\n      monotonic: true\n      aggregation_temporality: cumulative\n", value)
		} else {
			fmt.Fprintf(&b, "    gauge:\n      value_type: %s\n", value)
		}
		attrs := []string{"process_pid"}
		if m == pipeline.ProcessInfo {
			for _, a := range infoAttributes {
				attrs = append(attrs, a.id)
			}
		}
		if m.Attr != "" {
			attrs = append(attrs, ids[m.Attr])
		}
		fmt.Fprintf(&b, "    attributes: [%s]\n\n", strings.Join(attrs, ", "))
		out[m.Name] = b.String()
	}
	return out
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
	b.WriteString("// setStatusLine points the line's yagpcc.ProcStatus field at v.\nfunc setStatusLine(s *yagpcc.ProcStatus, l StatusLine, v *int64) {\n\tswitch l {\n")
	for _, l := range lines {
		fmt.Fprintf(&b, "\tcase %s:\n\t\ts.%s = v // field %d\n", l.line, l.goField, l.number)
	}
	b.WriteString("\t}\n}\n")
	return format.Source(b.Bytes())
}
