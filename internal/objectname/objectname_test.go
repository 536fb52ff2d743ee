// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package objectname

import (
	"strings"
	"testing"
)

func TestValidRefusesWhatNoServerNames(t *testing.T) {
	for _, tc := range []struct {
		name  string
		valid bool
	}{
		{"pg_default", true},
		{"очередь", true},
		{strings.Repeat("q", MaxBytes), true},
		{"", false},
		{strings.Repeat("q", MaxBytes+1), false},
		{"bad\nname", false},
		{"bad\x7fname", false},
		{"bad\u009bname", false}, // C1: a terminal's CSI
		{"bad\x9bname", false},   // not UTF-8 (the same byte alone)
	} {
		if got := Valid(tc.name); got != tc.valid {
			t.Errorf("Valid(%q) = %v, want %v", tc.name, got, tc.valid)
		}
	}
}
