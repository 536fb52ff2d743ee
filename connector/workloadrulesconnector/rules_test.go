// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workloadrulesconnector

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpotel/gpotel/connector/workloadrulesconnector/internal/metadatatest"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/ownbackends"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/sessionaction"
)

func spillRule(name, action, mode string) RuleConfig {
	return RuleConfig{Name: name, When: []string{"gpotel.query.spill.size > 1GiB"}, Action: action, Mode: mode}
}

// TestRuleHoldsForItsDuration: predicates true for less than `for` do
// nothing; true for longer act once.
func TestRuleHoldsForItsDuration(t *testing.T) {
	r := spillRule("spill", "cancel", "enforce")
	r.For = 2 * time.Minute
	h := newHarness(t, r)
	// Session 1 spills from 10 s to 100 s (90 s < 2m), then not; session 2
	// spills from 10 s on.
	for _, sec := range []float64{10, 40, 70, 100, 130, 160, 190} {
		one := work{id: 1, spill: 2 * gib}
		if sec > 100 {
			one.spill = 0
		}
		h.feed(t, snapshotAt(sec, one, work{id: 2, spill: 2 * gib}))
		if sec < 130 {
			assert.Empty(t, h.actor.taken(), "at %vs, before the rule held for 2m", sec)
		}
	}
	assert.Equal(t, []act{{session: 2, action: "cancel"}}, h.actor.taken(), "once, on the query that held for 2m")
	evs := h.events()
	require.Len(t, evs, 1)
	assert.Equal(t, events.EventRuleAction, evs[0].EventName())
	assert.Equal(t, at(130), evs[0].Timestamp().AsTime())
	assert.Equal(t, "done", attr(evs[0], events.AttrRuleOutcome))
	assert.Equal(t, "2", attr(evs[0], "gpotel.session.id"))
	assert.Equal(t, `["gpotel.query.spill.size > 1GiB"]`, attr(evs[0], events.AttrRulePredicates))
	assert.Equal(t, "[2147483648]", attr(evs[0], events.AttrRuleValues))
}

// TestObserveModeActsOnNothing: a rule in observe mode (the default) says
// what it would do and does nothing.
func TestObserveModeActsOnNothing(t *testing.T) {
	h := newHarness(t, spillRule("spill", "terminate", ""))
	h.feed(t, snapshotAt(10, work{id: 1, spill: 2 * gib}))
	h.feed(t, snapshotAt(40, work{id: 1, spill: 3 * gib}))
	assert.Empty(t, h.actor.taken())
	evs := h.events()
	require.Len(t, evs, 1, "one firing per query per rule")
	assert.Equal(t, "observe", attr(evs[0], events.AttrRuleMode))
	assert.Equal(t, "terminate", attr(evs[0], events.AttrRuleAction))
	assert.Equal(t, "observed", attr(evs[0], events.AttrRuleOutcome))
	assert.Equal(t, "observe mode: would terminate", attr(evs[0], events.AttrRuleOutcomeDetail))
}

// TestMostSevereRuleWins: of the rules that fire on one query at once the
// most severe acts (terminate > cancel > move > log), ties by name; the
// others say they were superseded.
func TestMostSevereRuleWins(t *testing.T) {
	onlyBob := spillRule("c-terminate", "terminate", "enforce")
	onlyBob.Scope.Users = []string{"bob"}
	h := newHarness(t,
		spillRule("a-log", "log", "enforce"),
		spillRule("z-cancel", "cancel", "enforce"),
		onlyBob,
		spillRule("b-cancel", "cancel", "enforce"),
	)
	h.feed(t, snapshotAt(10, work{id: 1, user: "bob", spill: 2 * gib}, work{id: 2, spill: 2 * gib}))
	assert.ElementsMatch(t, []act{{session: 1, action: "terminate"}, {session: 2, action: "cancel"}}, h.actor.taken())
	outcome := map[[2]string]string{}
	for _, e := range h.events() {
		outcome[[2]string{attr(e, "gpotel.session.id"), attr(e, events.AttrRuleName)}] = attr(e, events.AttrRuleOutcome) + " " + attr(e, events.AttrRuleOutcomeDetail)
	}
	assert.Equal(t, map[[2]string]string{
		{"1", "c-terminate"}: "done ",
		{"1", "b-cancel"}:    "superseded rule c-terminate (terminate) acted on the query",
		{"1", "z-cancel"}:    "superseded rule c-terminate (terminate) acted on the query",
		{"1", "a-log"}:       "superseded rule c-terminate (terminate) acted on the query",
		{"2", "b-cancel"}:    "done ",
		{"2", "z-cancel"}:    "superseded rule b-cancel (cancel) acted on the query",
		{"2", "a-log"}:       "superseded rule b-cancel (cancel) acted on the query",
	}, outcome)
	h.feed(t, snapshotAt(40, work{id: 1, user: "bob", spill: 2 * gib}, work{id: 2, spill: 2 * gib}))
	assert.Len(t, h.actor.taken(), 2, "one action per query per rule")

	move := spillRule("z-move", "move", "enforce")
	move.ResourceGroup = "small"
	h = newHarness(t, spillRule("a-log", "log", "enforce"), move)
	h.feed(t, snapshotAt(10, work{id: 3, spill: 2 * gib}))
	assert.Equal(t, []act{{session: 3, action: "move", group: "small"}}, h.actor.taken(), "move before log")
}

