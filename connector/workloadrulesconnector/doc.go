// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate ../../bin/mdatagen metadata.yaml

// Package workloadrulesconnector evaluates workload rules over the
// snapshotdiff processor's output: each rule's predicates over the
// contract's session and query figures, held for its `for`, then its
// action (log, cancel, terminate, move) in observe or enforce mode, and
// every firing written as a gpotel.rule.action event (a log record).
package workloadrulesconnector
