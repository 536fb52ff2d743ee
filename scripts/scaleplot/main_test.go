// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkCollectorScale/10k-2         	       3	 2000000000 ns/op	         0.05000 collector-cpu-s/tick	      4000 rss-bytes/process	         3.000 ticks	         2.000 s/tick	     10000 processes	        38.00 peak-rss-MiB	         1.500 GetGPSessions-p99-ms
BenchmarkCollectorScale/200k-2        	       3	 6000000000 ns/op	         1.000 collector-cpu-s/tick	      5000 rss-bytes/process	         3.000 ticks	         6.000 s/tick	    200000 processes	       954.0 peak-rss-MiB	         4.000 GetGPSessions-p99-ms
BenchmarkCollectorScaleEmitProcesses/10k-2  	       3	 2000000000 ns/op	         0.1200 collector-cpu-s/tick	      6000 rss-bytes/process	         3.000 ticks	         2.000 s/tick	     10000 processes	        57.00 peak-rss-MiB	         2.000 GetGPSessions-p99-ms
PASS
`

func TestParseReadsEverySubBenchmarkInOrder(t *testing.T) {
	pts, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 3 || pts[0].series != "off" || pts[0].processes != 10_000 || pts[1].processes != 200_000 || pts[2].series != "on" {
		t.Fatalf("points %+v", pts)
	}
	if got := cpuMicrosPerProcess(pts[1]); got != 5 {
		t.Errorf("200k: %v µs per process, want 5", got)
	}
}

func TestParseWithoutBenchmarkLinesIsAnError(t *testing.T) {
	if _, err := parse(strings.NewReader("PASS\n")); err == nil {
		t.Error("no error for input without benchmark lines")
	}
}

func TestTableAndPlotNameEverySize(t *testing.T) {
	pts, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	var tb, plot bytes.Buffer
	if err := table(&tb, pts); err != nil {
		t.Fatal(err)
	}
	if err := svg(&plot, pts); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| off | 10k | 0.05 s | 5.0 µs |", "| off | 200k | 1.00 s | 5.0 µs | 954 MiB | 5000 B |"} {
		if !strings.Contains(tb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tb.String())
		}
	}
	if !strings.Contains(plot.String(), "<polyline") || !strings.Contains(plot.String(), ">200k<") {
		t.Errorf("plot lacks the lines or the axis labels")
	}
}
