// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package snapshot is the boundary between the gpsession receiver and the
// snapshotdiff processor: what one scrape sends (docs/pipeline.md,
// framing, process, exited, unrecorded, batch and departed, endings,
// snapshot, session, host and cgroup resources). The receiver turns an
// agent's answer or exit record into a Process (ProcessFromAnswer,
// ProcessFromExit) and writes process batches (ProcessEncoder) with their
// sparse header and departures, then the batch that closes the snapshot
// (ClosingEncoder, AppendEndings); the processor reads what one
// ConsumeMetrics call holds (ReadBatch) and decodes it (ProcessDecoder,
// DecodeSnapshot, DecodeSession, DecodeGreenplum, DecodeEndings and the
// host decoders). The processor passes the closing batch's resources on,
// so the sessionstate exporter and the workloadrules connector read them
// with the same decoders. The sparse batches rule itself is package
// sparse; the names and the table of figures are package pipeline's.
package snapshot
