// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package pipeline is the core of the data contract between gpotel's
// components (docs/pipeline.md; a test keeps the two in step): what every
// boundary shares. It holds, once, every name that travels (resource
// kinds, attributes, metrics), the session key, the table of every
// per-process figure (Figures: agent field → kernel unit → process metric
// → processor slot → session, cluster and query figures → SystemStat
// field) with the closing batch's metrics, the figure values more than one
// boundary carries (Counters, Skew, SegmentUse, QuerySpill), and the
// helpers that read number points and attribute values.
//
// Each boundary is a package of its own, imported only by the components
// at its two ends:
//
//   - receiver → processor: the snapshot (package snapshot), with the
//     sparse batches rule (package sparse);
//   - processor → sessionstate exporter: the processor's output (package
//     output);
//   - processor → finished-work consumers: the finished-work and
//     rule-action events (package events).
//
// figuregen writes what follows from these declarations into the files
// that need a copy of them.
package pipeline

//go:generate go run ./figuregen ../..
