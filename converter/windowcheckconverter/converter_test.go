// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package windowcheckconverter

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

func check(t *testing.T, conf map[string]any) error {
	t.Helper()
	return NewFactory().Create(confmap.ConverterSettings{}).Convert(context.Background(), confmap.NewFromStringMap(conf))
}

// A collector with one pipeline: gpsession → snapshotdiff (windows) →
// sessionstate (last_metrics_window), and a second pipeline behind a
// forward connector, as config/greenplum.yaml has.
func collector(windows []any, last any, sessionstateBehindForward bool) map[string]any {
	metrics := map[string]any{"receivers": []any{"gpsession"}, "processors": []any{"memory_limiter", "snapshotdiff"},
		"exporters": []any{"sessionstate", "forward"}}
	forwarded := map[string]any{"receivers": []any{"forward"}, "exporters": []any{"debug"}}
	if sessionstateBehindForward {
		metrics["exporters"] = []any{"forward"}
		forwarded["exporters"] = []any{"sessionstate/api"}
	}
	exporter := map[string]any{"endpoint": "127.0.0.1:1432"}
	if last != nil {
		exporter["last_metrics_window"] = last
	}
	return map[string]any{
		"processors": map[string]any{"snapshotdiff": map[string]any{"windows": windows}},
		"exporters":  map[string]any{"sessionstate": exporter, "sessionstate/api": exporter},
		"service":    map[string]any{"pipelines": map[string]any{"metrics": metrics, "metrics/forwarded": forwarded}},
	}
}

func TestAWindowTheProcessorComputesIsAccepted(t *testing.T) {
	if err := check(t, collector([]any{"10s", "30s"}, "30s", false)); err != nil {
		t.Fatal(err)
	}
}

func TestAWindowTheProcessorDoesNotComputeRefusesStartUp(t *testing.T) {
	err := check(t, collector([]any{"10s", "30s"}, "1m", false))
	want := "exporters::sessionstate::last_metrics_window 1m0s: not one of the windows of processors::snapshotdiff (10s, 30s), which feeds it in pipeline metrics"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Convert = %v, want an error saying %s", err, want)
	}
}

// Both sides' defaults count: the exporter's 5m against windows that lack it.
func TestTheDefaultWindowIsCheckedToo(t *testing.T) {
	if err := check(t, collector([]any{"10s"}, nil, false)); err == nil || !strings.Contains(err.Error(), "last_metrics_window 5m0s") {
		t.Fatalf("Convert = %v, want the default 5m refused", err)
	}
}

func TestAProcessorUpstreamThroughAConnectorIsChecked(t *testing.T) {
	err := check(t, collector([]any{"10s"}, "30s", true))
	if err == nil || !strings.Contains(err.Error(), "exporters::sessionstate/api::last_metrics_window 30s: not one of the windows of "+
		"processors::snapshotdiff (10s)") {
		t.Fatalf("Convert = %v, want the exporter behind the forward connector checked", err)
	}
}

// Fed by OTLP from another collector, the exporter's window cannot be checked here.
func TestNoSnapshotdiffNoCheck(t *testing.T) {
	conf := map[string]any{
		"exporters": map[string]any{"sessionstate": map[string]any{"last_metrics_window": "1m"}},
		"service":   map[string]any{"pipelines": map[string]any{"metrics": map[string]any{"receivers": []any{"otlp"}, "exporters": []any{"sessionstate"}}}},
	}
	if err := check(t, conf); err != nil {
		t.Fatal(err)
	}
}

func TestTheShippedConfigurationsPass(t *testing.T) {
	files, err := filepath.Glob("../../config/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no configurations: %v", err)
	}
	for _, f := range files {
		conf, err := confmaptest.LoadConf(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := NewFactory().Create(confmap.ConverterSettings{}).Convert(context.Background(), conf); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// The workloadrules connector reads the session figures over its window:
// one the processor does not compute is refused as the exporter's is.
func TestAWorkloadRulesWindowTheProcessorDoesNotComputeRefusesStartUp(t *testing.T) {
	conf := collector([]any{"10s", "30s"}, "30s", false)
	conf["connectors"] = map[string]any{"workloadrules": map[string]any{"window": "1m"}}
	pipelines := conf["service"].(map[string]any)["pipelines"].(map[string]any)
	pipelines["metrics"].(map[string]any)["exporters"] = []any{"sessionstate", "forward", "workloadrules"}
	pipelines["logs/rules"] = map[string]any{"receivers": []any{"workloadrules"}, "exporters": []any{"debug"}}
	err := check(t, conf)
	want := "connectors::workloadrules::window 1m0s: not one of the windows of processors::snapshotdiff (10s, 30s), which feeds it in pipeline metrics"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Convert = %v, want an error saying %s", err, want)
	}
	conf["connectors"] = map[string]any{"workloadrules": map[string]any{"window": "30s"}}
	if err := check(t, conf); err != nil {
		t.Fatal(err)
	}
}
