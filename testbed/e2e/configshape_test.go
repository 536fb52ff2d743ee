// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

// componentType is the type part of a component id ("snapshotdiff/api" -> "snapshotdiff").
func componentType(id string) string {
	t, _, _ := strings.Cut(id, "/")
	return t
}

// pipelineShapeErrors checks the rules of docs/pipeline.md and config/README.md
// on a collector configuration: one snapshotdiff instance, fed straight by
// gpsession (memory_limiter may come first), its output to sessionstate and
// to connectors; batch only on pipelines that do not feed sessionstate.
func pipelineShapeErrors(conf *confmap.Conf) []error {
	type pipeline struct {
		Receivers  []string `mapstructure:"receivers"`
		Processors []string `mapstructure:"processors"`
		Exporters  []string `mapstructure:"exporters"`
	}
	var pipelines map[string]pipeline
	sub, err := conf.Sub("service::pipelines")
	if err != nil {
		return []error{err}
	}
	if err := sub.Unmarshal(&pipelines); err != nil {
		return []error{fmt.Errorf("service::pipelines: %w", err)}
	}
	has := func(ids []string, typ string) bool {
		return slices.ContainsFunc(ids, func(id string) bool { return componentType(id) == typ })
	}
	var errs []error
	var snapshotPipelines []string
	for name, p := range pipelines {
		if has(p.Processors, "snapshotdiff") {
			snapshotPipelines = append(snapshotPipelines, name)
		}
	}
	slices.Sort(snapshotPipelines)
	if len(snapshotPipelines) != 1 {
		errs = append(errs, fmt.Errorf("snapshotdiff runs in %d pipelines %v, want exactly one", len(snapshotPipelines), snapshotPipelines))
	}
	for name, p := range pipelines {
		diffs := 0
		for i, id := range p.Processors {
			switch componentType(id) {
			case "snapshotdiff":
				diffs++
				if i != len(p.Processors)-1 {
					errs = append(errs, fmt.Errorf("%s: %v after snapshotdiff, in the pipeline that feeds sessionstate", name, p.Processors[i+1:]))
				}
			case "memory_limiter":
				if i != 0 {
					errs = append(errs, fmt.Errorf("%s: memory_limiter must come first, got %v", name, p.Processors))
				}
			default:
				if has(p.Processors, "snapshotdiff") {
					errs = append(errs, fmt.Errorf("%s: %s splits or merges snapshots in front of snapshotdiff", name, id))
				}
			}
		}
		if diffs > 1 {
			errs = append(errs, fmt.Errorf("%s: %d snapshotdiff instances in one pipeline", name, diffs))
		}
		snapshots := diffs > 0
		if has(p.Receivers, "gpsession") && !snapshots {
			errs = append(errs, fmt.Errorf("%s: receives from gpsession without snapshotdiff", name))
		}
		if snapshots && (len(p.Receivers) != 1 || componentType(p.Receivers[0]) != "gpsession") {
			errs = append(errs, fmt.Errorf("%s: snapshotdiff must be fed by gpsession alone, got %v", name, p.Receivers))
		}
		if has(p.Exporters, "sessionstate") && !snapshots {
			errs = append(errs, fmt.Errorf("%s: sessionstate fed by a pipeline without snapshotdiff", name))
		}
		if has(p.Processors, "batch") && has(p.Exporters, "sessionstate") {
			errs = append(errs, fmt.Errorf("%s: batch in a pipeline that feeds sessionstate", name))
		}
	}
	return errs
}

func TestExampleConfigsPipelineShape(t *testing.T) {
	repo, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"testbed.yaml", "greenplum.yaml", "postgresql.yaml", "prometheus.yaml"} {
		t.Run(name, func(t *testing.T) {
			conf, err := confmaptest.LoadConf(filepath.Join(repo, "config", name))
			if err != nil {
				t.Fatal(err)
			}
			if err := errors.Join(pipelineShapeErrors(conf)...); err != nil {
				t.Error(err)
			}
		})
	}
	// The shapes the rules forbid must be caught, or the cases above prove nothing.
	bad := map[string]map[string]any{
		"two snapshotdiffs from one receiver (the old testbed.yaml)": {
			"metrics/api":  map[string]any{"receivers": []any{"gpsession"}, "processors": []any{"snapshotdiff"}, "exporters": []any{"sessionstate"}},
			"metrics/otlp": map[string]any{"receivers": []any{"gpsession"}, "processors": []any{"snapshotdiff", "batch"}, "exporters": []any{"otlp_grpc"}},
		},
		"batch in front of snapshotdiff": {
			"metrics": map[string]any{"receivers": []any{"gpsession"}, "processors": []any{"batch", "snapshotdiff"}, "exporters": []any{"sessionstate"}},
		},
		"batch after snapshotdiff, feeding sessionstate": {
			"metrics": map[string]any{"receivers": []any{"gpsession"}, "processors": []any{"snapshotdiff", "batch"}, "exporters": []any{"sessionstate"}},
		},
		"sessionstate behind the forward connector": {
			"metrics/snapshots": map[string]any{"receivers": []any{"gpsession"}, "processors": []any{"snapshotdiff"}, "exporters": []any{"forward"}},
			"metrics/export":    map[string]any{"receivers": []any{"forward"}, "processors": []any{"batch"}, "exporters": []any{"sessionstate"}},
		},
	}
	for name, pipelines := range bad {
		t.Run("rejects "+name, func(t *testing.T) {
			conf := confmap.NewFromStringMap(map[string]any{"service": map[string]any{"pipelines": pipelines}})
			if errs := pipelineShapeErrors(conf); len(errs) == 0 {
				t.Error("accepted")
			}
		})
	}
}
