// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/workload"
)

// TestRuleScopedByResourceQueue: on Greenplum 6 two roles in two resource
// queues each run a query; a rule scoped to one queue fires on that
// queue's session alone, and a rule excluding it on the other's alone.
func TestRuleScopedByResourceQueue(t *testing.T) {
	needBinaries(t)
	c := cluster.Start(t, cluster.Options{Hosts: 1, SegmentsPerHost: 2, Dialect: dialect.GP6})
	ctx := await.Context(t)
	const etlRole, etlQueue, adhocQueue = "gpetl", "etl_queue", "adhoc_queue"
	for _, in := range c.Instances() {
		conn, err := pgx.Connect(ctx, in.DSN)
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(ctx, "CREATE ROLE "+etlRole+" LOGIN")
		_ = conn.Close(context.Background())
		if err != nil {
			t.Fatalf("gpseg%d: %v", in.Content, err)
		}
	}
	for role, queue := range map[string]string{etlRole: etlQueue, cluster.UserRole: adhocQueue} {
		if err := c.AssignResourceQueue(ctx, role, queue); err != nil {
			t.Fatal(err)
		}
	}
	createRuleActionRole(ctx, t, c)
	scope := `        scope:
          users: [` + etlRole + `, ` + cluster.UserRole + `]
`
	rules := `      - name: etl-only
` + scope + `          resource_queues: [` + etlQueue + `]
        when:
          - gpotel.query.duration > 2s
        action: cancel
      - name: all-but-etl
` + scope + `          exclude_resource_queues: [` + etlQueue + `]
        when:
          - gpotel.query.duration > 2s
        action: log`
	overlay := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(overlay, fmt.Appendf(nil, rulesOverlay, dialect.GP6, c.Coordinator.Port, rules, "otlp_grpc"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := launch(ctx, t, c, StackOptions{Binaries: bins, Config: configPath("testbed.yaml"), Dir: t.TempDir(), OTLPKeep: 200,
		CollectorArgs: []string{"--config=" + overlay, "--set=receivers::gpsession::collection_interval=1s"}})

	// One segment burns CPU, the dispatcher waits: a running query each.
	const run = 30 * time.Second
	query := func(name, user string) *workload.Session {
		return startWorkload(t, c, workload.Spec{Name: name, Kind: workload.SkewedCPU, User: user, HotContent: 0, Duration: run, QueryDuration: run})
	}
	etl, adhoc := query("e2e-queue-etl", etlRole), query("e2e-queue-adhoc", cluster.UserRole)

	fired := func() []string {
		var out []string
		for _, e := range ruleEvents(s) {
			who := fmt.Sprintf("sess_id %d", e.Session.ID)
			switch e.Session.ID {
			case int64(etl.SessID()):
				who = etlQueue
			case int64(adhoc.SessID()):
				who = adhocQueue
			}
			out = append(out, e.Rule+" on "+who)
		}
		slices.Sort(out)
		return out
	}
	want := []string{"all-but-etl on " + adhocQueue, "etl-only on " + etlQueue}
	waitFor(t, "each rule's event", func() (bool, string) {
		if exited, err := s.Collector.Exited(); exited {
			t.Fatalf("the collector exited (%v): %s", err, s.Collector.LogTail(2000))
		}
		got := fired()
		return len(got) >= len(want), fmt.Sprint(got)
	})
	// Both queries ran past 2 s by the snapshot the later event came in: a
	// rule that saw the other queue's session would have fired on it too.
	if got := fired(); !slices.Equal(got, want) {
		t.Errorf("rule events %v, want %v", got, want)
	}
}
