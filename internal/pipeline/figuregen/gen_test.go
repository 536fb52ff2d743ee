// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpotel/gpotel/internal/pipeline"
)

var root = filepath.Join("..", "..", "..")

// Every copy of the figures' table in the repository is what figuregen
// writes from pipeline.Figures now: a row added or changed without `make
// generate` fails here.
func TestGeneratedCopiesAreCurrent(t *testing.T) {
	outputs, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outputs {
		have, err := os.ReadFile(filepath.Join(root, o.path))
		if err != nil {
			t.Fatal(err)
		}
		if string(have) != string(o.content) {
			t.Errorf("%s is stale: run make generate and commit it", o.path)
		}
	}
}

// copyInputs copies the files figuregen edits into a new directory, each
// through edit, and returns the directory.
func copyInputs(t *testing.T, edit func(path, content string) string) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range []string{docPath, metadataPath} {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(edit(p, string(b))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(statusLinesPath)), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Generating twice writes the same.
func TestGenerateIsStable(t *testing.T) {
	dir := copyInputs(t, func(_, content string) string { return content })
	if err := run(dir); err != nil {
		t.Fatal(err)
	}
	first, err := generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range first {
		have, _ := os.ReadFile(filepath.Join(dir, o.path))
		if string(have) != string(o.content) {
			t.Errorf("%s changes when generated again", o.path)
		}
	}
}

// metadata.yaml's resource attributes, attributes and metrics come from
// internal/pipeline's declarations alone: an entry written there by hand
// does not survive make generate, so no declaration is kept in two places.
func TestMetadataDeclarationsComeOnlyFromGo(t *testing.T) {
	dir := copyInputs(t, func(path, content string) string {
		if path != metadataPath {
			return content
		}
		for _, section := range []string{"resource_attributes", "attributes", "metrics"} {
			content = strings.Replace(content, "\n"+section+":\n",
				"\n"+section+":\n  aaa_by_hand_"+section+":\n    description: \"written by hand\"\n    type: string\n\n", 1)
		}
		return content
	})
	outputs, err := generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outputs {
		if o.path == metadataPath && strings.Contains(string(o.content), "by_hand") {
			t.Errorf("%s keeps an entry written by hand:\n%s", o.path, o.content)
		}
	}
}

// A metric whose data-point attribute no table declares is an error, not
// an entry mdatagen would refuse or name otherwise.
func TestMetricAttributesMustBeDeclared(t *testing.T) {
	undeclared := &pipeline.ClosingMetric{Name: "gpotel.test.undeclared", Unit: "1", Attrs: []string{"gpotel.test.nowhere"}}
	saved := pipeline.ClosingMetrics
	pipeline.ClosingMetrics = append(slices.Clone(saved), undeclared)
	defer func() { pipeline.ClosingMetrics = saved }()
	if _, err := metadataMetrics(); err == nil || !strings.Contains(err.Error(), "gpotel.test.nowhere") {
		t.Errorf("metadataMetrics: %v, want an error naming the undeclared attribute", err)
	}
}