// TestRuleRateLimitAndBreakerHold: a rule that matches more than its
// max_matches sessions at once acts on none; past its
// max_actions_per_minute it waits for the next minute.
func TestRuleRateLimitAndBreakerHold(t *testing.T) {
	breaker := spillRule("breaker", "cancel", "enforce")
	breaker.MaxMatches = 3
	breaker.Scope.Users = []string{"bob"}
	limited := spillRule("limited", "cancel", "enforce")
	limited.MaxActionsPerMinute = 2
	limited.Scope.Users = []string{"carol"}
	h := newHarness(t, breaker, limited)
	var sessions []work
	for i := range int64(4) {
		sessions = append(sessions, work{id: 10 + i, user: "bob", spill: 2 * gib})
	}
	for i := range int64(3) {
		sessions = append(sessions, work{id: 20 + i, user: "carol", spill: 2 * gib})
	}
	h.feed(t, snapshotAt(10, sessions...))
	assert.Equal(t, []act{{session: 20, action: "cancel"}, {session: 21, action: "cancel"}}, h.actor.taken(),
		"none of bob's four (max_matches 3); two of carol's three (2 a minute)")
	h.feed(t, snapshotAt(25, sessions...))
	assert.Len(t, h.actor.taken(), 2, "15 s later: half a token")
	h.feed(t, snapshotAt(40, sessions...))
	assert.Equal(t, act{session: 22, action: "cancel"}, h.actor.taken()[2], "30 s later the third")
	assert.Len(t, h.actor.taken(), 3)
	h.feed(t, snapshotAt(55, sessions[1:]...))
	assert.Equal(t, []act{{session: 11, action: "cancel"}, {session: 12, action: "cancel"}, {session: 13, action: "cancel"}}, h.actor.taken()[3:],
		"bob's down to three: the breaker lets them through")
}

// TestRulesNeverActOnAStaleViewOrOwnSessions: no rule acts on a snapshot
// older than max_view_age, on the collector's own sessions, on system
// processes, or on a superuser's session unless the rule names the
// superuser.
func TestRulesNeverActOnAStaleViewOrOwnSessions(t *testing.T) {
	named := spillRule("gpadmin-spill", "cancel", "enforce")
	named.Scope.Users = []string{"gpadmin"}
	h := newHarness(t, spillRule("spill", "cancel", "enforce"), named)
	// The clock two minutes past the snapshots: older than max_view_age 1m.
	h.now = at(130)
	for _, sec := range []float64{10, 12} {
		require.NoError(t, h.proc.ConsumeMetrics(t.Context(), snapshotAt(sec, work{id: 1, spill: 2 * gib}).Metrics()))
	}
	assert.Empty(t, h.actor.taken(), "a view older than max_view_age")
	assert.Empty(t, h.events())

	h.feed(t, snapshotAt(40, work{id: 2, spill: 2 * gib, own: true}, work{id: 3, spill: 2 * gib, system: true},
		work{id: 4, user: "gpadmin", spill: 2 * gib}, work{id: 5, user: "postgres", spill: 2 * gib}))
	assert.Equal(t, []act{{session: 4, action: "cancel"}}, h.actor.taken(),
		"not its own, not a system process, a superuser only by the rule that names it")
}

// TestAbsentFigureSatisfiesNoPredicate: a session that runs no query has
// no query figures, and "less than" does not make them 0.
func TestAbsentFigureSatisfiesNoPredicate(t *testing.T) {
	h := newHarness(t, RuleConfig{Name: "small-spill", When: []string{"gpotel.query.spill.size < 1GiB"}, Action: "log", Mode: "enforce"})
	h.feed(t, snapshotAt(10, work{id: 1, state: "idle"}, work{id: 2, spill: 1 << 20}))
	evs := h.events()
	require.Len(t, evs, 1)
	assert.Equal(t, "2", attr(evs[0], "gpotel.session.id"))
	assert.Equal(t, "logged", attr(evs[0], events.AttrRuleOutcome))
}

