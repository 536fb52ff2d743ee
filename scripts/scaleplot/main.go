// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Command scaleplot turns BenchmarkCollectorScale output (go test -bench)
// into the table and the SVG plot of docs/performance.md: the collector's
// CPU and peak memory per process against the number of processes.
//
//	go run ./scripts/scaleplot -o docs/collector-scale.svg < build/bench-scale.txt
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// point is one sub-benchmark's figures.
type point struct {
	series    string // "off" or "on": emit_process_metrics, then the activity
	emit      string
	activity  string // "active30": the share of processes that move per tick
	processes float64
	cpuPerTick,
	rssPerProcess,
	tick,
	p99,
	peakMiB,
	points,
	decode float64
}

var benchLine = regexp.MustCompile(`^BenchmarkCollectorScale(EmitProcesses)?/(\S+?)(-\d+)?\s+\d+\s+(.*)$`)

// parse reads the benchmark lines; other lines are ignored.
func parse(r io.Reader) ([]point, error) {
	var out []point
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		p := point{emit: "off"}
		if m[1] != "" {
			p.emit = "on"
		}
		if _, act, ok := strings.Cut(m[2], "/"); ok {
			p.activity = act
		}
		p.series = strings.TrimSpace(p.emit + " " + p.activity)
		fields := strings.Fields(m[4])
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%q: %w", sc.Text(), err)
			}
			switch fields[i+1] {
			case "processes":
				p.processes = v
			case "collector-cpu-s/tick":
				p.cpuPerTick = v
			case "rss-bytes/process":
				p.rssPerProcess = v
			case "s/tick":
				p.tick = v
			case "GetGPSessions-p99-ms":
				p.p99 = v
			case "peak-rss-MiB":
				p.peakMiB = v
			case "points/tick":
				p.points = v
			case "decode-s/tick":
				p.decode = v
			}
		}
		if p.processes == 0 {
			return nil, fmt.Errorf("%q: no processes figure", sc.Text())
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no BenchmarkCollectorScale lines in the input")
	}
	// emit off first, the most active first, then by size.
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].emit != out[j].emit {
			return out[i].emit < out[j].emit
		}
		if a, b := activityOf(out[i]), activityOf(out[j]); a != b {
			return a > b
		}
		return out[i].processes < out[j].processes
	})
	return out, nil
}

// activityOf is the point's share of moving processes in percent; 100
// without an activity in its name.
func activityOf(p point) int {
	if n, err := strconv.Atoi(strings.TrimPrefix(p.activity, "active")); err == nil {
		return n
	}
	return 100
}

// seriesOf lists the series in the order they first appear.
func seriesOf(pts []point) []string {
	var out []string
	for _, p := range pts {
		if !slices.Contains(out, p.series) {
			out = append(out, p.series)
		}
	}
	return out
}

func cpuMicrosPerProcess(p point) float64 { return p.cpuPerTick / p.processes * 1e6 }

// table writes the Markdown table of docs/performance.md.
func table(out io.Writer, pts []point) error {
	w := &printer{w: out}
	w.println("| emit_process_metrics | activity | processes | collector CPU per tick | CPU per process | points per tick | decoding per tick | peak " +
		"RSS | RSS per process | tick | GetGPSessions p99 |")
	w.println("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, p := range pts {
		w.printf("| %s | %s | %s | %.2f s | %.1f µs | %s | %.3f s | %.0f MiB | %.0f B | %.2f s | %.1f ms |\n",
			p.emit, strings.TrimPrefix(p.activity, "active")+" %", count(p.processes), p.cpuPerTick, cpuMicrosPerProcess(p),
			approx(p.points), p.decode, p.peakMiB, p.rssPerProcess, p.tick, p.p99)
	}
	return w.err
}

