// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cpuslots

import (
	"runtime"
	"testing"
)

// New never gives fewer than one slot: work that takes one must be able to.
func TestNewGivesAtLeastOneSlot(t *testing.T) {
	for n, want := range map[int]int{-3: 1, 0: 1, 1: 1, 3: 3} {
		if got := cap(New(n)); got != want {
			t.Errorf("New(%d) has %d slots, want %d", n, got, want)
		}
	}
}

// The pipeline's slots leave one P free for the API's goroutines.
func TestPipelineLeavesOnePFree(t *testing.T) {
	if got, want := cap(Pipeline), max(1, runtime.GOMAXPROCS(0)-1); got != want {
		t.Errorf("Pipeline has %d slots with GOMAXPROCS %d, want %d", got, runtime.GOMAXPROCS(0), want)
	}
}

// InUse counts the slots taken, and a full set takes no more until one is
// released.
func TestInUseCountsTheSlotsTaken(t *testing.T) {
	s := New(2)
	if s.InUse() != 0 {
		t.Fatalf("InUse of new slots: %d", s.InUse())
	}
	s.Acquire()
	s.Acquire()
	if s.InUse() != 2 {
		t.Fatalf("InUse after two Acquire: %d", s.InUse())
	}
	select {
	case s <- struct{}{}:
		t.Fatal("a third slot was taken of two")
	default:
	}
	s.Release()
	if s.InUse() != 1 {
		t.Fatalf("InUse after a Release: %d", s.InUse())
	}
}
