// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate ../../bin/mdatagen metadata.yaml

// Package sessionstateexporter serves yagpcc's GetGPInfo gRPC API from the
// per-session figures the snapshotdiff processor delivers. This package is
// the component (factory, configuration, lifecycle, the gRPC server and its
// wiring); each batch is decoded once into internal/view, and each service
// is a package of its own under internal/.
package sessionstateexporter
