// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workloadrulesconnector

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpotel/gpotel/internal/dialect"
)

// queueSessions are one spilling session in etl_queue, one in pg_default
// and one whose queue the receiver could not name.
func queueSessions() []work {
	return []work{{id: 1, queue: "etl_queue", spill: 2 * gib}, {id: 2, queue: "pg_default", spill: 2 * gib}, {id: 3, spill: 2 * gib}}
}

// TestResourceQueueScopeActsOnlyInItsQueue: a rule scoped by resource
// queue acts on the sessions of that queue alone, never on one whose
// queue is unknown.
func TestResourceQueueScopeActsOnlyInItsQueue(t *testing.T) {
	r := spillRule("etl-spill", "cancel", "enforce")
	r.Scope.ResourceQueues = []string{"etl_queue"}
	h := newHarness(t, r)
	h.feed(t, snapshotAt(10, queueSessions()...))
	h.feed(t, snapshotAt(40, queueSessions()...))
	assert.Equal(t, []act{{session: 1, action: "cancel"}}, h.actor.taken())
}

// TestResourceQueueExclusionLeavesOutItsQueueAndUnknownOnes: a rule that
// excludes a queue acts on the other queues' sessions; a session whose
// queue is unknown may be in the excluded one, so it is left alone too.
func TestResourceQueueExclusionLeavesOutItsQueueAndUnknownOnes(t *testing.T) {
	r := spillRule("not-etl", "cancel", "enforce")
	r.Scope.ExcludeResourceQueues = []string{"etl_queue"}
	h := newHarness(t, r)
	h.feed(t, snapshotAt(10, queueSessions()...))
	assert.Equal(t, []act{{session: 2, action: "cancel"}}, h.actor.taken())

	unscoped := newHarness(t, spillRule("all", "cancel", "enforce"))
	unscoped.feed(t, snapshotAt(10, queueSessions()...))
	assert.Len(t, unscoped.actor.taken(), 3, "a rule that names no queue looks at every session, its queue known or not")
}

// TestValidateBoundsResourceQueues: queue names are bounded as every
// scope's names are, and a rule scoped by queue is refused where the
// dialect named has none.
func TestValidateBoundsResourceQueues(t *testing.T) {
	cfg := defaultConfig()
	cfg.Dialect = dialect.GP6
	rule := func(name string, in, out []string) RuleConfig {
		r := RuleConfig{Name: name, When: []string{"gpotel.query.duration > 1s"}, Action: "log"}
		r.Scope.ResourceQueues, r.Scope.ExcludeResourceQueues = in, out
		return r
	}
	many := make([]string, maxScopeNames+1)
	for i := range many {
		many[i] = "q" + strings.Repeat("x", i%60)
	}
	cfg.Rules = []RuleConfig{
		rule("ok", []string{"etl_queue"}, []string{"pg_default"}),
		rule("control", []string{"bad\nqueue"}, nil),
		rule("long", nil, []string{strings.Repeat("q", 64)}),
		rule("empty", []string{""}, nil),
		rule("many", many, nil),
	}
	err := cfg.Validate()
	require.Error(t, err)
	msg := err.Error()
	for _, want := range []string{
		`rules[1] "control": scope: resource_queues: "bad\nqueue": a name is 1 to 63 bytes of UTF-8 without control characters`,
		`rules[2] "long": scope: resource_queues: "qqqq`,
		`rules[3] "empty": scope: resource_queues: "": a name is 1 to 63 bytes`,
		`rules[4] "many": scope: resource_queues: 101 names, more than 100`,
	} {
		assert.Contains(t, msg, want)
	}
	assert.NotContains(t, msg, `"ok"`)

	for _, d := range []dialect.Dialect{dialect.Auto, dialect.GP6, dialect.GP7, dialect.Cloudberry, dialect.PostgreSQL} {
		for _, r := range []RuleConfig{rule("in", []string{"etl_queue"}, nil), rule("out", nil, []string{"etl_queue"})} {
			cfg := defaultConfig()
			cfg.Dialect, cfg.Rules = d, []RuleConfig{r}
			err := cfg.Validate()
			if d != dialect.PostgreSQL {
				assert.NoError(t, err, "%s %s", d, r.Name)
				continue
			}
			require.Error(t, err, "%s %s", d, r.Name)
			assert.Contains(t, err.Error(), "the postgresql dialect has no resource queues")
		}
	}
}

// TestQueueRulesOnAPostgreSQLServerAreSaid: with dialect auto, a server
// found to be PostgreSQL has no queues; the rules scoped by queue are
// named in one warning, and act on nothing.
func TestQueueRulesOnAPostgreSQLServerAreSaid(t *testing.T) {
	r := spillRule("etl-spill", "cancel", "enforce")
	r.Scope.ExcludeResourceQueues = []string{"etl_queue"}
	h := newHarness(t, r, spillRule("other", "log", ""))
	core, logs := observer.New(zapcore.WarnLevel)
	h.conn.logger = zap.New(core)
	for _, sec := range []float64{10, 40} {
		s := snapshotAt(sec, work{id: 1, spill: 2 * gib})
		s.Dialect = string(dialect.PostgreSQL)
		h.feed(t, s)
	}
	assert.Empty(t, h.actor.taken())
	said := logs.FilterMessageSnippet("which has no resource queues")
	require.Equal(t, 1, said.Len(), "once")
	assert.Equal(t, []any{"etl-spill"}, said.All()[0].ContextMap()["rules"])
}
