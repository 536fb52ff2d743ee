// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workloadrulesconnector

import (
	"math"
	"testing"
)

// FuzzParsePredicate: a predicate's text is refused with an error or read
// as a known figure, a known comparison and a finite value (never negative
// for a size or a duration), never a panic.
func FuzzParsePredicate(f *testing.F) {
	for _, s := range []string{
		"gpotel.query.spill.size > 50GiB", "gpotel.query.duration >= 30m", "gpotel.session.cpu.time.rate > 0.8",
		"gpotel.session.idle_in_transaction.time > 3s", "gpotel.query.spill.size > 1e308TiB", "gpotel.query.spill.size > 0",
		"gpotel.query.duration < -1s", "gpotel.session.cpu.time.rate > NaN", "a b", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		p, err := parsePredicate(text)
		if err != nil {
			return
		}
		if int(p.figure) >= len(figures) || int(p.cmp) >= len(comparisonNames) {
			t.Fatalf("%q: figure %d, comparison %d out of range", text, p.figure, p.cmp)
		}
		if math.IsNaN(p.value) || math.IsInf(p.value, 0) {
			t.Fatalf("%q: value %v is not finite", text, p.value)
		}
		if u := figures[p.figure].unit; (u == unitBytes || u == unitBytesPerSec || u == unitSeconds) && p.value < 0 {
			t.Fatalf("%q: value %v is negative", text, p.value)
		}
	})
}
