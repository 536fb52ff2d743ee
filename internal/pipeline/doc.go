// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package pipeline is the data contract between gpotel's three components:
// what the gpsession receiver writes as pdata, what the snapshotdiff
// processor reads and adds, and what the sessionstate exporter reads back.
//
// It holds, once, every name that travels (resource kinds, attributes,
// metrics), the session key, the table of every per-process figure
// (Figures: agent field → kernel unit → process metric → processor slot →
// session, cluster and query figures → SystemStat field), and the typed
// encoders and decoders of each batch kind: process batches
// (ProcessEncoder, ProcessDecoder), the batch that closes a snapshot
// (ClosingEncoder, DecodeClosing) and the processor's output
// (OutputEncoder, OutputDecoder). The components stay thin around it;
// docs/pipeline.md describes it, and a test keeps the two in step.
package pipeline

//go:generate go run ./figuregen ../..
