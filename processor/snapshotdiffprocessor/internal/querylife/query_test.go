// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package querylife

import (
	"testing"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// Workfile rows go to the query that owns their command count (an
// executor's count past its statement's title count included); a query
// holds 0 once its rows are gone and keeps the most it held.
func TestQuerySpillGoesToItsOwnerAndKeepsItsMost(t *testing.T) {
	sq := &sessionQueries{queries: []*query{
		{ccnt: 3, lastCcnt: 4, start: 1, end: 2},
		{ccnt: 5, start: 3},
	}}
	sq.holdSpill([]snapshot.Spill{
		{Segment: 0, CommandCount: 5, Bytes: 100, Files: 1},
		{Segment: 1, CommandCount: 6, Bytes: 50, Files: 2}, // an executor of statement 5
		{Segment: 0, CommandCount: 2, Bytes: 9, Files: 1},  // a statement never seen
	})
	if sp := sq.queries[0].spill; sp != nil {
		t.Errorf("the ended query 3 holds %+v, want nothing", sp)
	}
	want := pipeline.QuerySpill{Bytes: 150, Files: 3, MaxBytes: 150, MaxFiles: 3}
	if sp := sq.queries[1].spill; sp == nil || *sp != want {
		t.Fatalf("query 5 spill = %+v, want %+v", sp, want)
	}
	sq.holdSpill([]snapshot.Spill{{Segment: 0, CommandCount: 5, Bytes: 20, Files: 1}})
	sq.holdSpill(nil)
	want = pipeline.QuerySpill{MaxBytes: 150, MaxFiles: 3}
	if sp := sq.queries[1].spill; *sp != want {
		t.Errorf("query 5 spill after its workfiles went = %+v, want %+v", sp, want)
	}
}
