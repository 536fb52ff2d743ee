// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docTables reads the markdown tables of docs/pipeline.md: per table, its
// header cells and its rows' cells.
func docTables(t *testing.T) [][][]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/pipeline.md")
	if err != nil {
		t.Fatal(err)
	}
	var tables [][][]string
	var cur [][]string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "|") {
			if cur != nil {
				tables = append(tables, cur)
				cur = nil
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if strings.HasPrefix(strings.TrimSpace(cells[0]), "---") {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		cur = append(cur, cells)
	}
	return tables
}

var backticked = regexp.MustCompile("`([^`]+)`")

func ticked(cell string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// sortedSet is the distinct values, sorted.
func sortedSet(v []string) []string {
	out := slices.Clone(v)
	slices.Sort(out)
	return slices.Compact(out)
}

// docs/pipeline.md lists exactly the resource kinds and the metrics the
// contract defines: each kind in the gpotel.resource.kind row, each metric
// in the first column of a metric table.
func TestPipelineDocListsExactlyTheContractsKindsAndMetrics(t *testing.T) {
	var kinds, metrics []string
	for _, table := range docTables(t) {
		header := table[0]
		for _, row := range table[1:] {
			switch {
			case header[0] == "attribute" && slices.Contains(ticked(row[0]), AttrResourceKind):
				kinds = append(kinds, ticked(row[len(row)-1])...)
			case header[0] == "metric":
				metrics = append(metrics, ticked(row[0])...)
			}
		}
	}
	var wantKinds []string
	for _, k := range Kinds() {
		wantKinds = append(wantKinds, k.String())
	}
	if got, want := sortedSet(kinds), sortedSet(wantKinds); !slices.Equal(got, want) {
		t.Errorf("docs/pipeline.md lists the resource kinds %v, the contract has %v", got, want)
	}
	got, want := sortedSet(metrics), sortedSet(metricNames())
	for _, m := range want {
		if _, found := slices.BinarySearch(got, m); !found {
			t.Errorf("%s is not in a metric table of docs/pipeline.md", m)
		}
	}
	for _, m := range got {
		if _, found := slices.BinarySearch(want, m); !found {
			t.Errorf("docs/pipeline.md lists %s, which the contract does not define", m)
		}
	}
}

// metricNames lists every metric the contract defines: the receiver's
// (process and closing batch) and the processor's; docs/pipeline.md
// lists the same.
func metricNames() []string {
	var out []string
	for _, m := range ProcessMetrics {
		out = append(out, m.Name)
	}
	for _, m := range ClosingMetrics {
		out = append(out, m.Name)
	}
	for _, m := range CounterMetrics {
		out = append(out, m.Session, m.Session+RateSuffix, ClusterMetric(m.Session), UnattributedMetric(m.Session), QueryMetric(m.Session))
	}
	skews := []string{MetricSessionSkewRatio, MetricSessionSkewMaxOverAvg, MetricSessionSkewHottestSegment, MetricSessionSkewSegments}
	out = append(out, skews...)
	for _, s := range skews {
		out = append(out, QueryMetric(s))
	}
	return append(out,
		MetricSessionWindowSpan, MetricSessionPartial, MetricSessionProcesses, MetricSessionHosts, MetricSessionMemoryUsage,
		ClusterMetric(MetricSessionWindowSpan), MetricUnrecordedCPUTime,
		MetricSessionCPUUsageSmoothed, MetricSessionDiskIORateSmoothed, MetricSessionMemoryUsageSmoothed,
		MetricHostCPUUsageSmoothed, MetricHostDiskIORateSmoothed, MetricHostMemoryUsageSmoothed,
		MetricClusterCPUUsageSmoothed, MetricClusterDiskIORateSmoothed, MetricClusterMemoryUsageSmoothed,
		MetricSessionHostCPUUsage, MetricSessionHostDiskIORate, MetricSessionHostMemory, MetricSessionHostProcesses,
		MetricQuerySegmentCPUTime, MetricQuerySegmentDiskIO, MetricQueryDuration, MetricQueryCompleted, MetricQueryPartial,
		MetricQuerySpillSize, MetricQuerySpillFiles, MetricQuerySpillSizeMax, MetricQuerySpillFilesMax,
		MetricBatchSequence, MetricBatchFull, MetricHostBatches, MetricHostSequence, MetricProcessDeparted, MetricHostReadDelay,
		MetricBackendEnding)
}
