// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workloadrulesconnector

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/gpotel/gpotel/connector/workloadrulesconnector/internal/metadata"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline"
)

// scopeName is the instrumentation scope of the events.
const scopeName = "github.com/gpotel/gpotel/connector/workloadrulesconnector"

// workloadRules evaluates the rules over each snapshot the processor
// closes, acts through its Actor and hands on one gpotel.rule.action event
// per firing. Snapshots are evaluated one at a time.
type workloadRules struct {
	component.StartFunc
	cfg       *Config
	next      consumer.Logs
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder
	actor     Actor
	now       func() time.Time

	mu       sync.Mutex
	reader   *viewReader
	engine   *engine
	view     view
	previous time.Time // the snapshot before, for the collection interval
	// warnedWindow: the warning that window is none of the processor's was given.
	warnedWindow bool
	// queueRules name the rules scoped by resource queue; warnedQueues:
	// the warning that the server has none was given.
	queueRules   []string
	warnedQueues bool
}

func newWorkloadRules(cfg *Config, set connector.Settings, next consumer.Logs, actor Actor) (*workloadRules, error) {
	rules := make([]*rule, 0, len(cfg.Rules))
	var needs decoders
	var queueRules []string
	for i := range cfg.Rules {
		r, err := cfg.compile(&cfg.Rules[i])
		if err != nil {
			return nil, err // Validate has refused it already
		}
		rules = append(rules, r)
		if r.scope.queues.named() {
			queueRules = append(queueRules, r.name)
		}
		for _, p := range r.predicates {
			needs |= p.figure.source()
		}
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &workloadRules{cfg: cfg, next: next, logger: set.Logger, telemetry: tb, actor: actor, now: time.Now, queueRules: queueRules,
		reader: newViewReader(needs, cfg.Window, cfg.Superusers), engine: newEngine(rules)}, nil
}

// Shutdown closes the action connection.
func (c *workloadRules) Shutdown(context.Context) error {
	if p, ok := c.actor.(*actionPath); ok {
		p.close()
	}
	return nil
}

func (*workloadRules) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

// ConsumeMetrics evaluates the rules over a batch that closes a snapshot;
// other batches it reads past.
func (c *workloadRules) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.reader.read(md, &c.view) {
		return nil
	}
	c.telemetry.WorkloadrulesSnapshots.Add(ctx, 1)
	v := &c.view
	if c.reader.windowMissing > 0 && !c.warnedWindow {
		c.warnedWindow = true
		c.logger.Warn("workload rules: the session figures have no point of window; "+
			"it is none of the snapshotdiff processor's windows, so no session figure over it satisfies a predicate",
			zap.Duration("window", c.cfg.Window), zap.Int("sessions", c.reader.windowMissing))
	}
	// With dialect auto the server is known only now: Validate could not refuse these.
	if len(c.queueRules) > 0 && v.dialect == string(dialect.PostgreSQL) && !c.warnedQueues {
		c.warnedQueues = true
		c.logger.Warn("workload rules: the server is PostgreSQL, which has no resource queues: the rules scoped by resource queue look at no session",
			zap.Strings("rules", c.queueRules))
	}
	interval := v.time.Sub(c.previous)
	first := c.previous.IsZero()
	c.previous = v.time
	if why := c.stale(v, interval, first); why != "" {
		c.logger.Warn("workload rules: acting on nothing: "+why, zap.Time("snapshot", v.time))
		c.refused(ctx, reasonStaleView, len(v.targets))
		return nil
	}
	res := c.engine.evaluate(v)
	for _, t := range res.trips {
		c.logger.Warn("workload rule acted on nothing", zap.String("rule", t.rule.name), zap.String("reason", t.reason),
			zap.Int("matches", t.matches), zap.Int("max_matches", t.rule.maxMatches), zap.Int("max_actions_per_minute", t.rule.perMinute))
		c.refused(ctx, t.reason, t.matches)
	}
	if len(res.firings) == 0 {
		return nil
	}
	logs := plog.NewLogs()
	rl := logs.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr(pipeline.AttrHostName, v.host)
	if v.dialect != "" {
		rl.Resource().Attributes().PutStr(pipeline.AttrDialect, v.dialect)
	}
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName(scopeName)
	observed := pcommon.NewTimestampFromTime(c.now())
	for i := range res.firings {
		f := &res.firings[i]
		outcome, detail := c.act(ctx, v, f, interval)
		appendEvent(sl.LogRecords(), f, outcome, detail, v.time, observed)
		c.telemetry.WorkloadrulesFirings.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(
			attribute.String("action", f.rule.action.String()), attribute.String("outcome", outcome))))
	}
	return c.next.ConsumeLogs(ctx, logs)
}

// stale says why the view is too old to act on; "" when it is not. Without
// max_view_age, the limit is twice the interval between the last two
// snapshots, unknown (so stale) at the first.
func (c *workloadRules) stale(v *view, interval time.Duration, first bool) string {
	if v.time.IsZero() {
		return "the snapshot has no time"
	}
	limit := c.cfg.MaxViewAge
	if limit == 0 {
		if first || interval <= 0 {
			return "the collection interval is not known yet (one snapshot only, or a clock that went back), so neither is how old a view may be"
		}
		limit = 2 * interval
	}
	if age := c.now().Sub(v.time); age > limit {
		return "the snapshot is " + age.Round(time.Millisecond).String() + " old, more than " + limit.String() +
			" (max_view_age, or twice the collection interval): pids may have been reused since"
	}
	return ""
}

// act carries out one firing: nothing in observe mode, a log line for log,
// else the action through the action path; interval is the time since the
// snapshot before.
func (c *workloadRules) act(ctx context.Context, v *view, f *firing, interval time.Duration) (outcome, detail string) {
	r, t := f.rule, f.target
	switch {
	case f.supersededBy != nil:
		return outcomeSuperseded, "rule " + f.supersededBy.name + " (" + f.supersededBy.action.String() + ") acted on the query"
	case !r.enforce:
		return outcomeObserved, "observe mode: would " + r.action.String()
	case r.action == actionLog:
		return outcomeLogged, ""
	}
	actx, cancel := context.WithTimeout(ctx, c.cfg.ActionTimeout)
	defer cancel()
	err := c.actor.Act(actx, Target{Session: t.key.session, PID: t.pid, BackendStart: t.backendStart, QueryStart: t.queryStart,
		CommandCount: t.key.ccnt, SnapshotTime: v.time, Interval: interval}, r.name, r.action.String(), r.group)
	if err != nil {
		return outcomeFailed, err.Error()
	}
	return outcomeDone, ""
}

func (c *workloadRules) refused(ctx context.Context, reason string, n int) {
	if n > 0 {
		c.telemetry.WorkloadrulesRefusals.Add(ctx, int64(n), metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reason))))
	}
}
