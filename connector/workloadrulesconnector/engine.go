// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workloadrulesconnector

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// firing is one rule firing on one target of a snapshot.
type firing struct {
	rule   *rule
	target *target
	values [maxPredicates]float64 // each predicate's figure when it fired
	// supersededBy is the rule that acted on the query instead; nil for
	// the one that acts.
	supersededBy *rule
}

// trip is a rule that acted on nothing in a snapshot, and why.
type trip struct {
	rule    *rule
	reason  string // breaker or rate_limit
	matches int
}

// result is what one evaluation decided.
type result struct {
	firings []firing // winners and the rules they superseded, by target
	trips   []trip
}

// engine evaluates the rules snapshot after snapshot: it keeps, per rule,
// how long each query has matched and whether the rule fired on it, and
// the rule's rate-limit bucket.
type engine struct {
	rules []*rule
	state []ruleState
	gen   uint64

	candidates []firing // this snapshot's, reused
	out        result
	live       map[queryKey]struct{}
}

type ruleState struct {
	held map[queryKey]holding
	// tokens is the rule's rate-limit bucket (actions it may still take),
	// refilled at perMinute a minute of snapshot time up to perMinute.
	tokens float64
	filled time.Time
	// matches and tripped are this evaluation's: the firings due, and
	// whether they were more than max_matches.
	matches int
	tripped bool
}

// holding is one query a rule's predicates hold on.
type holding struct {
	since time.Time // the first snapshot of the current unbroken match
	gen   uint64    // the last evaluation the predicates held in
	fired bool      // the rule fired on it: never again while it lives
}

func newEngine(rules []*rule) *engine {
	e := &engine{rules: rules, state: make([]ruleState, len(rules)), live: map[queryKey]struct{}{}}
	for i, r := range rules {
		r.index = i
		e.state[i] = ruleState{held: map[queryKey]holding{}, tokens: float64(r.perMinute)}
	}
	return e
}

// evaluate runs every rule over the view's targets. The result's slices
// are the engine's until the next call.
func (e *engine) evaluate(v *view) *result {
	e.gen++
	now := v.time
	e.candidates = e.candidates[:0]
	e.out.firings, e.out.trips = e.out.firings[:0], e.out.trips[:0]
	// Target by target, every rule: a target's figures stay in the cache.
	for j := range v.targets {
		t := &v.targets[j]
		for i, r := range e.rules {
			values, ok := r.match(t)
			if !ok || !r.scope.admits(t) {
				continue
			}
			st := &e.state[i]
			h, known := st.held[t.key]
			switch {
			case known && h.fired:
				h.gen = e.gen
				st.held[t.key] = h
				continue
			case !known || h.gen != e.gen-1 || h.since.After(now):
				// A new match, one broken since, or a clock that went back.
				h = holding{since: now}
			}
			h.gen = e.gen
			st.held[t.key] = h
			if now.Sub(h.since) >= r.hold {
				e.candidates = append(e.candidates, firing{rule: r, target: t, values: values})
				st.matches++
			}
		}
	}
	tripped := false
	for i, r := range e.rules {
		st := &e.state[i]
		if st.tripped = st.matches > r.maxMatches; st.tripped {
			e.out.trips = append(e.out.trips, trip{rule: r, reason: reasonBreaker, matches: st.matches})
			tripped = true
		}
		st.matches = 0
	}
	if tripped {
		e.candidates = slices.DeleteFunc(e.candidates, func(f firing) bool { return e.state[f.rule.index].tripped })
	}
	e.resolve(now)
	e.sweep(v)
	return &e.out
}

// match tells whether every predicate holds on the target, with the
// figures it compared.
func (r *rule) match(t *target) (values [maxPredicates]float64, ok bool) {
	for i := range r.predicates {
		p := &r.predicates[i]
		v, present := t.value(p.figure)
		if !present || !p.holds(v) {
			return values, false
		}
		values[i] = v
	}
	return values, true
}

// resolve keeps, per query, the most severe rule's firing (ties by rule
// name), spends the winner's rate-limit token and marks the rules fired.
func (e *engine) resolve(now time.Time) {
	slices.SortFunc(e.candidates, func(a, b firing) int {
		return cmp.Or(
			cmp.Compare(a.target.key.session.TmID, b.target.key.session.TmID),
			cmp.Compare(a.target.key.session.ID, b.target.key.session.ID),
			cmp.Compare(b.rule.action, a.rule.action), // the most severe first
			strings.Compare(a.rule.name, b.rule.name))
	})
	for i := 0; i < len(e.candidates); {
		end := i + 1
		for end < len(e.candidates) && e.candidates[end].target == e.candidates[i].target {
			end++
		}
		winner := e.candidates[i].rule
		if e.take(winner, now) {
			for k := i; k < end; k++ {
				f := e.candidates[k]
				if k > i {
					f.supersededBy = winner
				}
				e.markFired(f.rule, f.target.key)
				e.out.firings = append(e.out.firings, f)
			}
		}
		i = end
	}
}

// take spends one of the rule's rate-limit tokens; false (and a trip) when
// none is left.
func (e *engine) take(r *rule, now time.Time) bool {
	st := &e.state[r.index]
	if elapsed := now.Sub(st.filled); elapsed > 0 {
		st.tokens = min(float64(r.perMinute), st.tokens+elapsed.Minutes()*float64(r.perMinute))
	}
	st.filled = now
	if st.tokens >= 1 {
		st.tokens--
		return true
	}
	if n := len(e.out.trips); n > 0 && e.out.trips[n-1].rule == r && e.out.trips[n-1].reason == reasonRateLimit {
		e.out.trips[n-1].matches++
	} else {
		e.out.trips = append(e.out.trips, trip{rule: r, reason: reasonRateLimit, matches: 1})
	}
	return false
}

func (e *engine) markFired(r *rule, k queryKey) {
	st := &e.state[r.index]
	h := st.held[k]
	h.fired = true
	st.held[k] = h
}

// sweep forgets matches that broke (unless the rule fired on them) and
// fired queries that are gone.
func (e *engine) sweep(v *view) {
	liveBuilt := false
	for i := range e.state {
		for k, h := range e.state[i].held {
			if h.gen == e.gen {
				continue
			}
			if !h.fired {
				delete(e.state[i].held, k)
				continue
			}
			if !liveBuilt {
				clear(e.live)
				for j := range v.targets {
					e.live[v.targets[j].key] = struct{}{}
				}
				liveBuilt = true
			}
			if _, ok := e.live[k]; !ok {
				delete(e.state[i].held, k)
			}
		}
	}
}

// The reasons a rule acted on nothing (the telemetry's reason attribute).
const (
	reasonStaleView = "stale_view"
	reasonBreaker   = "breaker"
	reasonRateLimit = "rate_limit"
)
