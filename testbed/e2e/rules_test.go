// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// rulesOverlay adds a workloadrules connector to config/testbed.yaml: its
// snapshots in, its events out to the exporters named (the OTLP sink, with
// config/history.yaml the history), acting as gpotel_actions.
const rulesOverlay = `connectors:
  workloadrules:
    dialect: %s
    window: 10s
    actions:
      host: 127.0.0.1
      port: %d
      database: postgres
      user: gpotel_actions
      sslmode: disable
    rules:
%s
service:
  pipelines:
    metrics:
      exporters: [sessionstate, otlp_grpc, debug, finishedwork, workloadrules]
    logs/rules:
      receivers: [workloadrules]
      exporters: [%s]
`

// TestIdleInTransactionRuleTerminates: a session idle in a transaction
// past the rule's time is terminated, through the action path; one idle
// outside a transaction, under the same rule, is not.
func TestIdleInTransactionRuleTerminates(t *testing.T) {
	needBinaries(t)
	c := cluster.Start(t, cluster.Options{Dialect: dialect.PostgreSQL})
	ctx := await.Context(t)
	admin, err := pgx.Connect(ctx, c.CoordinatorDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	if _, err := admin.Exec(ctx, "CREATE ROLE gpotel_actions LOGIN; GRANT pg_signal_backend, pg_read_all_stats TO gpotel_actions"); err != nil {
		t.Fatal(err)
	}
	rule := `      - name: idle-tx
        scope:
          users: [` + cluster.UserRole + `]
        when:
          - gpotel.session.idle_in_transaction.time > 3s
        action: terminate
        mode: enforce`
	overlay := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(overlay, fmt.Appendf(nil, rulesOverlay, dialect.PostgreSQL, c.Coordinator.Port, rule, "otlp_grpc"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := launch(ctx, t, c, StackOptions{Binaries: bins, Config: configPath("testbed.yaml"), Dir: t.TempDir(), OTLPKeep: 50,
		CollectorArgs: []string{"--config=" + overlay, "--set=receivers::gpsession::collection_interval=1s"}})

	userDSN := fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", cluster.UserRole, c.Coordinator.Port, cluster.Database)
	open := func(inTransaction bool) (*pgx.Conn, int64) {
		conn, err := pgx.Connect(ctx, userDSN)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		if inTransaction {
			if _, err := conn.Exec(ctx, "BEGIN; SELECT 1"); err != nil {
				t.Fatal(err)
			}
		} else if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		return conn, int64(conn.PgConn().PID())
	}
	_, inTx := open(true)
	_, outside := open(false)

	alive := func(pid int64) bool {
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE pid = $1", pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	waitFor(t, "the rule terminates the session idle in a transaction", func() (bool, string) {
		return !alive(inTx), fmt.Sprintf("pid %d still in pg_stat_activity", inTx)
	})
	var acted []string
	waitFor(t, "the rule's event", func() (bool, string) {
		acted = acted[:0]
		for _, lr := range s.Sink.LogRecords() {
			if lr.EventName() != events.EventRuleAction {
				continue
			}
			pid, _ := lr.Attributes().Get(pipeline.AttrSessionPID)
			outcome, _ := lr.Attributes().Get(events.AttrRuleOutcome)
			acted = append(acted, fmt.Sprintf("pid %d: %s", pid.Int(), outcome.Str()))
		}
		return len(acted) > 0, fmt.Sprint(acted)
	})
	if want := fmt.Sprintf("pid %d: done", inTx); len(acted) != 1 || acted[0] != want {
		t.Errorf("rule events %v, want one: %s", acted, want)
	}
	// Every snapshot since has seen the other session idle outside a
	// transaction past the rule's time; it lives on.
	if !alive(outside) {
		t.Errorf("the session idle outside a transaction (pid %d) was ended too", outside)
	}
}
