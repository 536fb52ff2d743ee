// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package querylife follows each session's queries from snapshot to
// snapshot: it opens and closes them, shares every process's steps among
// them (docs/pipeline.md, query figures), and decides when and how each
// query and session ended (docs/pipeline.md, finished work and how it
// ended). It reads a snapshot through Snapshot and never the processor's
// store.
package querylife
