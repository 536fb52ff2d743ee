// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate ../../bin/mdatagen metadata.yaml

// Package historyexporter writes the finished-work events (one OpenTelemetry
// log record per ended query and per ended session, internal/pipeline) into
// two day-partitioned tables of a PostgreSQL, Greenplum or Cloudberry
// database, through a bounded queue kept in a storage extension.
package historyexporter
