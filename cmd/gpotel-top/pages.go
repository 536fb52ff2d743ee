// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
)

// A page is shown over the lists, whole screen, until esc: a session's or
// a query's details, a session's memory contexts, the help. The frame
// draws the title and help lines and scrolls the page's lines.
type page interface {
	title() string
	// lines is the page's text at width; the frame scrolls it.
	lines(m *topModel, width int) []string
	// help is the page's part of the help line.
	help(m *topModel) []item
	// key handles the keys the frame leaves (esc, arrows, q, k, K, x it
	// takes); the page to show next comes back, nil: this one.
	key(m *topModel, key string) (page, tea.Cmd)
	// receive takes the page's own answers, as key does.
	receive(msg tea.Msg) (page, tea.Cmd)
	// refresh asks again on each tick; nil: nothing to ask.
	refresh(m *topModel) tea.Cmd
	// target is the session k, K and x act on here; false: none.
	target(m *topModel) (actionTarget, bool)
	// back is where esc leads when not to the lists.
	back() (page, bool)
	// impossible: a figure on the page is marked impossibleMark.
	impossible(m *topModel, c capacity) bool
}

// basePage is a page that asks nothing, acts on nothing and has no keys
// of its own.
type basePage struct{}

func (basePage) key(*topModel, string) (page, tea.Cmd) { return nil, nil }
func (basePage) receive(tea.Msg) (page, tea.Cmd)       { return nil, nil }
func (basePage) refresh(*topModel) tea.Cmd             { return nil }
func (basePage) target(*topModel) (actionTarget, bool) { return actionTarget{}, false }
func (basePage) back() (page, bool)                    { return nil, false }
func (basePage) impossible(*topModel, capacity) bool   { return false }

// field is one "label  value" line of a page.
func field(label, value string, width int) string {
	return cutLine(fmt.Sprintf("%-22s %s", label, value), width)
}

// paragraph is a text wrapped to width (0: not wrapped), indented by two.
func paragraph(text string, width int) []string {
	if width > 0 {
		width = max(width-2, 10)
	}
	var out []string
	for _, l := range wrap(text, width) {
		out = append(out, "  "+l)
	}
	return out
}

// joinNonEmpty joins the parts that are not empty.
func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}
