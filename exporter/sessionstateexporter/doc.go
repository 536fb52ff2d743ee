// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate ../../bin/mdatagen metadata.yaml

// Package sessionstateexporter serves yagpcc's GetGPInfo gRPC API from the
// per-session figures the snapshotdiff processor delivers.
package sessionstateexporter