// approx writes a large figure in millions or thousands.
func approx(n float64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.0fk", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}

// printer keeps the first write error, so drawing code stays readable.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func (p *printer) println(s string) { p.printf("%s\n", s) }

func count(n float64) string {
	switch {
	case n >= 1e6 && math.Mod(n, 1e6) == 0:
		return fmt.Sprintf("%.0fM", n/1e6)
	case n >= 1e3 && math.Mod(n, 1e3) == 0:
		return fmt.Sprintf("%.0fk", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}

// svg draws two panels, CPU µs per process and RSS bytes per process, over
// processes on a log axis; one line per series.
func svg(out io.Writer, pts []point) error {
	w := &printer{w: out}
	const width, height, panelH, left, top = 720, 560, 200, 80, 40
	minX, maxX := math.Inf(1), math.Inf(-1)
	for _, p := range pts {
		minX, maxX = math.Min(minX, p.processes), math.Max(maxX, p.processes)
	}
	if minX == maxX {
		minX, maxX = minX/2, maxX*2
	}
	xOf := func(n float64) float64 {
		return left + (math.Log10(n)-math.Log10(minX))/(math.Log10(maxX)-math.Log10(minX))*(width-left-40)
	}
	w.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	w.printf(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	panels := []struct {
		title string
		value func(point) float64
	}{
		{"collector CPU per process and tick (µs)", cpuMicrosPerProcess},
		{"collector peak RSS per process (bytes)", func(p point) float64 { return p.rssPerProcess }},
	}
	colors := map[string]string{"active100": "#d62728", "active30": "#1f77b4", "active10": "#2ca02c", "": "#1f77b4"}
	for i, panel := range panels {
		y0 := float64(top + i*(panelH+70))
		maxY := 0.0
		for _, p := range pts {
			maxY = math.Max(maxY, panel.value(p))
		}
		maxY *= 1.15
		if maxY == 0 {
			maxY = 1
		}
		yOf := func(v float64) float64 { return y0 + panelH - v/maxY*panelH }
		w.printf(`<text x="%d" y="%.0f" font-weight="bold">%s</text>`+"\n", left, y0-10, panel.title)
		w.printf(`<line x1="%d" y1="%.0f" x2="%d" y2="%.0f" stroke="black"/>`+"\n", left, y0+panelH, width-40, y0+panelH)
		w.printf(`<line x1="%d" y1="%.0f" x2="%d" y2="%.0f" stroke="black"/>`+"\n", left, y0, left, y0+panelH)
		for k := 0; k <= 4; k++ {
			v := maxY * float64(k) / 4
			w.printf(`<text x="%d" y="%.0f" text-anchor="end">%.4g</text>`+"\n", left-6, yOf(v)+4, v)
		}
		labelled := map[float64]bool{}
		for _, p := range pts {
			if !labelled[p.processes] {
				labelled[p.processes] = true
				w.printf(`<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`+"\n", xOf(p.processes), y0+panelH+16, count(p.processes))
			}
		}
		for _, series := range seriesOf(pts) {
			var path []string
			var color, dash string
			for _, p := range pts {
				if p.series != series {
					continue
				}
				color = colors[p.activity]
				if p.emit == "on" {
					dash = ` stroke-dasharray="6,4"`
				}
				x, y := xOf(p.processes), yOf(panel.value(p))
				path = append(path, fmt.Sprintf("%.1f,%.1f", x, y))
				w.printf(`<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x, y, color)
			}
			if len(path) > 1 {
				w.printf(`<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(path, " "), color, dash)
			}
		}
	}
	w.printf(`<text x="%d" y="%d">processes (log scale); moving per tick: red 100 %%, blue 30 %%, green 10 %%; `+
		`dashed: emit_process_metrics on</text>`+"\n", left, height-12)
	w.println(`</svg>`)
	return w.err
}

func main() {
	out := flag.String("o", "", "write the SVG plot here (the table goes to stdout)")
	flag.Parse()
	pts, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scaleplot:", err)
		os.Exit(1)
	}
	if err := table(os.Stdout, pts); err != nil {
		fmt.Fprintln(os.Stderr, "scaleplot:", err)
		os.Exit(1)
	}
	if *out == "" {
		return
	}
	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scaleplot:", err)
		os.Exit(1)
	}
	err = svg(f, pts)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scaleplot:", err)
		os.Exit(1)
	}
}
