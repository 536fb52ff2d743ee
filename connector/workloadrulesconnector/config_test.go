// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workloadrulesconnector

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/confmap/xconfmap"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline/events"
)

func defaultConfig() *Config { return createDefaultConfig().(*Config) }

func TestConfigUnmarshals(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub("workloadrules")
	require.NoError(t, err)
	cfg := defaultConfig()
	require.NoError(t, sub.Unmarshal(cfg))
	require.NoError(t, xconfmap.Validate(cfg))
	assert.Equal(t, dialect.GP7, cfg.Dialect)
	assert.Equal(t, time.Minute, cfg.Window)
	assert.Equal(t, "gpotel_actions", cfg.Actions.User)
	assert.Equal(t, 5432, cfg.Actions.Port, "the default port")
	require.Len(t, cfg.Rules, 2)
	assert.Equal(t, []string{"gpotel.query.spill.size > 50GiB"}, cfg.Rules[0].When)
	assert.Equal(t, "small", cfg.Rules[1].ResourceGroup)
	assert.Equal(t, []string{"pg_default"}, cfg.Rules[1].Scope.ExcludeResourceQueues)

	r, err := cfg.compile(&cfg.Rules[0])
	require.NoError(t, err)
	assert.Equal(t, actionCancel, r.action)
	assert.True(t, r.enforce)
	assert.Equal(t, float64(50<<30), r.predicates[0].value)
	r, err = cfg.compile(&cfg.Rules[1])
	require.NoError(t, err)
	assert.False(t, r.enforce, "observe is the default")
	assert.Equal(t, 1800.0, r.predicates[0].value)
	assert.Equal(t, defaultMaxMatches, r.maxMatches)
}

// TestValidateReportsEveryProblem: one Validate names every problem of
// every rule, each with what exists.
func TestValidateReportsEveryProblem(t *testing.T) {
	cfg := defaultConfig()
	cfg.Dialect = dialect.GP7
	cfg.Rules = []RuleConfig{
		{Name: "a", When: []string{"gpotel.query.spill.sise > 50GiB"}, Action: "cancel"},
		{Name: "b", When: []string{"gpotel.query.spill.size > 50GB2"}, Action: "abort"},
		{Name: "c", When: []string{"gpotel.query.duration > 10"}, Action: "log", Mode: "dry-run"},
		{Name: "c", When: []string{"gpotel.query.duration ~ 10s"}, Action: "log"},
		{Name: "e", Action: "log"},
		{Name: "f", When: []string{"gpotel.query.duration > 1s", "gpotel.query.duration > 2s", "gpotel.query.duration > 3s", "gpotel.query.duration > 4s"}, Action: "log"},
	}
	err := cfg.Validate()
	require.Error(t, err)
	msg := err.Error()
	for _, want := range []string{
		`unknown figure "gpotel.query.spill.sise"; the figures are gpotel.query.cpu.run_delay`,
		`"50GB2" has no size unit; the units are KiB, MiB`,
		`action "abort": want log, move, cancel, terminate`,
		`"10" is no duration`,
		`mode "dry-run": want observe (the default) or enforce`,
		`the name "c" is another rule's too`,
		`unknown comparison "~"`,
		`rules[4] "e": when: name one to three predicates`,
		`rules[5] "f": when: 4 predicates, more than 3`,
	} {
		assert.Contains(t, msg, want)
	}
	assert.Len(t, strings.Split(msg, "\n"), 9, msg)
}

// TestMoveRefusedWhereTheDialectCannotMove: a move rule is refused at
// start, saying why, where the server has no resource groups to move to.
func TestMoveRefusedWhereTheDialectCannotMove(t *testing.T) {
	for _, tc := range []struct {
		dialect dialect.Dialect
		manager string
		why     string
	}{
		{dialect.PostgreSQL, "", "the postgresql dialect has no resource groups"},
		{dialect.Auto, "", "move needs the dialect named"},
		{dialect.GP6, "", "with resource queues, its default, it cannot"},
		{dialect.GP6, "queue", "with resource queues, its default, it cannot"},
		{dialect.GP6, "group", ""},
		{dialect.GP7, "", ""},
		{dialect.Cloudberry, "", ""},
	} {
		cfg := defaultConfig()
		cfg.Dialect, cfg.ResourceManager = tc.dialect, tc.manager
		cfg.Rules = []RuleConfig{{Name: "m", When: []string{"gpotel.query.duration > 1h"}, Action: "move", ResourceGroup: "small"}}
		err := cfg.Validate()
		if tc.why == "" {
			assert.NoError(t, err, "%s %s", tc.dialect, tc.manager)
			continue
		}
		require.Error(t, err, "%s %s", tc.dialect, tc.manager)
		assert.Contains(t, err.Error(), tc.why)
	}
}

