// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package cpuslots bounds how many goroutines do the collector's CPU-heavy
// pipeline work at once. Go's scheduler has no priorities: a goroutine the
// network wakes (an API call's reader, its writer) waits for a free P
// behind every runnable goroutine, so while a tick runs as many pipeline
// goroutines as there are Ps, an API call waits as long as they do. Work
// that takes a slot of Pipeline leaves one P free for the rest.
package cpuslots

import "runtime"

// Slots is a counting semaphore.
type Slots chan struct{}

// New returns n slots (at least one).
func New(n int) Slots { return make(Slots, max(1, n)) }

// Pipeline are the process-wide slots of the pipeline's CPU-heavy work:
// decoding the agents' answers, writing their pdata and the processor's
// intake of it. One fewer than the Ps Go runs on, at least one.
var Pipeline = New(runtime.GOMAXPROCS(0) - 1)

// Acquire waits for a slot, without a deadline: the work it guards is
// bounded, and giving up would lose an answer already received.
func (s Slots) Acquire() { s <- struct{}{} }

// Release frees a slot taken by Acquire.
func (s Slots) Release() { <-s }

// InUse is how many slots are taken now.
func (s Slots) InUse() int { return len(s) }
