// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkCollectorScale/10k/active30-2         	       3	 2000000000 ns/op	         0.05000 collector-cpu-s/tick	      4000 rss-bytes/process	         3.000 ticks	         2.000 s/tick	     10000 processes	        38.00 peak-rss-MiB	         1.500 GetGPSessions-p99-ms	     75000 points/tick	 0.002 decode-s/tick
BenchmarkCollectorScale/200k/active30-2        	       3	 6000000000 ns/op	         1.000 collector-cpu-s/tick	      5000 rss-bytes/process	         3.000 ticks	         6.000 s/tick	    200000 processes	       954.0 peak-rss-MiB	         4.000 GetGPSessions-p99-ms	   1500000 points/tick	 0.040 decode-s/tick
BenchmarkCollectorScale/200k/active100-2        	       3	 6000000000 ns/op	         2.000 collector-cpu-s/tick	      5000 rss-bytes/process	         3.000 ticks	         6.000 s/tick	    200000 processes	       954.0 peak-rss-MiB	         4.000 GetGPSessions-p99-ms	   5000000 points/tick	 0.040 decode-s/tick
BenchmarkCollectorScaleEmitProcesses/10k/active30-2  	       3	 2000000000 ns/op	         0.1200 collector-cpu-s/tick	      6000 rss-bytes/process	         3.000 ticks	         2.000 s/tick	     10000 processes	        57.00 peak-rss-MiB	         2.000 GetGPSessions-p99-ms
PASS
`

func TestParseReadsEverySubBenchmarkInOrder(t *testing.T) {
	pts, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	// emit off first, the most active first, then by size.
	if len(pts) != 4 || pts[0].activity != "active100" || pts[1].series != "off active30" || pts[1].processes != 10_000 ||
		pts[2].processes != 200_000 || pts[3].series != "on active30" {
		t.Fatalf("points %+v", pts)
	}
	if got := cpuMicrosPerProcess(pts[2]); got != 5 {
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
	for _, want := range []string{"| off | 30 % | 10k | 0.05 s | 5.0 µs | 75k | 0.002 s |", "| off | 30 % | 200k | 1.00 s | 5.0 µs | 1.50M | 0.040 s | " +
		"954 MiB | 5000 B |"} {
		if !strings.Contains(tb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tb.String())
		}
	}
	if !strings.Contains(plot.String(), "<polyline") || !strings.Contains(plot.String(), ">200k<") {
		t.Errorf("plot lacks the lines or the axis labels")
	}
}
