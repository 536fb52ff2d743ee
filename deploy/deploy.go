// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package deploy holds what an operator puts beside gpotel: the Grafana
// dashboard, the Prometheus rules, the systemd units and the package
// definitions. The Go side only reads the dashboard and the rules back, so
// that tests evaluate exactly the expressions that ship.
package deploy

import (
	"embed"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The shipped files, as operators get them.
const (
	DashboardFile = "grafana/gpotel-overview.json"
	RulesFile     = "prometheus/gpotel-rules.yaml"
	RulesTestFile = "prometheus/gpotel-rules_test.yaml"
)

//go:embed grafana/gpotel-overview.json prometheus/gpotel-rules.yaml
var files embed.FS

// Expression is one PromQL expression that ships, and where it comes from.
type Expression struct {
	// Source says where: "dashboard: <panel> (<refId>)", "record: <name>" or "alert: <name>".
	Source string
	PromQL string
}

type dashboard struct {
	Templating struct {
		List []struct {
			Name    string `json:"name"`
			Current struct {
				Value any `json:"value"`
			} `json:"current"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"` // a collapsed row's panels
	Targets []struct {
		RefID  string `json:"refId"`
		Expr   string `json:"expr"`
		RawSQL string `json:"rawSql"`
	} `json:"targets"`
}

var dashboardVariable = regexp.MustCompile(`\$\{?(\w+)\}?`)

func readDashboard() (dashboard, error) {
	var d dashboard
	b, err := files.ReadFile(DashboardFile)
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("%s: %w", DashboardFile, err)
	}
	return d, nil
}

// DashboardQueries are the dashboard's panel queries with every template
// variable replaced by the dashboard's default value (the window "5m").
func DashboardQueries() ([]Expression, error) {
	d, err := readDashboard()
	if err != nil {
		return nil, err
	}
	defaults := map[string]string{}
	for _, v := range d.Templating.List {
		if s, ok := v.Current.Value.(string); ok {
			defaults[v.Name] = s
		}
	}
	var out []Expression
	var walk func([]panel) error
	walk = func(ps []panel) error {
		for _, p := range ps {
			for _, t := range p.Targets {
				if t.RawSQL != "" {
					continue // a history panel's SQL: DashboardSQL
				}
				var missing []string
				expr := dashboardVariable.ReplaceAllStringFunc(t.Expr, func(m string) string {
					name := dashboardVariable.FindStringSubmatch(m)[1]
					v, ok := defaults[name]
					if !ok {
						missing = append(missing, name)
					}
					return v
				})
				if len(missing) > 0 {
					return fmt.Errorf("%s: panel %q uses variables without a default: %v", DashboardFile, p.Title, missing)
				}
				out = append(out, Expression{Source: fmt.Sprintf("dashboard: %s (%s)", p.Title, t.RefID), PromQL: expr})
			}
			if err := walk(p.Panels); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(d.Panels); err != nil {
		return nil, err
	}
	return out, nil
}

// SQLQuery is one SQL statement of a panel on the history data source
// (PostgreSQL), with Grafana's macros expanded.
type SQLQuery struct {
	Source string // "dashboard: <panel> (<refId>)"
	SQL    string
}

var (
	timeFilterMacro     = regexp.MustCompile(`\$__timeFilter\((\w+)\)`)
	timeGroupAliasMacro = regexp.MustCompile(`\$__timeGroupAlias\((\w+), '(\d+)m'\)`)
)

// DashboardSQL are the dashboard's SQL panel queries with the macros
// they use expanded as Grafana's PostgreSQL data source expands them for
// the time range [from, to].
func DashboardSQL(from, to time.Time) ([]SQLQuery, error) {
	d, err := readDashboard()
	if err != nil {
		return nil, err
	}
	const layout = "2006-01-02T15:04:05Z"
	var out []SQLQuery
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			if t.RawSQL == "" {
				continue
			}
			sql := timeFilterMacro.ReplaceAllString(t.RawSQL, fmt.Sprintf("$1 BETWEEN '%s' AND '%s'", from.UTC().Format(layout), to.UTC().Format(layout)))
			sql = timeGroupAliasMacro.ReplaceAllStringFunc(sql, func(m string) string {
				sub := timeGroupAliasMacro.FindStringSubmatch(m)
				minutes, _ := strconv.Atoi(sub[2])
				return fmt.Sprintf(`floor(extract(epoch from %s)/%d)*%d AS "time"`, sub[1], minutes*60, minutes*60)
			})
			if strings.Contains(sql, "$") {
				return nil, fmt.Errorf("%s: panel %q: a macro or variable left in %q", DashboardFile, p.Title, sql)
			}
			out = append(out, SQLQuery{Source: fmt.Sprintf("dashboard: %s (%s)", p.Title, t.RefID), SQL: sql})
		}
	}
	return out, nil
}

type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Record string `yaml:"record"`
			Alert  string `yaml:"alert"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// RuleExpressions are the recording and alerting rules' expressions.
func RuleExpressions() ([]Expression, error) {
	b, err := files.ReadFile(RulesFile)
	if err != nil {
		return nil, err
	}
	var f ruleFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", RulesFile, err)
	}
	var out []Expression
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			src := "record: " + r.Record
			if r.Alert != "" {
				src = "alert: " + r.Alert
			}
			out = append(out, Expression{Source: src, PromQL: strings.TrimSpace(r.Expr)})
		}
	}
	return out, nil
}

var alertThreshold = regexp.MustCompile(`\s*(>=|<=|==|!=|>|<)\s*([0-9.e+]+)\s*$`)

// WithoutThreshold turns an alert expression "<measure> <op> <number>" into
// "<measure> <op> bool <number>": every series the alert watches, 1 where it
// would fire and 0 elsewhere. ok is false when expr does not end that way.
func WithoutThreshold(expr string) (string, bool) {
	loc := alertThreshold.FindStringSubmatchIndex(expr)
	if loc == nil {
		return expr, false
	}
	op, num := expr[loc[2]:loc[3]], expr[loc[4]:loc[5]]
	return expr[:loc[0]] + " " + op + " bool " + num, true
}
