// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/workload"
)

// TestSpillRuleCancelsOnlyTheSpiller: a spilling query and a CPU query run
// side by side on a Greenplum testbed; a spill rule in enforce mode cancels
// the first through the action path and never the second. Its event and
// its rule_actions row name the spiller's query, which ends cancelled with
// its executors and their workfiles gone, as a cancelled dispatcher's are
// on Greenplum; the CPU query runs on past the cancel and completes.
func TestSpillRuleCancelsOnlyTheSpiller(t *testing.T) {
	needBinaries(t)
	for _, opts := range cluster.SmallClusters(2) {
		if !opts.Dialect.Greenplum() {
			continue // PostgreSQL keeps no workfile view: no spill figure
		}
		t.Run(string(opts.Dialect), func(t *testing.T) {
			c := cluster.Start(t, opts)
			ctx := await.Context(t)
			if err := c.CreateHistoryDatabase(ctx); err != nil {
				t.Fatal(err)
			}
			createRuleActionRole(ctx, t, c)
			const ruleName = "runaway-spill"
			rule := `      - name: ` + ruleName + `
        scope:
          users: [` + cluster.UserRole + `]
        when:
          - gpotel.query.spill.size > 8MiB
        for: 2s
        action: cancel
        mode: enforce`
			overlay := filepath.Join(t.TempDir(), "rules.yaml")
			if err := os.WriteFile(overlay, fmt.Appendf(nil, rulesOverlay, opts.Dialect, c.Coordinator.Port, rule, "otlp_grpc, history"), 0o600); err != nil {
				t.Fatal(err)
			}
			s := launch(ctx, t, c, StackOptions{Binaries: bins, Config: configPath("testbed.yaml"), Dir: t.TempDir(), OTLPKeep: 200,
				CollectorArgs: []string{"--config=" + configPath("history.yaml"), "--config=" + overlay,
					"--set=receivers::gpsession::collection_interval=1s"}})

			// The CPU query runs one dispatched statement long enough to be
			// running still when the spiller is cancelled.
			const cpuRun = 30 * time.Second
			cpu := startWorkload(t, c, workload.Spec{Name: "e2e-rule-cpu", Kind: workload.CPU, User: cluster.UserRole, Duration: cpuRun, QueryDuration: cpuRun})
			spiller := startWorkload(t, c, workload.Spec{Name: "e2e-rule-spill", Kind: workload.Spill, User: cluster.UserRole, SpillBytes: 16 << 20,
				Duration: untilStopped(t)})

			var fired events.RuleAction
			waitFor(t, "the rule's event", func() (bool, string) {
				if exited, err := s.Collector.Exited(); exited {
					t.Fatalf("the collector exited (%v): %s", err, s.Collector.LogTail(2000))
				}
				events := ruleEvents(s)
				if len(events) == 0 {
					return false, "no gpotel.rule.action event yet"
				}
				fired = events[0]
				return true, ""
			})
			if fired.Session.ID != int64(spiller.SessID()) || fired.Rule != ruleName || fired.Mode != "enforce" || fired.Action != "cancel" ||
				fired.Outcome != "done" {
				t.Fatalf("the rule's event: %s %s %s on sess_id %d: %s (%s); want %s enforce cancel on the spiller's sess_id %d: done",
					fired.Rule, fired.Mode, fired.Action, fired.Session.ID, fired.Outcome, fired.OutcomeDetail, ruleName, spiller.SessID())
			}

			// The cancel ends the spiller's executors with its dispatcher,
			// and their workfiles with them.
			select {
			case <-spiller.Done():
			case <-ctx.Done():
				t.Fatalf("the spiller's session still runs after its cancel: pids %v", spiller.Pids())
			}
			var pgErr *pgconn.PgError
			if err := spiller.Wait(); !errors.As(err, &pgErr) || pgErr.Code != "57014" {
				t.Errorf("the spiller's client got %v, want its query cancelled (57014)", err)
			}
			waitFor(t, "no workfile left on any instance", func() (bool, string) {
				bytes, err := workfilesOnDisk(c)
				return err == nil && bytes == 0, fmt.Sprintf("%d bytes (%v)", bytes, err)
			})

			var spilled, cpuQuery *events.FinishedQuery
			waitFor(t, "the two queries' ends", func() (bool, string) {
				for _, lr := range s.Sink.LogRecords() {
					if lr.EventName() != events.EventQueryEnd {
						continue
					}
					q, err := pipelinetest.DecodeQueryEvent(lr.Attributes())
					switch {
					case err != nil:
					case q.Session.ID == fired.Session.ID && q.Start == fired.QueryStart:
						spilled = &q
					case q.Session.ID == int64(cpu.SessID()) && q.End > fired.Time:
						cpuQuery = &q
					}
				}
				return spilled != nil && cpuQuery != nil, fmt.Sprintf("spiller's %v, CPU query ending after the cancel %v", spilled != nil, cpuQuery != nil)
			})
			if spilled.CommandCount != fired.CommandCount || spilled.Status != events.QueryCancelled || spilled.SQLState != "57014" {
				t.Errorf("the spiller's query ccnt %d ended %s %s (%s); want ccnt %d (the rule's) cancelled 57014",
					spilled.CommandCount, spilled.Status, spilled.SQLState, spilled.ErrorMessage, fired.CommandCount)
			}
			if cpuQuery.Status != events.QueryCompleted {
				t.Errorf("the CPU query ended %s %s (%s); want completed", cpuQuery.Status, cpuQuery.SQLState, cpuQuery.ErrorMessage)
			}
			if spilled.EndedByRule != ruleName || cpuQuery.EndedByRule != "" {
				t.Errorf("the spiller's query ended by rule %q, the CPU query's by %q; want %q and none", spilled.EndedByRule, cpuQuery.EndedByRule, ruleName)
			}
			if err := cpu.Wait(); err != nil {
				t.Errorf("the CPU session: %v", err)
			}

			history := historyConn(ctx, t, c)
			var (
				mode, action, outcome string
				sessID, ccnt          pgtype.Int8
				queryStart            time.Time
			)
			waitFor(t, "the firing's row in rule_actions", func() (bool, string) {
				err := history.QueryRow(ctx, "SELECT rule_mode, rule_action, outcome, sess_id, ccnt, query_start FROM gpotel_history.rule_actions WHERE rule_name = $1",
					ruleName).Scan(&mode, &action, &outcome, &sessID, &ccnt, &queryStart)
				return err == nil, fmt.Sprint(err)
			})
			if mode != "enforce" || action != "cancel" || outcome != "done" || sessID.Int64 != fired.Session.ID || ccnt.Int64 != fired.CommandCount ||
				!queryStart.Equal(time.Unix(0, fired.QueryStart)) {
				t.Errorf("rule_actions row: %s %s %s sess_id %v ccnt %v query_start %v; the event's: enforce cancel done %d %d %v",
					mode, action, outcome, sessID, ccnt, queryStart, fired.Session.ID, fired.CommandCount, time.Unix(0, fired.QueryStart))
			}
			var endedBy pgtype.Text
			waitFor(t, "the spiller's row in queries", func() (bool, string) {
				err := history.QueryRow(ctx, "SELECT ended_by_rule FROM gpotel_history.queries WHERE sess_id = $1 AND ccnt = $2",
					fired.Session.ID, fired.CommandCount).Scan(&endedBy)
				return err == nil, fmt.Sprint(err)
			})
			if endedBy.String != ruleName {
				t.Errorf("the spiller's queries row: ended_by_rule %v, want %q", endedBy, ruleName)
			}
			// Every snapshot since the cancel has seen the CPU query run
			// under the same rule: still one firing, the spiller's.
			if events := ruleEvents(s); len(events) != 1 {
				t.Errorf("%d rule events, want the spiller's alone: %+v", len(events), events)
			}
		})
	}
}

