// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package querylife follows each session's queries from snapshot to
// snapshot: it opens and closes them, shares every process's steps among
// them (docs/pipeline.md, query figures), and decides when and how each
// query and session ended (docs/pipeline.md, finished work and how it
// ended). It reads a snapshot through Snapshot and never the processor's
// store.
//
// Each file builds only on the ones before it: snapshot.go (what goes in
// and out), partial.go, query.go (one query), session.go (a session's
// queries and life), howended.go (how each ended), state.go (the
// Tracker), settle.go (writing the events), tracker.go (Update).
package querylife
