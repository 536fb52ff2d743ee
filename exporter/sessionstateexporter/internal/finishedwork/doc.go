// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package finishedwork keeps the processor's finished_query and
// ended_session events (docs/pipeline.md, finished work) for the
// sessionstate exporter, within a retention and a count and byte budget,
// and serves them: gpotel.v1.FinishedWork's lists, and GetGPQuery for a
// query the newest snapshot no longer has.
package finishedwork
