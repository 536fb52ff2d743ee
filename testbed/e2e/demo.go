// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"time"

	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/workload"
)

// DemoWorkloads keep a testbed busy in every way gpotel measures, sized for a
// small machine: `gpotel-testbed demo`, `make run` and the steady-state
// benchmark run these, each restarted when its run ends. Each kind that
// works runs one statement on its coordinator backend for its whole run
// (cpu: one on every backend), so that a DBA trying gpotel-top's k finds
// the query still running: a minute and a half, not a statement of 100 ms.
func DemoWorkloads() []workload.Spec {
	const calm = 90 * time.Second
	return []workload.Spec{
		{Name: "cpu", Kind: workload.CPU, Duration: calm, QueryDuration: calm},
		{Name: "io", Kind: workload.IO, Duration: calm, IOBytes: 16 << 20, Dispatched: true},
		{Name: "memory", Kind: workload.Memory, Duration: calm, MemoryBytes: 32 << 20, Dispatched: true},
		{Name: "idle-in-transaction", Kind: workload.IdleInTransaction, Duration: 60 * time.Second},
		{Name: "churn", Kind: workload.Churn, Duration: 30 * time.Second, Interval: time.Second},
		// A sort held open in a cursor: a large memory context to look at with GetSessionMemoryContexts.
		{Name: "held-sort", Kind: workload.HeldSort, Duration: calm, MemoryBytes: 16 << 20},
		// Greenplum's own figures: a sort that spills to workfiles, and a
		// session waiting for a lock another holds.
		{Name: "spill", Kind: workload.Spill, Duration: calm, SpillBytes: 16 << 20},
		{Name: "lock-holder", Kind: workload.LockHolder, Table: "gpotel_demo_locked", Duration: calm},
		{Name: "lock-waiter", Kind: workload.LockWaiter, Table: "gpotel_demo_locked", Duration: calm},
	}
}

// KeepRunning restarts one workload session until ctx ends. A run the
// server ended (workload.EndedByServer: a workload rule, gpotel-top's k or
// K) is expected: onEnded hears about it and the next starts at once;
// onError hears about failed runs (then it waits 5 s before the next).
func KeepRunning(ctx context.Context, c *cluster.Cluster, spec workload.Spec, onError, onEnded func(error)) {
	for ctx.Err() == nil {
		s, err := workload.Start(ctx, c, spec)
		if err == nil {
			err = s.Wait()
		}
		if err != nil && ctx.Err() == nil && workload.EndedByServer(err) {
			if onEnded != nil {
				onEnded(err)
			}
			continue
		}
		if err != nil && ctx.Err() == nil {
			if onError != nil {
				onError(err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	}
}
