// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package benchmeter measures what benchmarks report beside time: the CPU
// a thread used and the heap that stays live.
package benchmeter

import (
	"runtime"
	"syscall"
	"time"
)

// ThreadCPU is the CPU time of the calling OS thread (Linux RUSAGE_THREAD):
// unlike wall time it does not grow when other work on the machine takes
// the CPU away. Lock the goroutine to its thread around what is measured.
// 0 where unsupported.
func ThreadCPU() time.Duration {
	const rusageThread = 1
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// LiveHeap is the heap in use after a full collection: what is reachable.
func LiveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// ProcessCPU is the CPU time of the whole process (RUSAGE_SELF): what a
// component costs when its work spreads over goroutines on several
// threads (a pgx COPY writes from one, the garbage collector runs on
// others). 0 where unsupported.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
