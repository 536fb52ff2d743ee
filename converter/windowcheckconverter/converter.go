// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package windowcheckconverter checks, when the collector reads its
// configuration, what no single component can: that each sessionstate
// exporter's last_metrics_window is one of the windows of every
// snapshotdiff processor that feeds it. The exporter only ever sees the
// processor's output, so without this a window the processor does not
// compute leaves last_metrics empty for the collector's life.
package windowcheckconverter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor"
)

// NewFactory is the converter's factory, as the ocb manifest lists it.
func NewFactory() confmap.ConverterFactory {
	return confmap.NewConverterFactory(func(confmap.ConverterSettings) confmap.Converter { return windowCheck{} })
}

type windowCheck struct{}

// pipeline is one service::pipelines entry: component IDs as written.
type pipeline struct {
	Receivers  []string `mapstructure:"receivers"`
	Processors []string `mapstructure:"processors"`
	Exporters  []string `mapstructure:"exporters"`
}

// Convert changes nothing; it refuses a configuration whose sessionstate
// exporter asks for a window a snapshotdiff feeding it does not compute.
// A section it cannot read is left for the collector to report.
func (windowCheck) Convert(_ context.Context, conf *confmap.Conf) error {
	var pipelines map[string]pipeline
	if _, ok := read(conf, "service::pipelines", &pipelines, confmap.WithIgnoreUnused()); !ok {
		return nil
	}
	exporter := sessionstateexporter.NewFactory()
	processor := snapshotdiffprocessor.NewFactory()
	var errs []error
	for _, name := range sortedKeys(pipelines) {
		for _, exp := range pipelines[name].Exporters {
			if !ofType(exp, exporter.Type()) {
				continue
			}
			cfg, ok := read(conf, "exporters::"+exp, exporter.CreateDefaultConfig())
			if !ok {
				continue
			}
			window := cfg.(*sessionstateexporter.Config).LastMetricsWindow
			for _, proc := range feeding(pipelines, name, processor.Type()) {
				pc, ok := read(conf, "processors::"+proc, processor.CreateDefaultConfig())
				if !ok {
					continue
				}
				if windows := pc.(*snapshotdiffprocessor.Config).Windows; !slices.Contains(windows, window) {
					errs = append(errs, fmt.Errorf("exporters::%s::last_metrics_window %s: not one of the windows of processors::%s (%s), which feeds it in "+
						"pipeline %s; last_metrics would stay empty",
						exp, window, proc, durations(windows), name))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// feeding lists the processors of type t in pipeline name and in every
// pipeline upstream of it through a connector.
func feeding(pipelines map[string]pipeline, name string, t component.Type) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		if seen[p] {
			return
		}
		seen[p] = true
		for _, proc := range pipelines[p].Processors {
			if ofType(proc, t) && !slices.Contains(out, proc) {
				out = append(out, proc)
			}
		}
		for _, recv := range pipelines[p].Receivers {
			for _, up := range sortedKeys(pipelines) {
				if slices.Contains(pipelines[up].Exporters, recv) {
					walk(up)
				}
			}
		}
	}
	walk(name)
	return out
}

// read is the section at key as the collector will read it: into cfg (a
// component's defaults), overlaid with the section; false when the section
// does not read (the collector reports that itself).
func read(conf *confmap.Conf, key string, cfg any, opts ...confmap.UnmarshalOption) (any, bool) {
	sub, err := conf.Sub(key)
	if err != nil {
		return nil, false
	}
	if err := sub.Unmarshal(cfg, opts...); err != nil {
		return nil, false
	}
	return cfg, true
}

// ofType tells whether the component ID (type or type/name) is of type t.
func ofType(id string, t component.Type) bool {
	typ, _, _ := strings.Cut(id, "/")
	return typ == t.String()
}

func sortedKeys(m map[string]pipeline) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func durations(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.String()
	}
	return strings.Join(s, ", ")
}
