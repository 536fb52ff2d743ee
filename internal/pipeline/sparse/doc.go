// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package sparse is the sparse batches rule (docs/pipeline.md), both
// halves of it: the receiver's Sender sends a process only when something
// it says changed since it last sent it, or when a full batch of its host
// is due, numbers every process batch of a host in one sequence, and lists
// in the closing batch how many batches each host sent and which
// processes left; the processor's Sequence checks that the batches it got
// add up to that, refuses one that does not follow, and says which hosts'
// unlisted processes it may carry unchanged. Comparing for equality is not
// diffing: the processor alone computes steps.
//
// The wire form of what the rule sends (the batch resource, the departed
// resources, the host answers) is the pipeline package's.
package sparse