// TestIdleInTransactionTimeIsOnlyInATransaction: the idle-in-transaction
// figure is the time since state_change of a session idle in a
// transaction, and absent for one idle outside a transaction.
func TestIdleInTransactionTimeIsOnlyInATransaction(t *testing.T) {
	h := newHarness(t, RuleConfig{Name: "idle-in-tx", When: []string{"gpotel.session.idle_in_transaction.time > 5m"}, Action: "terminate", Mode: "enforce"})
	sessions := []work{{id: 1, state: "idle in transaction"}, {id: 2, state: "idle"}, {id: 3, state: "idle in transaction (aborted)"}}
	h.feed(t, snapshotAt(200, sessions...))
	assert.Empty(t, h.actor.taken(), "idle in a transaction 199 s")
	h.feed(t, snapshotAt(302, sessions...))
	assert.Equal(t, []act{{session: 1, action: "terminate"}, {session: 3, action: "terminate"}}, h.actor.taken())
	assert.Equal(t, "[301]", attr(h.events()[0], events.AttrRuleValues))
}

// TestWindowNoneOfTheProcessorsIsSaid: a window the processor does not
// compute leaves every session figure over it absent, and the connector
// says so once.
func TestWindowNoneOfTheProcessorsIsSaid(t *testing.T) {
	h := newHarness(t, RuleConfig{Name: "cpu", When: []string{"gpotel.session.cpu.time.rate > 0"}, Action: "log"})
	core, logs := observer.New(zapcore.WarnLevel)
	h.conn.logger = zap.New(core)
	h.conn.reader.windows.Last = 7 * time.Minute
	h.feed(t, snapshotAt(10, work{id: 1, cpu: 1}))
	h.feed(t, snapshotAt(40, work{id: 1, cpu: 20}))
	assert.Empty(t, h.events())
	assert.Equal(t, 1, logs.FilterMessageSnippet("none of the snapshotdiff processor's windows").Len())

	right := newHarness(t, RuleConfig{Name: "cpu", When: []string{"gpotel.session.cpu.time.rate > 0"}, Action: "log"})
	right.feed(t, snapshotAt(10, work{id: 1, cpu: 1}))
	right.feed(t, snapshotAt(40, work{id: 1, cpu: 20}))
	require.Len(t, right.events(), 1, "over the processor's window the figure is there")
	assert.Equal(t, "[0.6333333333333333]", attr(right.events()[0], events.AttrRuleValues), "19 s of CPU in 30 s")
}

// TestAClockThatWentBackRestartsTheHold: a snapshot older than the hold's
// start (the wall clock stepped back) starts the hold again from it,
// rather than waiting for the clock to pass the old start.
func TestAClockThatWentBackRestartsTheHold(t *testing.T) {
	cfg := defaultConfig()
	rc := spillRule("spill", "cancel", "enforce")
	rc.For = time.Minute
	r, err := cfg.compile(&rc)
	require.NoError(t, err)
	e := newEngine([]*rule{r})
	v := view{targets: []target{{key: queryKey{start: 1}, user: "alice"}}}
	v.targets[0].set(querySpillSize, 2*gib)
	fired := func(sec float64) int {
		v.time = at(sec)
		return len(e.evaluate(&v).firings)
	}
	assert.Zero(t, fired(10))
	assert.Zero(t, fired(40))
	assert.Zero(t, fired(-100), "the clock went back: the hold starts again")
	assert.Zero(t, fired(-70))
	assert.Equal(t, 1, fired(-40), "held a minute since the step")
}

// TestEnforcingRuleNeedsTheActionConnection: a rule that would cancel,
// terminate or move in enforce mode is refused at start without the
// action connection, naming the rule; observing or logging needs none.
func TestEnforcingRuleNeedsTheActionConnection(t *testing.T) {
	cfg := defaultConfig()
	cfg.Rules = []RuleConfig{spillRule("spill", "cancel", "enforce"), spillRule("spill-log", "log", "enforce"), spillRule("spill-watch", "terminate", "observe")}
	err := cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `actions::host "": must be set`)
	assert.Contains(t, err.Error(), "rules [spill] act on the server")
	assert.NotContains(t, err.Error(), "spill-log")
	cfg.Rules = cfg.Rules[1:]
	require.NoError(t, cfg.Validate())
	cfg.Rules = append(cfg.Rules, spillRule("spill", "cancel", "enforce"))
	cfg.Actions.Host, cfg.Actions.Database, cfg.Actions.User = "/tmp", "postgres", "gpotel_actions"
	require.NoError(t, cfg.Validate())
}

