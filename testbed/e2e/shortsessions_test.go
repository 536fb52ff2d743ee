// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// TestShortSessionsTellHowTheyEnded runs sessions as the churn workload's
// (connect, a short statement, disconnect; each seen by one snapshot and
// gone about a scrape later), several at once as make run does, on the
// collector of config/testbed.yaml: every one's session event says it
// ended by a client disconnect, as its coordinator backend's exit record
// tells (issue 42: 1 % of them ended unknown).
func TestShortSessionsTellHowTheyEnded(t *testing.T) {
	needBinaries(t)
	c := cluster.Start(t, cluster.Options{Hosts: 1, SegmentsPerHost: 1, Dialect: dialect.GP6})
	ctx := await.Context(t)
	s := launch(ctx, t, c, StackOptions{
		Binaries: bins, Config: configPath("testbed.yaml"), Dir: t.TempDir(), OTLPKeep: 400,
		// A session whose exit is lost waits for it the longest window: keep it short.
		CollectorArgs: []string{"--set=processors::snapshotdiff::windows=[3s,6s]", "--set=exporters::sessionstate::last_metrics_window=3s"},
	})
	api := dialAPI(t, s.API)
	waitFor(t, "the collector's first snapshot", func() (bool, string) {
		states, err := allSessions(ctx, api)
		return err == nil && len(states) > 0, fmt.Sprint(err)
	})

	const streams, sessionsPerStream = 6, 8
	var (
		mu       sync.Mutex
		sessions []int64
	)
	oneSession := func() error {
		conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close(context.Background()) }()
		var sessID int64
		if err := conn.QueryRow(ctx, "SELECT sess_id FROM pg_catalog.pg_stat_activity WHERE pid = pg_backend_pid()").Scan(&sessID); err != nil {
			return err
		}
		// Seen by a snapshot (its events exist), then a short statement and gone.
		if err := await.Poll(ctx, func() error {
			st, err := stateOf(ctx, api, int(sessID))
			if err != nil || st == nil {
				return fmt.Errorf("session %d not in the API yet (%v)", sessID, err)
			}
			return nil
		}); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, "SELECT pg_sleep(0.2)"); err != nil {
			return err
		}
		pid := int(conn.PgConn().PID())
		if err := conn.Close(ctx); err != nil {
			return err
		}
		mu.Lock()
		sessions = append(sessions, sessID)
		mu.Unlock()
		return awaitExit(ctx, pid)
	}
	var wg sync.WaitGroup
	errs := make(chan error, streams*sessionsPerStream)
	for range streams {
		wg.Go(func() {
			for range sessionsPerStream {
				if err := oneSession(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	ended := map[int64]*events.EndedSession{}
	waitFor(t, "every session's event", func() (bool, string) {
		if exited, err := s.Collector.Exited(); exited {
			t.Fatalf("the collector exited (%v): %s", err, s.Collector.LogTail(2000))
		}
		for _, lr := range s.Sink.LogRecords() {
			if lr.EventName() != events.EventSessionEnd {
				continue
			}
			if ev, err := pipelinetest.DecodeSessionEvent(lr.Attributes()); err == nil {
				ended[ev.Session.ID] = &ev
			}
		}
		var missing []int64
		for _, id := range sessions {
			if ended[id] == nil {
				missing = append(missing, id)
			}
		}
		return len(missing) == 0, fmt.Sprintf("no event yet of sessions %v", missing)
	})
	for _, id := range sessions {
		if ev := ended[id]; ev.EndReason != events.SessionClientDisconnect {
			t.Errorf("session %d ended %q (%s), want %q: its backend disconnected cleanly", id, ev.EndReason, ev.Message, events.SessionClientDisconnect)
		}
	}
	t.Logf("%d short sessions, each ended by a client disconnect", len(sessions))
}
