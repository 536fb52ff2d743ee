// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import "testing"

func TestCutUTF8NeverSplitsACharacter(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit int
		want  string
		cut   bool
	}{
		{"select 1", 100, "select 1", false},
		{"select 1", 8, "select 1", false},
		{"select 1", 6, "select", true},
		{"héllo", 2, "h", true}, // é is two bytes
		{"héllo", 3, "hé", true},
		{"日本", 4, "日", true},
	} {
		got, cut := CutUTF8(tc.in, tc.limit)
		if got != tc.want || cut != tc.cut {
			t.Errorf("CutUTF8(%q, %d) = %q, %v; want %q, %v", tc.in, tc.limit, got, cut, tc.want, tc.cut)
		}
	}
}

func TestCutUTF8KeepsWholeCharacters(t *testing.T) {
	if got, _ := CutUTF8("añb", 2); got != "a" {
		t.Errorf("cut to 2 bytes = %q, want %q", got, "a")
	}
	if got, _ := CutUTF8("abc", 5); got != "abc" {
		t.Errorf("short text changed: %q", got)
	}
}
