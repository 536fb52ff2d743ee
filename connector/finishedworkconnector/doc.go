// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate ../../bin/mdatagen metadata.yaml

// Package finishedworkconnector turns the snapshotdiff processor's
// finished_query and ended_session resources into OpenTelemetry events:
// one log record per ended query and per ended session (docs/pipeline.md,
// finished work).
package finishedworkconnector
