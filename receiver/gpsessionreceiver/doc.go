// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// mdatagen writes a MetricsBuilder (internal/metadata/generated_metrics.go)
// for every metadata.yaml that declares metrics, with no option to leave it
// out. The receiver needs only its config; it writes its batches with
// internal/pipeline's encoders. Only contract_test.go calls the builder, as
// the reference those encoders are held to under every switch, so the
// linker leaves it out of the collector.
//
//go:generate ../../bin/mdatagen metadata.yaml

// Package gpsessionreceiver lists every backend of a Greenplum, Cloudberry or
// PostgreSQL cluster, asks each host's gpotel agent for the processes' /proc
// counters, and emits one snapshot per scrape as the pipeline contract in
// docs/pipeline.md describes.
package gpsessionreceiver
