// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package pipeline is the data contract between gpotel's components: what
// the gpsession receiver writes as pdata, what the snapshotdiff processor
// reads and writes, and what the sessionstate and history exporters and the
// finishedwork connector read back. docs/pipeline.md describes it, and a
// test keeps the two in step.
//
// It holds, once, every name that travels (resource kinds, attributes,
// metrics), the session key, the table of every per-process figure
// (Figures: agent field → kernel unit → process metric → processor slot →
// session, cluster and query figures → SystemStat field), and the typed
// encoders and decoders of each boundary:
//
//   - agent → receiver: an agent's answer or exit record as a Process
//     (ProcessFromAnswer, ProcessFromExit);
//   - receiver → processor: what one ConsumeMetrics call holds (ReadBatch),
//     process batches (ProcessEncoder, ProcessDecoder) with their sparse
//     header and departures, and the batch that closes a snapshot
//     (ClosingEncoder; DecodeSnapshot, DecodeSession, DecodeGreenplum,
//     DecodeEndings and the host decoders); the sparse batches rule itself
//     is package sparse;
//   - processor → sessionstate exporter: the processor's output
//     (OutputEncoder; DecodeSessionFigures, DecodeQuery, DecodeHostTops);
//   - processor → finishedwork connector and exporters: the finished-work
//     events (AppendFinishedQuery, AppendEndedSession; QueryEventFields and
//     SessionEventFields, read with EventValue or DecodeQueryEvent and
//     DecodeSessionEvent; AppendEventOf makes the log record), each field
//     one row, with its accessors, of its event's table (eventfield.go).
//
// The components stay thin around it.
package pipeline

//go:generate go run ./figuregen ../..
