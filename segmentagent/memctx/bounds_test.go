// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memctx

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestDeepOrHugeContextTreesAreBounded: a block far deeper or far larger
// than any server writes is refused with an error naming the limit, and
// reading it allocates under 32 MiB.
func TestDeepOrHugeContextTreesAreBounded(t *testing.T) {
	const pid = 4242
	grand := "Grand total: 1 bytes in 1 blocks; 0 free (0 chunks); 1 used"
	deep := make([]string, 20000)
	deep[0] = "level: 0; TopMemoryContext" + stats
	for i := 1; i < len(deep); i++ {
		deep[i] = fmt.Sprintf("level: %d; Nested%d%s", i, i, stats)
	}
	sibling := "level: 1; Sibling" + stats
	tests := []struct {
		name  string
		limit string // what the error names
		lines func(yield func(string))
	}{
		{"20 000 nested levels", "level", func(yield func(string)) {
			for _, m := range deep {
				yield(m)
			}
			yield(grand)
		}},
		{"a million contexts", "contexts", func(yield func(string)) {
			yield("level: 0; TopMemoryContext" + stats)
			for range 1_000_000 {
				yield(sibling)
			}
			yield(grand)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			bc := &blockCollector{pid: pid}
			tt.lines(func(m string) { bc.add(Record{PID: pid, Message: m}) })
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("error %v; %.1f MiB allocated", bc.err, float64(allocated)/(1<<20))
			if bc.err == nil {
				n := 0
				if bc.block != nil {
					n = len(bc.block.contexts)
				}
				t.Fatalf("accepted a block of %d contexts", n)
			}
			if !strings.Contains(bc.err.Error(), tt.limit) {
				t.Errorf("error %q does not name the %s limit", bc.err, tt.limit)
			}
			if allocated > 32<<20 {
				t.Errorf("reading it allocated %d bytes, more than 32 MiB", allocated)
			}
		})
	}
}