// TestConfigBoundsHostileInput: names, lists and rates a configuration may
// hold are bounded.
func TestConfigBoundsHostileInput(t *testing.T) {
	cfg := defaultConfig()
	for i := range maxRules + 1 {
		cfg.Rules = append(cfg.Rules, RuleConfig{Name: "r" + strings.Repeat("x", i), When: []string{"gpotel.query.duration > 1s"}, Action: "log"})
	}
	cfg.Rules[0].Name = strings.Repeat("n", 64)
	cfg.Rules[1].Scope.Users = []string{"bad\x1bname"}
	cfg.Rules[2].MaxActionsPerMinute = 100000
	cfg.Rules[3].When = []string{strings.Repeat("x", 300)}
	cfg.Rules[4].Action, cfg.Rules[4].ResourceGroup = "log", "small"
	err := cfg.Validate()
	require.Error(t, err)
	for _, want := range []string{"rules: 26, more than 25", "name: must be 1 to 63 bytes", "a name is 1 to 63 bytes of UTF-8 without control characters",
		"max_actions_per_minute 100000: must be 1 to 600", "longer than 200 bytes", "only action move takes one"} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestParseValueUnits(t *testing.T) {
	for _, tc := range []struct {
		text string
		u    unit
		want float64
	}{
		{"50GiB", unitBytes, 50 << 30}, {"10GB", unitBytes, 10e9}, {"512KiB", unitBytes, 512 << 10}, {"0", unitBytes, 0},
		{"2m", unitSeconds, 120}, {"1h30m", unitSeconds, 5400}, {"0.8", unitNumber, 0.8},
		{"100MiB/s", unitBytesPerSec, 100 << 20},
	} {
		v, err := parseValue(tc.text, tc.u)
		require.NoError(t, err, tc.text)
		assert.Equal(t, tc.want, v, tc.text)
	}
	for _, tc := range []struct {
		text string
		u    unit
	}{{"50", unitBytes}, {"-1GiB", unitBytes}, {"2", unitSeconds}, {"-2m", unitSeconds}, {"NaN", unitNumber}, {"0.8x", unitNumber}, {"100MiB", unitBytesPerSec}} {
		_, err := parseValue(tc.text, tc.u)
		assert.Error(t, err, tc.text)
	}
}

// TestFiguresAreDocumented: every figure a predicate may name is in the
// README's table, with its unit.
func TestFiguresAreDocumented(t *testing.T) {
	readme := readFile(t, "README.md")
	unitWords := [...]string{unitSeconds: "duration", unitBytes: "size", unitBytesPerSec: "size per second", unitNumber: "number"}
	for f := range numFigures {
		row := "| `" + figures[f].name + "` | " + unitWords[figures[f].unit] + " | " + figures[f].brief + " |"
		assert.Contains(t, readme, row)
	}
}

// TestOperationsExampleRulesValidate: the five rules docs/operations.md
// offers to copy parse and validate.
func TestOperationsExampleRulesValidate(t *testing.T) {
	doc := readFile(t, filepath.Join("..", "..", "docs", "operations.md"))
	_, block, ok := strings.Cut(doc, "<!-- BEGIN workload-rules-examples -->\n```yaml\n")
	require.True(t, ok, "no examples block in docs/operations.md")
	block, _, ok = strings.Cut(block, "```\n<!-- END workload-rules-examples -->")
	require.True(t, ok)
	cm, err := confmap.NewRetrievedFromYAML([]byte(block))
	require.NoError(t, err)
	conf, err := cm.AsConf()
	require.NoError(t, err)
	sub, err := conf.Sub("connectors::workloadrules")
	require.NoError(t, err)
	cfg := defaultConfig()
	require.NoError(t, sub.Unmarshal(cfg))
	require.NoError(t, xconfmap.Validate(cfg))
	var names []string
	for _, r := range cfg.Rules {
		names = append(names, r.Name)
	}
	assert.Equal(t, []string{"runaway-spill", "skewed-cpu", "idle-in-transaction", "cpu-hog-under-pressure", "long-report-to-small-group"}, names)
}

// TestFigureNamesAreTheContracts: a figure the rules do not derive
// themselves is named as docs/pipeline.md names it.
func TestFigureNamesAreTheContracts(t *testing.T) {
	doc := readFile(t, filepath.Join("..", "..", "docs", "pipeline.md"))
	for f := range numFigures {
		if !figures[f].derived {
			assert.Contains(t, doc, "`"+figures[f].name+"`", "figure %s", figures[f].name)
		}
	}
}

// TestEventAttributesAreDocumented: every attribute an event carries is
// in the README's table of the event.
func TestEventAttributesAreDocumented(t *testing.T) {
	readme := readFile(t, "README.md")
	_, table, _ := strings.Cut(readme, "## The event")
	table, _, _ = strings.Cut(table, "## Telemetry")
	cfg := defaultConfig()
	cfg.Dialect = dialect.GP7
	rc := RuleConfig{Name: "m", When: []string{"gpotel.query.duration > 1s"}, Action: "move", ResourceGroup: "small"}
	r, err := cfg.compile(&rc)
	require.NoError(t, err)
	tg := target{key: queryKey{ccnt: 3}, queryStart: at(0), user: "u", database: "d", application: "a", group: "g"}
	lrs := plog.NewLogRecordSlice()
	appendEvent(lrs, &firing{rule: r, target: &tg}, outcomeFailed, "why", at(1), 0)
	for k := range lrs.At(0).Attributes().All() {
		assert.Contains(t, table, "`"+k+"`")
	}
	assert.Len(t, events.RuleActionEventFields, lrs.At(0).Attributes().Len(), "every attribute written")
}

// The rules' action connection carries the action role's credentials: one
// that leaves this host without checking the server's certificate is
// refused at start unless insecure says so; on loopback any sslmode goes.
func TestAnUnverifiedActionConnectionBeyondLoopbackIsRefused(t *testing.T) {
	for _, tc := range []struct {
		host, sslmode string
		insecure, ok  bool
	}{
		{"127.0.0.1", "prefer", false, true},
		{"mdw", "prefer", false, false},
		{"mdw", "require", false, false},
		{"mdw", "require", true, true},
		{"mdw", "verify-full", false, true},
	} {
		cfg := defaultConfig()
		cfg.Dialect = dialect.GP7
		cfg.Actions.Host, cfg.Actions.Database, cfg.Actions.User = tc.host, "postgres", "gpotel_actions"
		cfg.Actions.SSLMode, cfg.Actions.Insecure = tc.sslmode, tc.insecure
		cfg.Rules = []RuleConfig{{Name: "a", When: []string{"gpotel.query.duration > 10s"}, Action: "cancel", Mode: "enforce"}}
		err := cfg.Validate()
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "actions::insecure: true")) {
			t.Errorf("host %s, sslmode %s, insecure %v: %v; want accepted %v, else actions::insecure named", tc.host, tc.sslmode, tc.insecure, err, tc.ok)
		}
	}
}

// TestConfigRefusesC1ControlCharacters: a name with a C1 control character
// (U+0080–U+009F: U+009B is a terminal's CSI) is refused as one with a C0
// one is, in the rule's name, its resource group and its scope lists.
func TestConfigRefusesC1ControlCharacters(t *testing.T) {
	csi := "bad\u009bname"
	cfg := defaultConfig()
	cfg.Dialect, cfg.ResourceManager = dialect.GP6, "group"
	cfg.Rules = []RuleConfig{
		{Name: csi, When: []string{"gpotel.query.duration > 1s"}, Action: "log"},
		{Name: "move", When: []string{"gpotel.query.duration > 1s"}, Action: "move", ResourceGroup: csi},
		{Name: "scoped", When: []string{"gpotel.query.duration > 1s"}, Action: "log", Scope: ScopeConfig{Users: []string{csi}}},
	}
	err := cfg.Validate()
	require.Error(t, err)
	for _, want := range []string{"name: must be 1 to 63 bytes of UTF-8 without control characters",
		"resource_group: must be 1 to 63 bytes of UTF-8 without control characters", "a name is 1 to 63 bytes of UTF-8 without control characters"} {
		assert.Contains(t, err.Error(), want)
	}
}
