// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package configtest reads a component's testdata/config.yaml in its tests.
package configtest

import (
	"path/filepath"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

// Load is the entry name of testdata/config.yaml unmarshalled over the
// factory's defaults.
func Load(t testing.TB, f component.Factory, name string) component.Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := cm.Sub(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.CreateDefaultConfig()
	if err := sub.Unmarshal(cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}
