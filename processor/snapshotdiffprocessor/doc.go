// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate ../../bin/mdatagen metadata.yaml

// Package snapshotdiffprocessor turns the gpsession receiver's cumulative
// per-process snapshots into windowed per-session figures.
package snapshotdiffprocessor
