// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	tea "github.com/charmbracelet/bubbletea"
)

// maxInput bounds what may be typed into a filter: a role or database
// name is at most 63 bytes (NAMEDATALEN - 1).
const maxInput = 63

// textInput is a filter being typed on the status line.
type textInput struct {
	label string
	text  string
	apply func(f *filter, text string)
	// offered: text is the value offered, untouched: typing replaces it.
	offered bool
}

// askFilter starts typing a filter, from its current value, or else the
// selected row's (the likely next filter).
func (m topModel) askFilter(label, current string, apply func(*filter, string)) topModel {
	text := current
	if text == "" {
		text = m.offered(label)
	}
	m.input = &textInput{label: label, text: text, apply: apply, offered: text != ""}
	return m
}

// offered is the selected row's value of a filter: its session's user or
// database, or in the history its status.
func (m topModel) offered(label string) string {
	var who SessionRow
	status := ""
	if r, ok := m.selectedHistory(); ok && m.page == nil && views[m.view].name == "history" {
		who, status = r.who(), r.status()
	} else if t, ok := m.target(); ok {
		who = t.session
	}
	switch label {
	case userFilterLabel:
		return who.User
	case databaseFilterLabel:
		return who.Database
	case statusFilterLabel:
		return status
	}
	return ""
}

const (
	userFilterLabel     = "show only the user"
	databaseFilterLabel = "show only the database"
	statusFilterLabel   = "show only the status"
)

// typeInto edits the text: enter applies it (empty: no filter), esc
// leaves the filter as it was.
func (m topModel) typeInto(key string) (tea.Model, tea.Cmd) {
	in := *m.input
	switch key {
	case "enter":
		was := m.filter
		in.apply(&m.filter, in.text)
		m.input = nil
		if m.filter == was {
			return m, nil
		}
		// The history is asked for with the filter: from its newest page.
		m.historyPage = 0
		m.historyGen++
		return m, m.fetch()
	case "esc":
		m.input = nil
		return m, nil
	case "backspace":
		r := []rune(in.text)
		in.text = string(r[:max(len(r)-1, 0)])
		if in.offered {
			in.text = ""
		}
	case "ctrl+u":
		in.text = ""
	case " ": // the space bar is a named key, yet text
		return m.typeRunes(key)
	default: // another named key: text comes through typeRunes
		return m, nil
	}
	in.offered = false
	m.input = &in
	return m, nil
}

// typeRunes adds typed text: one rune, or many when typed quickly or
// pasted. A control character is not text.
func (m topModel) typeRunes(text string) (tea.Model, tea.Cmd) {
	for _, r := range text {
		if r < ' ' || r == 0x7f || r >= 0x80 && r < 0xa0 {
			return m, nil
		}
	}
	in := *m.input
	if in.offered {
		in.text = ""
	}
	if len(in.text)+len(text) <= maxInput {
		in.text += text
	}
	in.offered = false
	m.input = &in
	return m, nil
}
