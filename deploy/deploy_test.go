// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// promtool comes from Debian's prometheus package (.ci/run installs it).
func promtool(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (apt-get install prometheus): %v", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = "prometheus"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestRulesPassPromtoolCheck(t *testing.T) {
	out := promtool(t, "check", "rules", strings.TrimPrefix(RulesFile, "prometheus/"))
	t.Log(out)
}

func TestRulesPassTheirUnitTests(t *testing.T) {
	out := promtool(t, "test", "rules", strings.TrimPrefix(RulesTestFile, "prometheus/"))
	t.Log(out)
}

func TestEveryAlertEndsInOneThreshold(t *testing.T) {
	rules, err := RuleExpressions()
	if err != nil {
		t.Fatal(err)
	}
	alerts := 0
	for _, r := range rules {
		if !strings.HasPrefix(r.Source, "alert: ") {
			continue
		}
		alerts++
		if _, ok := WithoutThreshold(r.PromQL); !ok {
			t.Errorf("%s: %q does not end in <comparison> <number>", r.Source, r.PromQL)
		}
	}
	if alerts < 5 {
		t.Errorf("%d alerts; want agent down, session partial, CPU, tick late and memory", alerts)
	}
}

func TestWithoutThresholdKeepsEverySeries(t *testing.T) {
	for in, want := range map[string]string{
		"gpotel_host_up_ratio < 1":         "gpotel_host_up_ratio < bool 1",
		"a{x=\"5m\"} > 17179869184":        "a{x=\"5m\"} > bool 17179869184",
		"time() - max(timestamp(a)) >= 45": "time() - max(timestamp(a)) >= bool 45",
	} {
		if got, ok := WithoutThreshold(in); !ok || got != want {
			t.Errorf("WithoutThreshold(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if _, ok := WithoutThreshold("sum(a)"); ok {
		t.Error("an expression without a threshold was accepted")
	}
}

func TestDashboardQueriesUseTheDefaultWindow(t *testing.T) {
	qs, err := DashboardQueries()
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) < 15 {
		t.Fatalf("%d dashboard queries; the dashboard has lost panels", len(qs))
	}
	for _, q := range qs {
		if strings.Contains(q.PromQL, "$") {
			t.Errorf("%s: a variable is left in %q", q.Source, q.PromQL)
		}
	}
}

func TestDashboardHasTheHistoryPanels(t *testing.T) {
	from := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	qs, err := DashboardSQL(from, from.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) < 2 {
		t.Fatalf("%d SQL panel queries; want the top queries table and CPU by user", len(qs))
	}
	for _, q := range qs {
		if !strings.Contains(q.SQL, "gpotel_history.queries") {
			t.Errorf("%s reads no history table: %s", q.Source, q.SQL)
		}
	}
}