// fakeServer is the server's side of the action path in a unit test: it
// records each statement the path would send, and does it.
type fakeServer struct{ sent []string }

func (f *fakeServer) Cancel(_ context.Context, b sessionaction.Backend, queryStart time.Time) (bool, error) {
	f.sent = append(f.sent, fmt.Sprintf("cancel pid %d started %s sess %d query %s", b.PID, b.Started.Format(time.RFC3339), b.SessID, queryStart.Format(time.RFC3339)))
	return true, nil
}

func (f *fakeServer) Terminate(_ context.Context, b sessionaction.Backend) (bool, error) {
	f.sent = append(f.sent, fmt.Sprintf("terminate pid %d started %s sess %d", b.PID, b.Started.Format(time.RFC3339), b.SessID))
	return true, nil
}

func (f *fakeServer) Move(_ context.Context, b sessionaction.Backend, group string) (bool, error) {
	f.sent = append(f.sent, fmt.Sprintf("move pid %d to %s", b.PID, group))
	return true, nil
}

// TestRulesActThroughTheSharedActionPath: an enforcing rule acts through
// the ActionService's action path on the backend the snapshot saw (its
// pid, backend_start and, for a cancel, its query's start), once, and
// never on one of the collector's own backends.
func TestRulesActThroughTheSharedActionPath(t *testing.T) {
	server := &fakeServer{}
	h := newHarness(t, spillRule("spill", "cancel", "enforce"))
	h.conn.actor = &actionPath{actor: sessionaction.NewWithSignaller(server, time.Minute), now: func() time.Time { return h.now }}
	h.feed(t, snapshotAt(10, work{id: 1, spill: 2 * gib}))
	h.feed(t, snapshotAt(20, work{id: 1, spill: 2 * gib}))
	want := fmt.Sprintf("cancel pid 1001 started %s sess 1 query %s", at(-10).Format(time.RFC3339), at(0).Format(time.RFC3339))
	assert.Equal(t, []string{want}, server.sent)
	var outcomes []string
	for _, lr := range h.events() {
		outcomes = append(outcomes, attr(lr, events.AttrRuleName)+": "+attr(lr, events.AttrRuleOutcome))
	}
	assert.Equal(t, []string{"spill: " + outcomeDone}, outcomes)

	var own ownbackends.Pool
	own.Add(1002, 0, "gpotel test")
	defer own.Remove(1002)
	h.feed(t, snapshotAt(30, work{id: 2, spill: 2 * gib}))
	h.feed(t, snapshotAt(40, work{id: 2, spill: 2 * gib}))
	assert.Len(t, server.sent, 1, "the collector's own backend is never signalled")
}

// TestTelemetryCountsFiringsAndRefusals: the connector's own counters say
// what the rules did and what they held back.
func TestTelemetryCountsFiringsAndRefusals(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	breaker := spillRule("breaker", "cancel", "enforce")
	breaker.MaxMatches = 1
	cfg := defaultConfig()
	cfg.Dialect, cfg.Window, cfg.MaxViewAge = dialect.GP7, time.Minute, time.Minute
	cfg.Rules = []RuleConfig{spillRule("observe", "terminate", ""), breaker}
	c, err := newWorkloadRules(cfg, metadatatest.NewSettings(tt), new(consumertest.LogsSink), &recordingActor{})
	require.NoError(t, err)
	c.now = func() time.Time { return at(10) }
	require.NoError(t, c.ConsumeMetrics(t.Context(), processed(t, snapshotAt(10, work{id: 1, spill: 2 * gib}, work{id: 2, spill: 2 * gib}))))
	metadatatest.AssertEqualWorkloadrulesSnapshots(t, tt, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualWorkloadrulesFirings(t, tt, []metricdata.DataPoint[int64]{
		{Value: 2, Attributes: attribute.NewSet(attribute.String("action", "terminate"), attribute.String("outcome", "observed"))},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualWorkloadrulesRefusals(t, tt, []metricdata.DataPoint[int64]{
		{Value: 2, Attributes: attribute.NewSet(attribute.String("reason", "breaker"))},
	}, metricdatatest.IgnoreTimestamp())
}
