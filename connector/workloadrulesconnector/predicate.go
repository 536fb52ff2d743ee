// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workloadrulesconnector

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// comparison is a predicate's operator.
type comparison uint8

const (
	greater comparison = iota
	greaterOrEqual
	less
	lessOrEqual
)

var comparisonNames = [...]string{greater: ">", greaterOrEqual: ">=", less: "<", lessOrEqual: "<="}

// predicate is one "figure comparison value" of a rule, the value in the
// figure's unit (seconds, bytes, bytes per second, a number).
type predicate struct {
	figure figure
	cmp    comparison
	value  float64
	text   string // as configured, for events and messages
}

// holds tells whether v satisfies the predicate.
func (p *predicate) holds(v float64) bool {
	switch p.cmp {
	case greater:
		return v > p.value
	case greaterOrEqual:
		return v >= p.value
	case less:
		return v < p.value
	default:
		return v <= p.value
	}
}

// maxPredicateBytes bounds a predicate's text: the longest figure name,
// an operator and a value fit well within it.
const maxPredicateBytes = 200

// parsePredicate reads "figure comparison value", e.g.
// "gpotel.query.spill.size > 50GiB".
func parsePredicate(text string) (predicate, error) {
	if len(text) > maxPredicateBytes {
		return predicate{}, fmt.Errorf("%.40q…: longer than %d bytes", text, maxPredicateBytes)
	}
	fields := strings.Fields(text)
	if len(fields) != 3 {
		return predicate{}, fmt.Errorf("%q: want \"<figure> <comparison> <value>\", e.g. \"gpotel.query.spill.size > 50GiB\"", text)
	}
	p := predicate{text: strings.Join(fields, " ")}
	f, ok := figureByName(fields[0])
	if !ok {
		return predicate{}, fmt.Errorf("%q: unknown figure %q; the figures are %s", text, fields[0], figureNames())
	}
	p.figure = f
	cmp := -1
	for c, name := range comparisonNames {
		if fields[1] == name {
			cmp = c
		}
	}
	if cmp < 0 {
		return predicate{}, fmt.Errorf("%q: unknown comparison %q; want >, >=, < or <=", text, fields[1])
	}
	p.cmp = comparison(cmp)
	v, err := parseValue(fields[2], figures[f].unit)
	if err != nil {
		return predicate{}, fmt.Errorf("%q: %s takes %s: %w", text, figures[f].name, unitNames[figures[f].unit], err)
	}
	p.value = v
	return p, nil
}

// byteUnits are the size suffixes a value may carry, longest first so
// that "MiB" is not read as "B".
var byteUnits = []struct {
	suffix string
	bytes  float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

func byteUnitNames() string {
	names := make([]string, len(byteUnits))
	for i, u := range byteUnits {
		names[i] = u.suffix
	}
	return strings.Join(names, ", ")
}

// parseValue reads a value in the unit u.
func parseValue(s string, u unit) (float64, error) {
	switch u {
	case unitSeconds:
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%q is no duration (units ns, us, ms, s, m, h)", s)
		}
		if d < 0 {
			return 0, fmt.Errorf("%q is negative", s)
		}
		return d.Seconds(), nil
	case unitBytesPerSec:
		size, ok := strings.CutSuffix(s, "/s")
		if !ok {
			return 0, fmt.Errorf("%q has no /s", s)
		}
		return parseSize(size)
	case unitBytes:
		return parseSize(s)
	default:
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("%q is no finite number", s)
		}
		return v, nil
	}
}

// parseSize reads a size with its unit; 0 alone needs none.
func parseSize(s string) (float64, error) {
	if s == "0" {
		return 0, nil
	}
	for _, u := range byteUnits {
		number, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(number, 64)
		if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v*u.bytes, 0) {
			return 0, fmt.Errorf("%q: %q is no non-negative number of %s a float64 holds", s, number, u.suffix)
		}
		return v * u.bytes, nil
	}
	return 0, fmt.Errorf("%q has no size unit; the units are %s", s, byteUnitNames())
}
