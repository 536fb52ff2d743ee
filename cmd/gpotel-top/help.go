// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"
)

// keyHelp is every key the screen takes, once: the help page and --help
// print it.
var keyHelp = []struct{ keys, what string }{
	{"↑ ↓ j, PgUp PgDn, Home End", "select a row: the selection is that session (or query, or host) and follows it as the rows re-sort"},
	{"enter", "the selected session's (or query's) details: who, what it waits for and blocks, its figures over the window and its life, per host and " +
		"per segment, its query whole; in the history, how it ended and every figure its event has, per segment with the hottest marked"},
	{"k", "cancel the selected session's running query, after y at a prompt naming it"},
	{"K", "terminate the selected session, after y at a prompt naming it"},
	{"x", "the selected session's memory contexts (each backend logs them; r asks again)"},
	{"tab, shift+tab", "the next (previous) view: sessions, queries, hosts, history (finished queries and ended sessions, newest first)"},
	{"] [", "history: the next 50 older rows, the newer ones (the newest page is refreshed, an older one stays as it was asked)"},
	{"S", "history: show only one status (completed, error, …; enter applies, empty shows all)"},
	{"c m r w d s a p", "sort by CPU, private memory, read, write, run-queue wait, CPU skew, smoothed CPU, spill"},
	{"u, D", "show only one user, one database (enter applies, empty shows all, esc leaves it)"},
	{"g", "show or hide gpotel's own sessions (the collector knows them by backend pid; a session merely named like gpotel is shown: the title counts " +
		"the hidden ones)"},
	{"?", "this help"},
	{"esc", "back from a page, out of a prompt; never quits"},
	{"q, ctrl+c", "quit"},
}

// columnHelp says what each column is and in which unit.
var columnHelp = []struct{ title, what string }{
	{"CPU%", "CPU (user + system) over the window, in percent of one core: 150 = one and a half cores; * = a host did not answer; " +
		impossibleMark + " = more than the hosts' CPUs (the collector's figure is wrong, shown as it came)"},
	{"AVG%", "CPU smoothed at the collector's shortest time constant, in percent of one core"},
	{"RUNQ%, IOW%, MEMW%", "time spent waiting for a CPU, for block I/O, for memory (swap-in, reclaim, thrashing, compaction) over the window, in " +
		"percent of one process waiting all the time: 300 = three processes on average; IOW% and MEMW% need kernel.task_delayacct=1 on the hosts: - where " +
		"they do not measure them"},
	{"RD/s, WR/s", "storage bytes read and written per second over the window (not the page cache)"},
	{"PRIV, RSS, VMEM", "private resident memory, resident memory, Greenplum's vmem account, now, every host"},
	{"SPILL", "workfile bytes held now (Greenplum); in the queries view the most the query held at once"},
	{"BLOCKED", "<12<7: waits for a lock session 12 holds, which waits for session 7"},
	{"RULE", "the newest workload rule's action done on the session and the rule (cancel runaway-spill); shown while one is"},
	{"SKEW", "75%@3: 1 - average/most of the CPU over the segments, and the segment that did the most"},
	{"DUR, ST, CCNT", "a query's duration so far, run/done/ended, Greenplum's command count"},
	{"END", "when a finished query or session ended: the time today, the date (month-day) and minute before"},
	{"-", "not measured, or not reported by the collector: never a zero"},
}

// helpText is the keys and the columns, at width (0: no wrapping).
func helpText(width int) []string {
	var out []string
	out = append(out, "KEYS")
	for _, k := range keyHelp {
		out = append(out, hanging(k.keys, k.what, 28, width)...)
	}
	out = append(out, "", "COLUMNS")
	for _, c := range columnHelp {
		out = append(out, hanging(c.title, c.what, 28, width)...)
	}
	out = append(out, "", "STATUS (history: how a finished query or session ended)")
	for _, s := range historyStatuses {
		out = append(out, hanging(s.cell, s.what, 28, width)...)
	}
	return append(out, hanging(partialMark, partialHelp, 28, width)...)
}

// hanging is a label and its text wrapped beside it.
func hanging(label, text string, indent, width int) []string {
	w := 0
	if width > 0 {
		indent = min(indent, width/3)
		w = max(width-indent-2, 10)
	}
	lines := wrap(text, w)
	out := make([]string, len(lines))
	for i, l := range lines {
		head := ""
		if i == 0 {
			head = label
		}
		out[i] = fmt.Sprintf("  %-*s%s", indent, head, l)
	}
	return out
}

// helpPage is ? on the screen.
type helpPage struct{ basePage }

func (helpPage) title() string                     { return "help" }
func (helpPage) lines(_ *topModel, w int) []string { return helpText(w) }
func (helpPage) help(*topModel) []item             { return []item{{0, "esc back"}, {0, "q quit"}} }

// usage is --help: how to run it, its flags, its keys.
func usage(flags string) string {
	var b strings.Builder
	b.WriteString("gpotel-top: which database sessions cost the operating system the most, cluster-wide, like top.\n\n")
	b.WriteString("usage: gpotel-top [flags]\n\nflags:\n")
	b.WriteString(flags)
	b.WriteString("\n")
	b.WriteString(strings.Join(helpText(0), "\n"))
	b.WriteString("\n")
	return b.String()
}
