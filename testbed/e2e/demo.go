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
// benchmark run these, each restarted when its run ends.
func DemoWorkloads() []workload.Spec {
	return []workload.Spec{
		{Name: "cpu", Kind: workload.CPU, Duration: 45 * time.Second},
		{Name: "io", Kind: workload.IO, Duration: 40 * time.Second, IOBytes: 16 << 20},
		{Name: "memory", Kind: workload.Memory, Duration: 50 * time.Second, MemoryBytes: 32 << 20},
		{Name: "idle-in-transaction", Kind: workload.IdleInTransaction, Duration: 60 * time.Second},
		{Name: "churn", Kind: workload.Churn, Duration: 30 * time.Second, Interval: time.Second},
		// A sort held open in a cursor: a large memory context to look at with GetSessionMemoryContexts.
		{Name: "held-sort", Kind: workload.HeldSort, Duration: 90 * time.Second, MemoryBytes: 16 << 20},
		// Greenplum's own figures: a sort that spills to workfiles, and a
		// session waiting for a lock another holds.
		{Name: "spill", Kind: workload.Spill, Duration: 60 * time.Second, SpillBytes: 16 << 20},
		{Name: "lock-holder", Kind: workload.LockHolder, Table: "gpotel_demo_locked", Duration: 50 * time.Second},
		{Name: "lock-waiter", Kind: workload.LockWaiter, Table: "gpotel_demo_locked", Duration: 50 * time.Second},
	}
}

// KeepRunning restarts one workload session until ctx ends; onError hears
// about failed runs (then it waits 5 s before the next).
func KeepRunning(ctx context.Context, c *cluster.Cluster, spec workload.Spec, onError func(error)) {
	for ctx.Err() == nil {
		s, err := workload.Start(ctx, c, spec)
		if err == nil {
			err = s.Wait()
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
