// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// A collector started beside a running session (old) sees a session that
// began after it started but before its first snapshot (new, as `make
// run`'s first round does: the scrape waits initial_delay), each running
// one statement after both were seen: only old is partial, for
// started_before, and neither statement is.
func TestFirstRoundIsPartialOnlyWhenItIs(t *testing.T) {
	needBinaries(t)
	c := cluster.Start(t, cluster.Options{Dialect: dialect.PostgreSQL})
	ctx := await.Context(t)
	connect := func(app string) *pgx.Conn {
		cfg, err := pgx.ParseConfig(c.CoordinatorDSN)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["application_name"] = app
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		return conn
	}
	old := connect("gpotel-partial-old")
	s := launch(ctx, t, c, StackOptions{
		Binaries: bins, Config: configPath("testbed.yaml"), Dir: t.TempDir(), OTLPKeep: 10,
		CollectorArgs: []string{"--set=receivers::gpsession::collection_interval=2s", "--set=receivers::gpsession::initial_delay=5s"},
	})
	api := dialAPI(t, s.API)
	newer := connect("gpotel-partial-new")
	newStarted := time.Now()
	conns := map[string]*pgx.Conn{"old": old, "new": newer}
	ids := map[int64]string{}
	for name, conn := range conns {
		ids[int64(conn.PgConn().PID())] = name // PostgreSQL's session id is the backend's pid
	}

	var firstSnapshot time.Time
	waitFor(t, "a snapshot with both sessions", func() (bool, string) {
		states, err := allSessions(ctx, api)
		seen := 0
		for _, st := range states {
			if _, ok := ids[st.GetSessionKey().GetSessId()]; ok {
				seen++
				firstSnapshot = st.GetTime().AsTime()
			}
		}
		return err == nil && seen == len(ids), fmt.Sprintf("%d of %d sessions (%v)", seen, len(ids), err)
	})
	if !newStarted.Before(firstSnapshot) {
		t.Logf("the new session connected at %s, after the snapshot at %s that first saw both: not the first round's case", newStarted, firstSnapshot)
	}
	for _, conn := range conns {
		if _, err := conn.Exec(ctx, "SELECT pg_sleep(0.2)"); err != nil {
			t.Fatal(err)
		}
	}
	done := time.Now()
	waitFor(t, "a snapshot after the statements", func() (bool, string) {
		states, err := allSessions(ctx, api)
		return err == nil && len(states) > 0 && states[0].GetTime().AsTime().After(done), fmt.Sprint(err)
	})
	for _, conn := range conns {
		if err := conn.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}

	queries := map[string][]events.FinishedQuery{}
	sessions := map[string][]events.EndedSession{}
	waitFor(t, "both sessions' events", func() (bool, string) {
		clear(queries)
		clear(sessions)
		for _, lr := range s.Sink.LogRecords() {
			switch lr.EventName() {
			case events.EventQueryEnd:
				if q, err := pipelinetest.DecodeQueryEvent(lr.Attributes()); err == nil && ids[q.Session.ID] != "" {
					queries[ids[q.Session.ID]] = append(queries[ids[q.Session.ID]], q)
				}
			case events.EventSessionEnd:
				if se, err := pipelinetest.DecodeSessionEvent(lr.Attributes()); err == nil && ids[se.Session.ID] != "" {
					sessions[ids[se.Session.ID]] = append(sessions[ids[se.Session.ID]], se)
				}
			}
		}
		return len(sessions) == len(ids), fmt.Sprintf("%d of %d session events", len(sessions), len(ids))
	})
	for name := range conns {
		if len(sessions[name]) != 1 || len(queries[name]) != 1 {
			t.Fatalf("%s: %d session events, %d query events; want 1 and 1", name, len(sessions[name]), len(queries[name]))
		}
		se, q := sessions[name][0], queries[name][0]
		t.Logf("%s session: partial %v %+v; its statement: partial %v %+v", name, se.Partial, se.PartialCause, q.Partial, q.PartialCause)
		if want := name == "old"; se.Partial != want || se.PartialCause.StartedBefore != want || len(se.PartialCause.Hosts) != 0 {
			t.Errorf("%s session: partial %v (%+v), want %v for started_before alone", name, se.Partial, se.PartialCause, want)
		}
		if q.Partial {
			t.Errorf("%s session's statement: partial (%+v), but it began after gpotel saw its session", name, q.PartialCause)
		}
	}
}
