// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import "unicode/utf8"

// CutUTF8 cuts s to at most limit bytes without splitting a character, as
// the contract cuts query text; cut says whether anything was left out.
func CutUTF8(s string, limit int) (out string, cut bool) {
	if len(s) <= limit {
		return s, false
	}
	for limit > 0 && !utf8.RuneStart(s[limit]) {
		limit--
	}
	return s[:limit], true
}