// createRuleActionRole creates the rules' action role: on Greenplum 6,
// which has no pg_signal_backend, a superuser (docs/operations.md,
// Security model).
func createRuleActionRole(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	t.Helper()
	admin, err := pgx.Connect(ctx, c.CoordinatorDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close(context.Background()) }()
	sql := "CREATE ROLE gpotel_actions LOGIN; GRANT pg_signal_backend, pg_read_all_stats TO gpotel_actions"
	if c.Dialect == dialect.GP6 {
		sql = "CREATE ROLE gpotel_actions LOGIN SUPERUSER"
	}
	if _, err := admin.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// historyConn connects to the coordinator's history database.
func historyConn(ctx context.Context, t *testing.T, c *cluster.Cluster) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(c.CoordinatorDSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = "gpotel_history"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// ruleEvents are the gpotel.rule.action events the sink holds, in order.
func ruleEvents(s *Stack) []events.RuleAction {
	var out []events.RuleAction
	for _, lr := range s.Sink.LogRecords() {
		if lr.EventName() == events.EventRuleAction {
			out = append(out, ruleActionOf(lr.Attributes()))
		}
	}
	return out
}

// ruleActionOf reads the fields of a rule's event this package asserts on.
func ruleActionOf(attrs pcommon.Map) events.RuleAction {
	var a events.RuleAction
	for _, f := range events.RuleActionEventFields {
		v, ok := events.Value(attrs, f)
		if !ok {
			continue
		}
		switch f.Key {
		case events.AttrRuleTime:
			a.Time = v.(time.Time).UnixNano()
		case events.AttrRuleName:
			a.Rule = v.(string)
		case events.AttrRuleMode:
			a.Mode = v.(string)
		case events.AttrRuleAction:
			a.Action = v.(string)
		case events.AttrRuleOutcome:
			a.Outcome = v.(string)
		case events.AttrRuleOutcomeDetail:
			a.OutcomeDetail = v.(string)
		case pipeline.AttrTmID:
			a.Session.TmID = v.(int64)
		case pipeline.AttrSessionID:
			a.Session.ID = v.(int64)
		case pipeline.AttrQueryCommandCount:
			a.CommandCount = v.(int64)
		case pipeline.AttrQueryStart:
			a.QueryStart = v.(time.Time).UnixNano()
		case pipeline.AttrSessionPID:
			a.PID = v.(int64)
		}
	}
	return a
}
