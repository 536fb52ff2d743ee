// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"slices"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// column is one figure of a list. When the screen is too narrow for all of
// them, the ones with the lowest keep stay; they are drawn in the order
// declared either way, and the text column (the query) takes what is left.
type column[R any] struct {
	title string
	width int
	left  bool // text, aligned left; figures align right
	keep  int
	value func(R) string
}

// roomToSpare is how much the text column keeps beyond its least before
// name columns grow.
const roomToSpare = 40

// table is a list's columns and, optionally, the text that fills the rest.
type table[R any] struct {
	columns []column[R]
	// text is the last column; nil: none.
	textTitle string
	text      func(R) string
	// textMin is the least the text column may have before a figure
	// column gives way.
	textMin int
	// wide are the widths name columns grow to, by title, when the screen
	// has roomToSpare beyond the text's least.
	wide map[string]int
}

// fit is the columns shown at width (all of them when width is 0).
func (t table[R]) fit(width int) []column[R] {
	if width <= 0 {
		return t.columns
	}
	order := slices.Clone(t.columns)
	slices.SortStableFunc(order, func(a, b column[R]) int { return a.keep - b.keep })
	used := selectionMarkWidth
	if t.text != nil {
		used += t.textMin
	}
	chosen := map[string]bool{}
	for _, c := range order {
		if used+c.width+1 > width {
			continue
		}
		used += c.width + 1
		chosen[c.title] = true
	}
	var out []column[R]
	for _, c := range t.columns {
		if !chosen[c.title] {
			continue
		}
		if grow := min(t.wide[c.title]-c.width, width-used-roomToSpare); grow > 0 {
			c.width += grow
			used += grow
		}
		out = append(out, c)
	}
	return out
}

// selectionMarkWidth is the mark before every row: selectionMark on the
// selected one, a space on the others.
const (
	selectionMarkWidth = 1
	selectionMark      = ">"
)

// header is the title line of the columns shown.
func (t table[R]) header(cols []column[R], width int) string {
	cells := make([]string, 0, len(cols)+1)
	for _, c := range cols {
		cells = append(cells, pad(c.title, c.width, !c.left))
	}
	if t.text != nil {
		cells = append(cells, t.textTitle)
	}
	return cutLine(strings.Repeat(" ", selectionMarkWidth)+strings.Join(cells, " "), width)
}

// row is one row's line, the mark first.
func (t table[R]) row(cols []column[R], r R, selected bool, width int) string {
	cells := make([]string, 0, len(cols)+1)
	for _, c := range cols {
		v := c.value(r)
		if c.left {
			v = pad(v, c.width, false)
		} else { // a figure is never cut: one too wide pushes the row on
			v = strings.Repeat(" ", max(c.width-ansi.StringWidth(v), 0)) + v
		}
		cells = append(cells, v)
	}
	if t.text != nil {
		cells = append(cells, t.text(r))
	}
	mark := strings.Repeat(" ", selectionMarkWidth)
	if selected {
		mark = selectionMark
	}
	return cutLine(mark+strings.Join(cells, " "), width)
}

// pad cuts or fills s to exactly w cells; a cut text ends in "…".
func pad(s string, w int, right bool) string {
	if ansi.StringWidth(s) > w {
		s = ansi.Truncate(s, w, "…")
	}
	gap := strings.Repeat(" ", max(w-ansi.StringWidth(s), 0))
	if right {
		return gap + s
	}
	return s + gap
}

// cutLine is s without trailing blanks, cut to width cells (0: no cut).
func cutLine(s string, width int) string {
	s = strings.TrimRight(s, " ")
	if width > 0 && ansi.StringWidth(s) > width {
		s = ansi.Truncate(s, width, "")
	}
	return s
}

// wrap breaks text into lines of at most width cells, at spaces where it
// can (0: one line).
func wrap(text string, width int) []string {
	if width <= 0 || ansi.StringWidth(text) <= width {
		return []string{text}
	}
	var lines []string
	for _, l := range strings.Split(ansi.Wordwrap(text, width, " "), "\n") {
		for ansi.StringWidth(l) > width { // a word longer than the line
			head := ansi.Truncate(l, width, "")
			lines = append(lines, head)
			l = l[len(head):]
		}
		lines = append(lines, l)
	}
	return lines
}

// fitItems joins the items that fit in width, in their order, leaving out
// the least important first (a higher rank is less important); sep goes
// between them.
func fitItems(items []item, sep string, width int) string {
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return items[a].rank - items[b].rank })
	used := -ansi.StringWidth(sep)
	keep := make([]bool, len(items))
	for _, i := range order {
		w := ansi.StringWidth(items[i].text) + ansi.StringWidth(sep)
		if width > 0 && used+w > width {
			continue
		}
		used += w
		keep[i] = true
	}
	var out []string
	for i, it := range items {
		if keep[i] {
			out = append(out, it.text)
		}
	}
	return strings.Join(out, sep)
}

// item is one part of a line fitItems composes.
type item struct {
	rank int
	text string
}
