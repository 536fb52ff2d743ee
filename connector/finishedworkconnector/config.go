// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package finishedworkconnector

import "go.opentelemetry.io/collector/component"

// Config configures the finishedwork connector. It has no settings: what
// the events hold is set in the snapshotdiff processor (queries::enabled,
// queries::text).
type Config struct{}

var _ component.Config = (*Config)(nil)

func createDefaultConfig() component.Config { return &Config{} }
