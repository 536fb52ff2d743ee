// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate ../../bin/mdatagen metadata.yaml

// Package gpsessionreceiver lists every backend of a Greenplum, Cloudberry or
// PostgreSQL cluster, asks each host's gpotel agent for the processes' /proc
// counters, and emits one snapshot per scrape as the pipeline contract in
// docs/pipeline.md describes.
package gpsessionreceiver
