// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package output is the boundary between the snapshotdiff processor and
// the sessionstate exporter: the processor's figures (docs/pipeline.md,
// session, smoothed, skew, per-host, cluster and query figures), written
// by the processor (Encoder) and read by the exporter into yagpcc's
// and gpotel.v1's messages (DecodeSessionFigures, DecodeQuery,
// DecodeHostTops). The names and the table of figures both ends share are
// package pipeline's.
package output
